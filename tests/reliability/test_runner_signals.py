"""Issue 35: every operation through a real SIGTERM at each stage of the one runner.

Each operation is the real one on real files (a training output dir for the prune, a cache root
for the eviction, a real DCP checkpoint for the migration, per-node caches behind the stand-in
srun for the fleet eviction) run by ``run_locked`` under the CLI's signal handlers. The signal
is real (``os.kill`` of this process), sent at one stage: before the locks (the operation's
checks), under them (before the plan), while executing (from its progress report, once it has
done something) and while releasing (from inside the lock's release; the fleet eviction has no
lock on the login side, so from its journaling, the step after release). Each run proves: the
stop and its exit code (128 + 15 when nothing was changed, 3 once something was), the partial
result reported, the locks released, a journal line exactly when execution had begun changing
something, and the signal kept (none pending, none dropped).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from retention_runs import DAY, make_checkpoint

from fvconsole.core.journal import appender
from fvconsole.core.shared import interrupt_handlers, interrupts, run_locked

STAGES = ("before the locks", "under the locks", "while executing", "while releasing")
TERM = signal.SIGTERM


def sigterm() -> None:
    os.kill(os.getpid(), TERM)


class ReleaseWithSignal:
    """A lock whose release is interrupted by SIGTERM (the runner defers it)."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def acquire(self, wait: float = 0.0, break_stale: bool = False) -> Any:
        return self.lock.acquire(wait, break_stale=break_stale)

    def release(self) -> Any:
        sigterm()
        return self.lock.release()


class Signalled:
    """The real operation, with SIGTERM sent at ``stage``."""

    def __init__(self, operation: Any, stage: str) -> None:
        self.operation = operation
        self.stage = stage
        self.locked = False

    def prepare(self) -> None:
        self.operation.prepare()
        if self.stage == "before the locks":
            sigterm()

    def locks(self) -> tuple[Any, ...]:
        locks = tuple(self.operation.locks())
        self.locked = bool(locks)
        return tuple(ReleaseWithSignal(lock) for lock in locks) if self.stage == "while releasing" else locks

    def plan(self) -> Any:
        if self.stage == "under the locks":
            sigterm()
        return self.operation.plan()

    def execute(self, plan: Any, progress: Any, on_stop: Callable) -> Any:
        return self.operation.execute(plan, progress, on_stop)

    def finished(self, plan: Any, result: Any, signum: int) -> Any:
        return self.operation.finished(plan, result, signum)

    def record(self, run: Any) -> Any:
        if self.stage == "while releasing" and not self.locked:  # no lock: the step after release, journaling
            sigterm()
        return self.operation.record(run)


def signal_at_progress(after: int) -> Callable[..., None]:
    """A progress report that sends SIGTERM on its ``after``-th call (something is done by then)."""
    calls = [0]

    def progress(*_args: Any) -> None:
        calls[0] += 1
        if calls[0] == after:
            sigterm()

    return progress


# ---------------------------------------------------------------- the operations on real files


def prune_case(tmp: Path) -> dict:
    from fvconsole.core.migration.output_dir import migration_lock
    from fvconsole.core.retention import PruneOperation, PruneResult, plan_prune, scan_output_dir

    out = tmp / "out"
    out.mkdir()
    for step, days in ((100, 10), (200, 9), (300, 8)):
        make_checkpoint(out, step, age=days * DAY)
    from fvconsole.core.retention import PruneRules

    rules = PruneRules(keep_last=1)
    operation = PruneOperation(str(out), lambda: plan_prune(scan_output_dir(str(out)), rules), command="test prune")
    return {"operation": operation, "progress": signal_at_progress(1), "account": PruneResult,
            "released": lambda: not os.path.lexists(migration_lock(str(out)).path),
            "executing_changes": True}


def eviction_case(tmp: Path) -> dict:
    from fvconsole.core.cache import (
        EvictionOperation,
        EvictionSelectors,
        StoppedEviction,
        plan_eviction,
        scan_cache,
    )
    from fvconsole.core.cache.roots import EVICTOR
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp / "cache"
    for seed in range(3):
        write_cache_entry(root, seed=seed, num_shards=2, tensor_bytes=1024)
    operation = EvictionOperation(
        str(root), lambda: plan_eviction(scan_cache(str(root), 0), EvictionSelectors(max_gb=0.0), grace_seconds=0),
        command="test evict")

    def released() -> bool:
        return not os.path.lexists(EVICTOR.lock_file(str(root))) and not os.path.lexists(EVICTOR.record(str(root)))

    return {"operation": operation, "progress": signal_at_progress(2), "account": StoppedEviction,
            "released": released, "executing_changes": True}


