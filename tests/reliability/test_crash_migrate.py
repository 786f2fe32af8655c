"""Acceptance 1: SIGKILL `fvconsole migrate --yes` at many points of its file operations.

Uses the executor's test-only fault hook: ``FVCONSOLE_FAULT_TRACE`` lists the file-system
operations of a full run, ``FVCONSOLE_FAULT_KILL_AT=N`` SIGKILLs the process right before
the N-th. Kill points are spread evenly over the whole run (first to last operation).
After every kill: the legacy checkpoint is byte-identical, the output dir is either absent,
the previous complete set, or the new complete set with its receipt (never a receipt-less
mix), `sidecars verify` agrees with that, and the plain re-run repairs everything: it takes
over the killed run's lock (a warning on stderr naming that dead holder, a journal note),
cleans the staging dir and publishes; no `--break-lock` is needed on the host that ran it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .harness import (
    assert_no_traceback,
    digest_diff,
    run_cli,
    run_forked,
    run_inproc,
    tree_digest,
)
from .workspace import MigrationWorkspace

TRIALS_PER_SCENARIO = 18


def kill_points(total: int, n: int) -> list[int]:
    """``n`` operation numbers spread evenly over 1..total (always the first and the last)."""
    if total <= n:
        return list(range(1, total + 1))
    return sorted({1 + round(i * (total - 1) / (n - 1)) for i in range(n)})


def staging_leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.fvconsole-staging-"))


def lock_leftovers(out: Path) -> list[str]:
    """The lock file beside the output dir and any temp file of it."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.fvconsole-lock"))


def reset(out: Path, pristine: Path | None) -> None:
    """Back to the scenario's starting state: nothing, or a copy of the previous set."""
    if out.exists():
        shutil.rmtree(out)
    for name in staging_leftovers(out):
        shutil.rmtree(out.parent / name)
    for name in lock_leftovers(out):
        (out.parent / name).unlink()
    if pristine is not None:
        shutil.copytree(pristine, out)


def count_operations(ws: MigrationWorkspace, out: Path, trace: Path, *extra: str) -> list[str]:
    """The labelled file operations of one uninterrupted run (then the run is undone by the caller)."""
    result = run_cli(ws.migrate_args(out, *extra), env={"FVCONSOLE_FAULT_TRACE": str(trace)})
    assert result.returncode == 0, result.describe()
    # Each line is "<count> <label>".
    return [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]


def check_after_kill(
    ws: MigrationWorkspace, out: Path, previous: dict | None, capsys: pytest.CaptureFixture[str]
) -> str:
    """The crash-consistency invariants; returns what the kill left behind."""
    if not out.exists():
        assert previous is None, "a kill removed the previous complete set"
        verdict = run_inproc(ws.verify_args(out), capsys)
        assert verdict.returncode == 1, verdict.describe()
        assert_no_traceback(verdict)
        assert "does not exist" in verdict.stderr or str(out) in verdict.stderr, verdict.describe()
        return "nothing published"
    names = sorted(p.name for p in out.iterdir())
    sidecars = [n for n in names if n.startswith("dataloader_state_rank")]
    if previous is not None and tree_digest(out) == previous:
        outcome = "previous set intact"
    else:
        # Whatever is published must be a whole new set with its receipt, and only that.
        assert "migration_receipt.json" in names, f"receipt-less output after a kill: {names}"
        assert len(sidecars) == ws.world, f"partial set published: {names}"
        assert len(names) == ws.world + 1, f"stray files published: {names}"
        outcome = "new set published"
    verdict = run_inproc(ws.verify_args(out), capsys)
    assert verdict.returncode == 0, f"{outcome} but verify fails:\n{verdict.describe()}"
    return outcome


