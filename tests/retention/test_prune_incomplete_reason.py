"""A prune's reason for an interrupted save names what the listing found missing, by its kind.

Real ``checkpoint-<step>`` directories, each incomplete in one way: no ``dcp/``, no
``dcp/.metadata``, a FIFO or a directory in its place, RNG files missing. The expected reason is
written here by hand. Before, retention picked the first problem whose words held "interrupted" or
"missing": a checkpoint without ``metadata.json`` was pruned "(metadata.json is missing)" whatever
it lacked, and one whose ``.metadata`` is a FIFO got the bare "(incomplete)".
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


def _incomplete(out: Path, how: str) -> tuple[Path, str, GapKind]:
    """A complete checkpoint-300 (and 400) made incomplete ``how``: its dir, the reason's why and the gap's kind."""
    make_checkpoint(out, 400, age=DAY)
    ckpt = make_checkpoint(out, 300, age=2 * DAY)
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
    assert doomed.reason.startswith(f"interrupted save ({why}), modified 2d"), doomed.reason
    assert [k.step for k in plan.kept] == [400]


def test_the_cli_prunes_a_fifo_metadata_checkpoint_saying_so(tmp_path: Path, cli) -> None:
    """End to end: the dry run's JSON reason, then ``--yes`` removes it (the FIFO is never opened)."""
    out = tmp_path / "out"
    ckpt, why, _ = _incomplete(out, "fifo")
    code, text, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--json", "--no-journal"])
    assert code == 0, err
    (doomed,) = json.loads(text)["delete"]
    assert doomed["step"] == 300 and doomed["reason"].startswith(f"interrupted save ({why}), modified 2d"), doomed
    code, text, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--yes", "--no-journal"])
    assert code == 0, err
    assert not os.path.lexists(ckpt) and os.path.isdir(out / "checkpoint-400")