def migration_case(tmp: Path) -> dict:
    from migration_runs import build_legacy, plan_for

    from fvconsole.core.migration import MigrationOperation
    from fvconsole.core.migration.failure import MigrationFailure
    from fvconsole.core.migration.output_dir import migration_lock

    legacy = build_legacy(str(tmp))
    operation = MigrationOperation(plan_for(legacy), command="test migrate")
    return {"operation": operation, "progress": signal_at_progress(1), "account": MigrationFailure,
            "released": lambda: not os.path.lexists(migration_lock(legacy.out).path),
            # staging began: journaled, but the output dir is unchanged (128 + signal)
            "executing_changes": False, "executing_journals": True}


def fleet_case(tmp: Path) -> dict:
    from slurm_cluster import write_fake_srun

    from fvconsole.core.cache import EvictionSelectors
    from fvconsole.core.fleet import (
        DispatchOptions,
        FleetEvictionOperation,
        FleetEvictionResult,
        NodeEviction,
        preview_fleet_eviction,
        select_nodes,
    )
    from fvconsole.demo.cache_builders import make_key, write_cache_entry

    for node in ("a1", "a2"):
        write_cache_entry(tmp / node / "wc", make_key(f"m-{node}"), num_shards=2, present=[0],
                          status="incomplete", tensor_bytes=256)
    options = DispatchOptions(srun=write_fake_srun(tmp / "bin"), timeout=60)
    root = str(tmp / "{node}" / "wc")
    plan = preview_fleet_eviction(select_nodes("a[1-2]"), root, NodeEviction(EvictionSelectors(invalid=True)), options,
                                  slurm=None)
    operation = FleetEvictionOperation(plan, command="test fleet evict", options=options)
    return {"operation": operation, "progress": signal_at_progress(1), "account": FleetEvictionResult,
            "released": lambda: True, "executing_changes": True, "executing_account": type(None),
            "journaled_after_release": 0}


CASES = {"prune": prune_case, "cache eviction": eviction_case, "migration": migration_case,
         "fleet eviction": fleet_case}


@pytest.mark.fault("signal: runner", "SIGTERM at each stage of the one runner, for every operation")
@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("kind", list(CASES))
def test_sigterm_at_each_stage_of_the_runner(kind: str, stage: str, tmp_path: Path, trials) -> None:
    case = CASES[kind](tmp_path)
    journal = tmp_path / "journal.jsonl"
    with interrupt_handlers() as installed:
        assert installed, "the test runs in the main thread: the CLI's handlers are installed"
        run = run_locked(Signalled(case["operation"], stage), journal=appender(str(journal)),
                         progress=case["progress"] if stage == "while executing" else None)
        assert interrupts._STATE.pending is None, "a signal was left pending"

    # No signal lost: the run says it was stopped, by SIGTERM.
    assert run.stop is not None and run.stop.signum == TERM, run
    lines = [json.loads(x) for x in journal.read_text().splitlines()] if journal.exists() else []
    assert case["released"](), "a lock was left behind"
    if stage in ("before the locks", "under the locks"):  # nothing was changed
        assert run.stop.exit_code == 128 + TERM and not run.stop.changed
        assert run.plan is None and run.result is None and run.stop.account is None
        assert lines == [], "nothing was changed: no journal line"
    elif stage == "while executing":
        changes = case["executing_changes"]
        assert run.stop.exit_code == (3 if changes else 128 + TERM), run.stop
        assert isinstance(run.stop.account, case.get("executing_account", case["account"])), run.stop
        assert (run.stop.done or run.stop.note) and run.stop.message.startswith("interrupted by SIGTERM; ")
        assert run.result is None
        journaled = changes or case.get("executing_journals", False)
        assert len(lines) == (1 if journaled else 0), lines
        if journaled:
            assert lines[0]["exit_code"] == run.stop.exit_code
    else:  # while releasing: the finished run stands; the signal is reported with what was done
        assert run.result is not None and run.stop.exit_code == 3 and run.stop.changed, run.stop
        assert isinstance(run.stop.account, case["account"]), run.stop
        # The line says how the run ended; a signal that comes while the line is written (the fleet's
        # login side holds no lock) is acted on after it: the line was the finished run's.
        assert len(lines) == 1 and lines[0]["exit_code"] == case.get("journaled_after_release", 3), lines
    trials.add(f"{kind}: exit {run.stop.exit_code}, {len(lines)} journal line")
