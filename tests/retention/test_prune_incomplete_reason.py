"""A prune's reason for an incomplete checkpoint names what the listing found missing, by its kind.

Real ``checkpoint-<step>`` directories, each incomplete in one way: no ``dcp/``, no
``dcp/.metadata``, a FIFO or a directory in its place, RNG files missing. The expected reason is
written here by hand. Before, retention picked the first problem whose words held "interrupted" or
"missing": a checkpoint without ``metadata.json`` was pruned "(metadata.json is missing)" whatever
it lacked, and one whose ``.metadata`` is a FIFO got the bare "(incomplete)". Then every such reason
(deleted, kept unselected, kept within the grace) and ``checkpoints ls``'s warning called it an
"interrupted save", a FIFO or a directory at ``dcp/.metadata`` and no ``dcp/`` included: now they open
with the gaps' kinds in ``core/checkpoints/gaps.py``'s words, "interrupted save" only for a cut-off save.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from retention_runs import DAY, make_checkpoint

from fvconsole.core.checkpoints.gaps import GapKind
from fvconsole.core.retention import PruneRules, plan_prune, scan_output_dir
from fvconsole.core.shared.process_use import ProcessUse

#: How each is damaged → what its reasons open with (written by hand: gaps.py's words, briefly).
OPENS = {
    "no-dcp": "no dcp/ directory",
    "missing": "interrupted save",
    "fifo": "dcp/.metadata not a readable regular file",
    "directory": "dcp/.metadata not a readable regular file",
    "rng": "interrupted save",
}


def _incomplete(out: Path, how: str, *, step: int = 300, age: float = 2 * DAY) -> tuple[Path, str, GapKind]:
    """A complete checkpoint-``step`` (and a complete 400) made incomplete ``how``, ``age`` old: its dir, the
    reason's why and the gap's kind."""
    make_checkpoint(out, 400, age=DAY)
    ckpt = make_checkpoint(out, step, age=age)
    meta = ckpt / "dcp" / ".metadata"
    # Every case but the RNG one loses metadata.json too: its problem ("metadata.json is missing")
    # comes first in the listing's problems and holds the word "missing".
    if how != "rng":
        (ckpt / "metadata.json").unlink()
    if how == "no-dcp":
        for name in os.listdir(ckpt / "dcp"):
            (ckpt / "dcp" / name).unlink()
        (ckpt / "dcp").rmdir()
        return ckpt, "dcp/ directory is missing", GapKind.NO_DCP
    if how == "rng":
        (ckpt / "rng_state_rank1.pt").unlink()
        return ckpt, "1 of 2 rng_state_rank<r>.pt files missing", GapKind.RNG_MISSING
    stamp = meta.stat().st_mtime
    meta.unlink()
    if how == "missing":
        return ckpt, f"{meta}: missing", GapKind.DCP_METADATA_MISSING
    if how == "fifo":
        os.mkfifo(meta)
        os.utime(meta, (stamp, stamp))  # as old as the save it stands in
        return ckpt, f"{meta}: DCP metadata must be a regular file, but it is a FIFO", GapKind.DCP_METADATA_UNREADABLE
    if how == "directory":
        meta.mkdir()
        os.utime(meta, (stamp, stamp))
        return (ckpt, f"{meta}: DCP metadata must be a regular file, but it is a directory",
                GapKind.DCP_METADATA_UNREADABLE)
    raise AssertionError(how)


KINDS = ("no-dcp", "missing", "fifo", "directory", "rng")


@pytest.mark.parametrize("how", KINDS)
def test_each_kind_of_interrupted_save_is_pruned_for_what_it_lacks(how: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    ckpt, why, kind = _incomplete(out, how)
    scan = scan_output_dir(str(out), use=ProcessUse())
    (info,) = [c.info for c in scan.checkpoints if c.step == 300]
    assert not info.complete and [g.kind for g in info.gaps] == [kind], info.gaps
    plan = plan_prune(scan, PruneRules(incomplete=True))
    (doomed,) = plan.delete
    assert doomed.path == str(ckpt) and [r.code for r in doomed.why] == ["prune.incomplete"]
    assert doomed.why[0].value("why") == why, doomed.why
    assert doomed.reason.startswith(f"{OPENS[how]} ({why}), modified 2d"), doomed.reason
    assert [k.step for k in plan.kept] == [400]


@pytest.mark.parametrize("how", KINDS)
def test_an_unselected_one_is_kept_for_what_it_lacks(how: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _incomplete(out, how)
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(keep_last=1))
    (kept,) = [k for k in plan.kept if k.step == 300]
    assert [(r.code, r.detail, r.cli) for r in kept.why] == [
        ("keep.incomplete_unselected", f"{OPENS[how]}; not selected", f"{OPENS[how]}; --incomplete would select it")]


@pytest.mark.parametrize("how", KINDS)
@pytest.mark.parametrize("marked", [False, True])
def test_a_fresh_one_newer_than_the_newest_complete_waits_for_the_grace(how: str, marked: bool,
                                                                       tmp_path: Path) -> None:
    out = tmp_path / "out"
    _incomplete(out, how, step=500, age=120)
    rules = PruneRules(marked=frozenset({500})) if marked else PruneRules(incomplete=True)
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), rules)
    assert not plan.delete, plan.delete
    (kept,) = [k for k in plan.kept if k.step == 500]
    grace = next(r for r in kept.why if r.code == "keep.grace")
    opens = f"{OPENS[how]}, newer than the newest complete one, modified 2m "  # then "0s ago" or a second more
    assert grace.detail.startswith(opens) and grace.detail.endswith(
        " ago (within the 10m grace: it may still be being written)"), grace.detail
    assert grace.cli.startswith(opens) and grace.cli.endswith(
        " ago (within --grace 10m: it may still be being written)"), grace.cli


@pytest.mark.parametrize("how", KINDS)
def test_checkpoints_ls_warns_of_the_newest_for_what_it_lacks(how: str, tmp_path: Path, cli) -> None:
    out = tmp_path / "out"
    ckpt, _, _ = _incomplete(out, how, step=500, age=120)
    code, text, err = cli(["checkpoints", "ls", str(out), "--json"])
    assert code == 0, err
    warning = f"{ckpt}: newest checkpoint is incomplete ({OPENS[how]}); FastVideo's \"latest\" resume would pick it"
    picks = [w for w in json.loads(text)["warnings"] if "newest checkpoint" in w]
    if how == "no-dcp":  # FastVideo's latest skips a checkpoint without dcp/: it picks the complete 400
        assert picks == [], picks
    else:
        assert [w.split(" — ")[0] for w in picks] == [warning], picks


def test_the_grace_flag_says_incomplete_checkpoint(cli) -> None:
    code, text, _ = cli(["checkpoints", "prune", "--help"])
    assert code == 0
    flat = " ".join(text.split())
    assert ("--grace D an incomplete checkpoint newer than the newest complete one goes only once older than D "
            "(default 10m: it may still be being written)") in flat, flat
    assert "interrupted save newer" not in flat


def test_the_cli_prunes_a_fifo_metadata_checkpoint_saying_so(tmp_path: Path, cli) -> None:
    """End to end: the dry run's JSON reason, then ``--yes`` removes it (the FIFO is never opened)."""
    out = tmp_path / "out"
    ckpt, why, _ = _incomplete(out, "fifo")
    code, text, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--json", "--no-journal"])
    assert code == 0, err
    (doomed,) = json.loads(text)["delete"]
    assert doomed["step"] == 300 and doomed["reason"].startswith(
        f"dcp/.metadata not a readable regular file ({why}), modified 2d"), doomed
    code, text, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--yes", "--no-journal"])
    assert code == 0, err
    assert not os.path.lexists(ckpt) and os.path.isdir(out / "checkpoint-400")
