"""An eviction as a front end runs it: root lock, plan under it, execute, journal, release.

Why one function: the CLI and the console must do these steps in the same order and journal
the same fields. The root is checked before anything is written beside it; the plan is made
(or confirmed) while the lock is held, so a second evictor that waited plans against what
the first one left; the journal line is appended still under the lock, so a root's lines are
in execution order. ``plan_eviction`` and ``execute_eviction`` themselves stay free of locks
and journal side effects (tests and tools call them directly).

Blocking (waits up to ``wait`` seconds, then removes files): the console calls it from a
thread worker. Raises :class:`~fvconsole.core.shared.locks.LockBusy` (exit 1) when another
eviction holds the root, FvError for a refused root; never prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.evict import EvictionResult, StoppedEviction, execute_eviction
from fvconsole.core.cache.lock import EvictorLock, LockState
from fvconsole.core.cache.plan import EvictionPlan
from fvconsole.core.cache.record import eviction_record
from fvconsole.core.cache.roots import check_root_early
from fvconsole.core.journal.interrupts import Interrupted, deferred
from fvconsole.core.journal.log import JournalWrite, append_record
from fvconsole.core.shared.errors import EXIT_OK, EXIT_PARTIAL
from fvconsole.core.shared.host import node_names
from fvconsole.core.shared.progress import Progress


@dataclass(frozen=True)
class LockedEviction:
    """What one locked execution did: the plan it executed, its result, the lock, the journal line."""

    plan: EvictionPlan
    result: EvictionResult
    lock: LockState
    journal: JournalWrite | None  # None: no journal asked for, or nothing was changed
    release_problem: str | None = None

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.result)

    def envelope(self) -> dict[str, Any]:
        """``cache evict --yes --json``'s document: the result, the node, the cap and free-space target the
        plan went by, how the lock was held and the journal line."""
        plan = self.plan
        return {**self.result.to_json(), **node_names(), "cap_bytes": plan.cap_bytes, "lock": self.lock.to_json(),
                "journal": self.journal.to_json() if self.journal is not None else None,
                "plan_free_target": plan.free_space.to_json() if plan.free_space else None}

    @property
    def done_text(self) -> str:
        """``the eviction ran: N entries evicted from ROOT``: what stands whatever happens next (a signal, a
        failed write of the output)."""
        return f"the eviction ran: {self.result.evicted_text}"

    @property
    def warnings(self) -> tuple[str, ...]:
        """What both front ends warn of beside the result: exclusion not in force, the record of
        an evictor that died taken over (also journalled), the lock's release failing."""
        return tuple(p for p in (self.lock.problem, self.lock.took_over, self.release_problem) if p)


def exit_code_of(result: EvictionResult) -> int:
    """0, or 3 when some entry could not be removed."""
    return EXIT_OK if result.ok else EXIT_PARTIAL


def changed_anything(result: EvictionResult) -> bool:
    """Whether an execution removed something or failed part-way: what the journal records."""
    return bool(result.evicted or result.errors or result.partial_bytes)


def evict_under_lock(root: str, make_plan: Callable[[], EvictionPlan], *, command: str, wait: float = 0.0,
                     force: bool = False, journal_path: str | None = None,
                     progress: Progress | None = None) -> LockedEviction:
    """Lock ``root`` (waiting up to ``wait`` s), ``make_plan()`` under the lock, execute it, journal, unlock.

    ``make_plan``: the CLI scans and plans afresh; the console returns the plan the operator
    confirmed (each entry is re-checked before removal either way). ``force``: the plan's
    --force (a mount point as root is then allowed). ``journal_path`` None writes no line;
    otherwise a line is appended when something was removed or failed part-way.
    """
    check_root_early(root, force)
    lock = EvictorLock(root, command=command)
    plan = None
    try:
        state = lock.acquire(wait)
        plan = make_plan()
        result = execute_eviction(plan, progress=progress)
        journal = None
        if journal_path is not None and changed_anything(result):
            record = eviction_record(plan, result, command=command, exit_code=exit_code_of(result),
                                     lock_taken_over=state.took_over)
            journal = append_record(record, journal_path)
    except Interrupted as stop:  # Ctrl-C, SIGTERM, SIGHUP: journal what was done, then unlock
        stopped = stop.partial
        if journal_path is not None and plan is not None and isinstance(stopped, StoppedEviction) \
                and changed_anything(stopped.result):
            code = EXIT_PARTIAL if stop.done else stop.exit_code
            stop.journal = append_record(eviction_record(plan, stopped.result, command=command, exit_code=code,
                                                         lock_taken_over=lock.state.took_over if lock.state else None),
                                         journal_path)
        raise
    finally:
        with deferred(reraise=False) as released:  # the holder record goes with the lock, never after it
            release_problem = lock.release()
    done = LockedEviction(plan, result, state, journal, release_problem)
    if released.signum is not None:  # arrived while unlocking a finished eviction: it stands
        raise Interrupted(released.signum, done=done.done_text if changed_anything(result) else None,
                          note=None if changed_anything(result) else "nothing was evicted", partial=StoppedEviction(result))
    return done
