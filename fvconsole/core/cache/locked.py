"""An eviction as a front end runs it: the request, and the eviction as an operation of the one runner.

Why one module: the CLI and the console must do these steps in the same order and journal
the same fields. An :class:`EvictionRequest` is a command line's (or the console dialog's)
eviction, validated before any disk access; ``request.plan()`` is the dry run's plan and
``request.operation(...)`` the ``--yes``, an :class:`EvictionOperation` that
``core/shared/operation.py: run_locked`` runs: the root is checked before anything is written
beside it; the plan is made (or confirmed) while the lock is held, so a second evictor that
waited plans against what the first one left; the journal line is appended once the lock is
released, when it is known how the run ended.
``plan_eviction`` and ``execute_eviction`` themselves stay free of locks and journal side
effects (tests and tools call them directly). ``request.preview()`` is the dry run's
:class:`EvictionPreview`: the plan and the eviction running in the root now, if any.

One evictor per root (``roots.EVICTOR``: an OFD write lock on ``.fvconsole-evictor.lock``
inside the root, the holder record ``.<root>.fvconsole-evictor`` beside it, through
``core/shared/locks/root_lock.py: RootLock``). Dry runs never take it (``roots.probe_evictor`` only reads).

Blocking (waits up to ``wait`` seconds, then removes files): the console runs it in a
thread worker. The runner raises :class:`~fvconsole.core.shared.locks.LockBusy` (exit 1) when another
eviction holds the root, FvError for a refused root; never prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.evict import EvictionResult, StoppedEviction, execute_eviction
from fvconsole.core.cache.plan import EvictionPlan, plan_eviction
from fvconsole.core.cache.roots import check_root_early, evictor_lock, probe_evictor
from fvconsole.core.cache.scan import DEFAULT_GRACE_SECONDS, scan_cache
from fvconsole.core.cache.selectors import EvictionSelectors
from fvconsole.core.journal.log import CACHE_EVICT, JournalRecord, JournalWrite, result_for, shorten
from fvconsole.core.shared import flags
from fvconsole.core.shared.errors import EXIT_OK, EXIT_PARTIAL, FvError
from fvconsole.core.shared.host import node_names
from fvconsole.core.shared.humanize import human_bytes
from fvconsole.core.shared.locks import Holder, LockState, RootLock
from fvconsole.core.shared.operation import Run, Stop
from fvconsole.core.shared.progress import Progress
from fvconsole.core.shared.reasons import Reason, min_free_words


@dataclass(frozen=True)
class EvictionPreview:
    """The dry run: the plan, and the eviction of this root running now (what ``--yes`` would wait for)."""

    plan: EvictionPlan
    running: Holder | None = None

    def envelope(self) -> dict[str, Any]:
        """``cache evict --json``'s document: the plan, the node, and the eviction running now, if any."""
        return {**self.plan.to_json(), **node_names(),
                "running_eviction": self.running.to_json() if self.running else None}

    @property
    def warnings(self) -> tuple[str, ...]:
        """A free-space target the plan cannot reach: a warning, never an error (``cache evict --help``)."""
        free = self.plan.free_space
        return () if free is None or free.reached else (f"{self.plan.root}: {free.summary()}",)


@dataclass(frozen=True)
class EvictionRequest:
    """One eviction as asked: the root, what it selects and its protections, validated (no disk access yet).

    ``grace``: entries written or used more recently are skipped; ``force``: also entries in use
    or being written, and a mount point or empty-looking root. A front end builds it from its
    own controls (``cli/cache.py``: the command line's values; the console's dialog).
    """

    root: str
    selectors: EvictionSelectors
    grace: float = DEFAULT_GRACE_SECONDS
    force: bool = False

    def plan(self) -> EvictionPlan:
        """Scan the root and plan (read-only).

        A ``--key`` that names no entry refuses the whole eviction (exit 1, nothing evicted), as
        ``cache verify --key`` does: it is a typo or the wrong root, and an eviction that went on
        without it would report success for what the operator did not ask for.
        """
        plan = plan_eviction(scan_cache(self.root, self.grace), self.selectors, grace_seconds=self.grace,
                             force=self.force)
        missing = [s.key for s in plan.skipped if s.code == "skip.missing"]
        if missing:
            more = f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
            raise FvError(f"{missing[0]}: not an entry of {self.root} ({flags.KEY}){more}; nothing evicted",
                          details={"missing": missing})
        return plan

    def preview(self) -> EvictionPreview:
        """The dry run: :meth:`plan`, and the eviction running in the root now (read only, no lock)."""
        plan = self.plan()
        return EvictionPreview(plan, probe_evictor(plan.root))

    def operation(self, *, command: str, progress: Progress | None = None) -> EvictionOperation:
        """``--yes``, for the runner: lock the root, plan afresh under the lock, execute, journal, unlock."""
        return EvictionOperation(self.root, self.plan, command=command, force=self.force, progress=progress)


