"""Issue 37 item 2: a prune's leftovers are parsed, bounded, say what they were, and are finished
only when their owner is gone.

Real output dirs, a real live process as a leftover's owner, a real interrupted removal (an
immutable file, ``chattr +i``, where permitted) leaving a real leftover.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from migration_runs import one_json
from retention_runs import DAY, make_checkpoint

from fvconsole.core.retention import PruneRules, execute_prune, plan_prune, scan_output_dir
from fvconsole.core.shared.host import current_identity
from fvconsole.core.shared.process_use import ProcessUse

HIDDEN_PREFIX = ".fvconsole-pruning-"


def names(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir())


@pytest.fixture()
def live_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture()
def out(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    for step, days in ((100, 10), (200, 9), (300, 3)):
        make_checkpoint(out, step, age=days * DAY)
    return out


def _hide(out: Path, step: int, hidden: str) -> Path:
    (out / f"checkpoint-{step}").rename(out / hidden)
    return out / hidden


@pytest.mark.parametrize("way", ["old", "new"])
def test_a_leftover_whose_owner_still_runs_on_this_host_is_left_alone(out: Path, live_pid: int, cli,
                                                                       way: str) -> None:
    me = current_identity()
    hidden = (f".checkpoint-100.fvconsole-pruning-{me.label}-{me.key}-{live_pid}" if way == "old"
              else f"{HIDDEN_PREFIX}{'0' * 16}-{me.label}-{me.key}-{live_pid}")
    leftover = _hide(out, 100, hidden)
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--json"])
    assert code == 0, err
    plan = one_json(stdout)
    assert plan["delete"] == []
    assert any(str(leftover) in w and f"pid {live_pid}" in w and "still runs on this host" in w
               for w in plan["warnings"]), plan["warnings"]
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--keep-last", "1", "--yes", "--json", "--no-journal"])
    assert code == 0, err
    assert leftover.is_dir() and (leftover / "dcp" / ".metadata").is_file()
    assert names(out) == sorted([hidden, "checkpoint-300"])


def test_the_same_leftover_is_finished_once_its_owner_is_gone(out: Path, cli) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    me = current_identity()
    leftover = _hide(out, 100, f".checkpoint-100.fvconsole-pruning-{me.label}-{me.key}-{proc.pid}")
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--yes", "--json", "--no-journal"])
    assert code == 0, err
    assert [(r["step"], r["path"]) for r in one_json(stdout)["removed"]] == [(100, str(leftover))]
    assert names(out) == ["checkpoint-200", "checkpoint-300"]


def test_an_old_way_leftover_of_a_name_with_a_final_newline_is_finished(out: Path, cli) -> None:
    """``checkpoint-7\\n`` (FastVideo's pattern accepts it) left ``.checkpoint-7\\n.fvconsole-pruning-...``,
    which the old loose match never found again."""
    leftover = out / ".checkpoint-7\n.fvconsole-pruning-otherhost-0123456789ab-4242"
    make_checkpoint(out, 7, age=20 * DAY).rename(leftover)
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--yes", "--json", "--no-journal"])
    assert code == 0, err
    [removed] = one_json(stdout)["removed"]
    assert (removed["step"], removed["path"]) == (7, str(leftover))
    assert not os.path.lexists(leftover)


def test_a_step_of_240_digits_is_pruned_as_the_dry_run_promised(out: Path, cli) -> None:
    """The hidden name of ``checkpoint-<240 digits>`` (251 bytes) once exceeded 255 bytes: --yes failed
    with "File name too long" after the dry run listed it."""
    huge = out / ("checkpoint-" + "9" * 240)
    make_checkpoint(out, 1, complete=False, age=30 * DAY).rename(huge)
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--json"])
    assert code == 0, err
    assert [d["path"] for d in one_json(stdout)["delete"]] == [str(huge)]
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--yes", "--json", "--no-journal"])
    assert code == 0, err
    assert [r["path"] for r in one_json(stdout)["removed"]] == [str(huge)]
    assert names(out) == ["checkpoint-100", "checkpoint-200", "checkpoint-300"]


def _stuck(path: Path) -> Path:
    stuck = path / "dcp" / "stuck"
    stuck.write_bytes(b"s")
    if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not permitted here")
    return stuck


@pytest.mark.parametrize("name", ["checkpoint-7\n", "checkpoint-" + "7" * 240])
def test_an_interrupted_removal_leaves_a_bounded_leftover_that_names_its_checkpoint(out: Path, cli,
                                                                                   name: str) -> None:
    victim = out / name
    make_checkpoint(out, 7, complete=False, age=20 * DAY).rename(victim)
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(incomplete=True))
    assert str(victim) in [d.path for d in plan.delete]
    stuck = _stuck(victim)
    try:
        result = execute_prune(plan)
        assert len(result.errors) == 1 and name not in names(out)
        [hidden] = [n for n in names(out) if n.startswith(".")]
        assert hidden.startswith(HIDDEN_PREFIX) and len(hidden.encode()) <= 100
        subprocess.run(["chattr", "-i", str(out / hidden / "dcp" / "stuck")], check=True)
        code, stdout, err = cli(["checkpoints", "prune", str(out), "--json"])
        [item] = one_json(stdout)["delete"]  # a leftover goes whatever the rules
        assert item["path"] == str(out / hidden)
        assert repr(name) in item["reason"] and item["step"] == int(name.split("-", 1)[1])
        code, stdout, err = cli(["checkpoints", "prune", str(out), "--yes", "--json", "--no-journal"])
        assert code == 0, err
        assert not (out / hidden).exists()
    finally:
        for path in (stuck, *out.glob(f"{HIDDEN_PREFIX}*/dcp/stuck")):
            subprocess.run(["chattr", "-i", str(path)], check=False)