def rerun_repairs(ws: MigrationWorkspace, out: Path, capsys: pytest.CaptureFixture[str], killed_pid: int) -> None:
    """Documented recovery: run again (with --overwrite when a set exists); a lock the killed run
    left is taken over with a warning and a journal note; verify passes and nothing of the
    killed run is left."""
    extra = ("--overwrite",) if out.exists() else ()
    lock = out.parent / f".{out.name}.fvconsole-lock"
    had_lock = lock.exists()
    journal = Path(os.environ["FVCONSOLE_JOURNAL"])
    lines = journal.read_text().splitlines() if journal.exists() else []
    again = run_inproc(ws.migrate_args(out, *extra), capsys)
    assert again.returncode == 0, again.describe()
    took = f"warning: {lock}: took over the stale lock of pid {killed_pid} "
    if had_lock:
        assert took in again.stderr and "no longer running on this host" in again.stderr, again.stderr
        (note,) = [json.loads(x) for x in journal.read_text().splitlines()[len(lines):]]
        assert f"took over the stale lock of pid {killed_pid} " in note["details"]["lock_taken_over"], note
    else:
        assert took not in again.stderr, again.stderr
    verdict = run_inproc(ws.verify_args(out), capsys)
    assert verdict.returncode == 0, verdict.describe()
    assert staging_leftovers(out) == [], "the re-run did not clean the crashed run's staging dir"
    assert lock_leftovers(out) == [], "the re-run left a lock file (or a temp file of one)"


@pytest.mark.slow
@pytest.mark.fault("crash: migrate", "SIGKILL at the N-th file operation, fresh output dir")
def test_kill_fresh_migration_everywhere(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], trials
) -> None:
    out = tmp_path / "state-fresh"
    ckpt_before = tree_digest(ws.checkpoint)
    ops = count_operations(ws, out, tmp_path / "trace.txt")
    assert any(op.startswith("rename") for op in ops), ops
    points = kill_points(len(ops), TRIALS_PER_SCENARIO)
    for n in points:
        reset(out, None)
        result = run_forked(ws.migrate_args(out), env={"FVCONSOLE_FAULT_KILL_AT": str(n)})
        assert result.killed_by == 9, f"kill point {n} ({ops[n - 1]}) not reached:\n{result.describe()}"
        assert digest_diff(ckpt_before, tree_digest(ws.checkpoint)) == []
        trials.add(check_after_kill(ws, out, None, capsys))
        rerun_repairs(ws, out, capsys, result.pid)
    assert trials.count == len(points) >= min(len(ops), TRIALS_PER_SCENARIO)
    assert digest_diff(ckpt_before, tree_digest(ws.checkpoint)) == []


@pytest.mark.slow
@pytest.mark.fault("crash: migrate", "SIGKILL at the N-th file operation, --overwrite of a previous set")
def test_kill_overwrite_migration_everywhere(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], trials
) -> None:
    out = tmp_path / "state-over"
    pristine = tmp_path / "pristine-previous-set"
    first = run_inproc(ws.migrate_args(pristine), capsys)
    assert first.returncode == 0, first.describe()
    previous = tree_digest(pristine)
    ckpt_before = tree_digest(ws.checkpoint)
    reset(out, pristine)
    ops = count_operations(ws, out, tmp_path / "trace.txt", "--overwrite")
    assert any(op.startswith(("exchange", "rename")) for op in ops), ops
    points = kill_points(len(ops), TRIALS_PER_SCENARIO)
    for n in points:
        reset(out, pristine)
        assert tree_digest(out) == previous
        result = run_forked(ws.migrate_args(out, "--overwrite"), env={"FVCONSOLE_FAULT_KILL_AT": str(n)})
        assert result.killed_by == 9, f"kill point {n} ({ops[n - 1]}) not reached:\n{result.describe()}"
        assert digest_diff(ckpt_before, tree_digest(ws.checkpoint)) == []
        trials.add(check_after_kill(ws, out, previous, capsys))
        rerun_repairs(ws, out, capsys, result.pid)
    assert trials.count == len(points)
    assert trials.outcomes["previous set intact"] >= 1 and trials.outcomes["new set published"] >= 1


@pytest.mark.fault("crash: migrate", "SIGKILL before the first file operation (quick check)")
def test_kill_at_first_operation_leaves_nothing(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], trials
) -> None:
    out = tmp_path / "state-quick"
    result = run_cli(ws.migrate_args(out), env={"FVCONSOLE_FAULT_KILL_AT": "1"})
    assert result.killed_by == 9, result.describe()
    trials.add(check_after_kill(ws, out, None, capsys))
    assert trials.outcomes == {"nothing published": 1}
    rerun_repairs(ws, out, capsys, result.pid)
