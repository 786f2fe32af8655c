"""A prune as a front end runs it: the output dir's lock, the plan under it, execute, journal, release.

Why the migration's lock: ``.<output dir name>.fvconsole-lock`` beside the output dir is the
lock a migration into that dir takes (``core/migration/output_dir.py``), so a prune and a
migration there, or two prunes, from any host sharing the filesystem, exclude each other. The
plan is made while the lock is held, so a prune that ran after another judges what the first
one left (its leftovers included). Blocking: the console calls it from a thread worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from fvconsole.core.journal.log import JournalWrite, append_record
from fvconsole.core.migration.output_dir import lock_path
from fvconsole.core.retention.execute import PruneResult, RemovalProgress, execute_prune
from fvconsole.core.retention.plan import PrunePlan
from fvconsole.core.retention.record import prune_record
from fvconsole.core.shared.errors import EXIT_OK, EXIT_PARTIAL
from fvconsole.core.shared.interrupts import Interrupted, deferred
from fvconsole.core.shared.locks import FileLock, LockProbe


@dataclass(frozen=True)
class LockedPrune:
    """What one locked execution did: the plan it executed, its result, the journal line, the lock's notes."""

    plan: PrunePlan
    result: PruneResult
    journal: JournalWrite | None
    #: A stale lock taken over, the lock's release failing.
    warnings: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.result.ok else EXIT_PARTIAL


def prune_lock(output_dir: str) -> FileLock:
    """The lock that serialises prunes and migrations on ``output_dir`` (any host sharing the filesystem)."""
    out = os.path.abspath(output_dir)
    return FileLock(lock_path(out), subject=out, what="another prune or migration holds the lock", field="output_dir")


def probe_prune_lock(output_dir: str) -> LockProbe:
    """Read-only: what taking the lock would say now (a dry run's note)."""
    return prune_lock(output_dir).probe()


def _changed(result: PruneResult) -> bool:
    return bool(result.removed or result.errors or result.partial_bytes)


def prune_under_lock(output_dir: str, make_plan: Callable[[], PrunePlan], *, command: str, wait: float = 0.0,
                     journal_path: str | None = None, progress: RemovalProgress | None = None) -> LockedPrune:
    """Lock ``output_dir`` (LockBusy, exit 1, when held), ``make_plan()`` under it, execute, journal, unlock."""
    lock = prune_lock(output_dir)
    state = lock.acquire(wait)
    plan = None
    try:
        plan = make_plan()
        result = execute_prune(plan, progress)
        journal = None
        if journal_path is not None and _changed(result):
            code = EXIT_OK if result.ok else EXIT_PARTIAL
            journal = append_record(prune_record(plan, result, command=command, exit_code=code), journal_path)
    except Interrupted as stop:  # journal what was done, then unlock
        if journal_path is not None and plan is not None and isinstance(stop.partial, PruneResult) \
                and _changed(stop.partial):
            stop.journal = append_record(prune_record(plan, stop.partial, command=command,
                                                      exit_code=EXIT_PARTIAL if stop.done else stop.exit_code),
                                         journal_path)
        raise
    finally:
        with deferred(reraise=False):
            problem = lock.release()
    warnings = tuple(why.cli for why in (*state.notes, problem) if why is not None)
    return LockedPrune(plan, result, journal, warnings)