@dataclass(frozen=True)
class LockedEviction:
    """What one locked execution did: the plan it executed, its result, the lock, the journal line."""

    plan: EvictionPlan
    result: EvictionResult
    lock: LockState
    journal: JournalWrite | None  # None: no journal asked for, or nothing was changed
    release_problem: Reason | None = None

    @classmethod
    def of(cls, run: Run[EvictionPlan, EvictionResult]) -> LockedEviction:
        """The finished run's record (``run.result`` set)."""
        assert run.plan is not None and run.result is not None
        return cls(run.plan, run.result, run.held[0], run.journal, run.problems[0] if run.problems else None)

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
        lock = self.lock
        return tuple(p.cli for p in (lock.problem, *lock.notes, self.release_problem) if p is not None)

    def target_line(self, *, flags: bool = True) -> str | None:
        """``free-space target 20.0 GiB (--min-free-gb 20): reached`` (None without a target); ``flags``
        False names the target as the console's fields do (``min free 20 GiB``)."""
        free = self.plan.free_space
        if free is None:
            return None
        named = free.target.describe() if flags else min_free_words(free.target.values(), flags=False)
        return f"free-space target {human_bytes(free.target_bytes)} ({named}): {self.result.target_outcome}"

    @property
    def missed_target(self) -> tuple[str, ...]:
        """The free-space target, when the eviction did not reach it: a warning after the result, never an error."""
        free, result = self.plan.free_space, self.result
        if free is None or result.target_reached is not False:
            return ()
        held = (f"; it could not be reached ({human_bytes(free.best)} free at most), so nothing was "
                f"evicted for it ({flags.BEST_EFFORT} frees what it can toward it)") if free.held_back else ""
        return (f"{self.plan.root}: the free-space target ({human_bytes(free.target_bytes)}) was not reached: "
                f"{human_bytes(result.fs_free_after)} free after the eviction{held}",)


def exit_code_of(result: EvictionResult) -> int:
    """0, or 3 when some entry could not be removed."""
    return EXIT_OK if result.ok else EXIT_PARTIAL


def changed_anything(result: EvictionResult) -> bool:
    """Whether an execution removed something or failed part-way: what the journal records."""
    return bool(result.evicted or result.errors or result.partial_bytes)


class EvictionOperation:
    """An eviction as an operation of the one runner (``core/shared/operation.py: run_locked``).

    Its lock: the root's evictor lock, taken before the scan so the plan is made under it.
    Its policy when the plan under the lock differs from the preview: ``make_plan`` decides.
    The CLI scans and plans again (an evictor that waited plans against what the first one
    left); the console returns the plan the operator confirmed. Each entry is re-checked right
    before its removal either way. ``force``: the plan's --force (a mount point as root is then
    allowed). Its journal line (:func:`eviction_record`) when something was removed or failed part-way.
    """

    def __init__(self, root: str, make_plan: Callable[[], EvictionPlan], *, command: str, force: bool = False,
                 progress: Progress | None = None) -> None:
        self.root = root
        self.make_plan = make_plan
        self.command = command
        self.force = force
        self.progress = progress

    def prepare(self) -> None:
        """The root is checked before anything is written beside it."""
        check_root_early(self.root, self.force)

    def locks(self) -> tuple[RootLock]:
        return (evictor_lock(self.root, self.command),)

    def plan(self) -> EvictionPlan:
        return self.make_plan()

    def execute(self, plan: EvictionPlan, progress: Progress | None, on_stop: Callable[[Stop], None]) -> EvictionResult:
        return execute_eviction(plan, progress=progress or self.progress, on_stop=on_stop)

    def finished(self, plan: EvictionPlan, result: EvictionResult, signum: int) -> Stop:
        if changed_anything(result):
            return Stop(signum, StoppedEviction(result), done=f"the eviction ran: {result.evicted_text}")
        return Stop(signum, StoppedEviction(result), note="nothing was evicted")

    def record(self, run: Run[EvictionPlan, EvictionResult]) -> JournalRecord | None:
        """A line when something was removed or failed part-way (an interruption's exit code: 3 after a change)."""
        if run.plan is None:  # stopped before planning: nothing was changed
            return None
        if run.stop is not None:
            stopped = run.stop.account
            result = stopped.result if isinstance(stopped, StoppedEviction) else None
            code = run.stop.exit_code
        else:
            result = run.result
            code = exit_code_of(result) if result is not None else EXIT_PARTIAL
        if result is None or not changed_anything(result):
            return None
        took_over = run.held[0].took_over if run.held else None
        return eviction_record(run.plan, result, command=self.command, exit_code=code, lock_taken_over=took_over)


def eviction_record(plan: EvictionPlan, result: EvictionResult, *, command: str, exit_code: int,
                    lock_taken_over: str | None = None) -> JournalRecord:
    """The journal line of one executed eviction: what was removed (entry keys, leftovers by name), the
    errors, and the free space around it."""
    items, total = shorten([os.path.basename(e.path) if e.leftover else e.key for e in result.evicted])
    errors, errors_total = shorten(list(result.errors))
    free = plan.free_space
    details = {
        "real_target": plan.real_root,
        "node": os.environ.get("SLURMD_NODENAME"),
        "fs_free_bytes_before": result.fs_free_before,
        "fs_free_bytes_after": result.fs_free_after,
        "planned_bytes": result.planned_bytes,
        "partial_bytes": result.partial_bytes,
        "skipped": len(result.skipped),
        "free_target_bytes": free.target_bytes if free else None,
        "free_target_reached": result.target_reached,
    }
    if lock_taken_over:  # the record of an evictor that died, replaced: worth finding in the history
        details["lock_taken_over"] = lock_taken_over
    return JournalRecord.now(
        action=CACHE_EVICT, target=plan.root, result=result_for(exit_code),
        exit_code=exit_code, bytes=result.freed_bytes, items=items, items_total=total, errors=errors,
        errors_total=errors_total, command=command, details=details,
    )
