"""A prune as an operation of the one runner (``core/shared/operation.py: run_locked``).

Why the migration's lock: ``.<output dir name>.fvconsole-lock`` beside the output dir is the
lock a migration into that dir takes (``core/migration/output_dir.py``), so a prune and a
migration there, or two prunes, from any host sharing the filesystem, exclude each other.
Policy when the plan under the lock differs from the preview: ``make_plan`` decides; both
front ends judge a fresh scan under the lock (the console with the operator's rules), so a
prune that ran after another judges what the first one left (its leftovers included), and
each victim is re-checked right before its removal. Blocking: the console runs it in a
thread worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fvconsole.core.journal.log import JournalRecord, JournalWrite
from fvconsole.core.migration.output_dir import LOCK_TAG
from fvconsole.core.retention.execute import PruneResult, RemovalProgress, execute_prune
from fvconsole.core.retention.plan import PrunePlan
from fvconsole.core.retention.record import prune_record
from fvconsole.core.shared.errors import EXIT_OK, EXIT_PARTIAL
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.locks import FileLock, LockProbe
from fvconsole.core.shared.operation import Run, Stop


@dataclass(frozen=True)
class LockedPrune:
    """What one locked execution did: the plan it executed, its result, the journal line, the lock's notes."""

    plan: PrunePlan
    result: PruneResult
    journal: JournalWrite | None
    #: A stale lock taken over, the lock's release failing.
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: Run[PrunePlan, PruneResult]) -> LockedPrune:
        """The finished run's record (``run.result`` set)."""
        assert run.plan is not None and run.result is not None
        notes = tuple(n.cli for state in run.held for n in state.notes)
        return cls(run.plan, run.result, run.journal, notes + tuple(p.cli for p in run.problems))

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.result.ok else EXIT_PARTIAL

    @property
    def done_text(self) -> str:
        """``the prune ran: N checkpoints removed from DIR``: what stands whatever happens next."""
        return f"the prune ran: {plural(len(self.result.removed), 'checkpoint')} removed from {self.plan.output_dir}"


def prune_lock(output_dir: str) -> FileLock:
    """The lock that serialises prunes and migrations on ``output_dir`` (any host sharing the filesystem,
    whatever path reached it: the locks door names it from the real directory)."""
    return FileLock.beside(output_dir, LOCK_TAG, what="another prune or migration holds the lock", field="output_dir")


def probe_prune_lock(output_dir: str) -> LockProbe:
    """Read-only: what taking the lock would say now (a dry run's note)."""
    return prune_lock(output_dir).probe()


def changed_anything(result: PruneResult) -> bool:
    """Whether an execution removed something or failed part-way: what the journal records."""
    return bool(result.removed or result.errors or result.partial_bytes)


class PruneOperation:
    """``checkpoints prune --yes`` and view 1's prune: the output dir's lock, ``make_plan()`` under it,
    :func:`execute_prune`, the line of :func:`prune_record`."""

    def __init__(self, output_dir: str, make_plan: Callable[[], PrunePlan], *, command: str,
                 progress: RemovalProgress | None = None) -> None:
        self.output_dir = output_dir
        self.make_plan = make_plan
        self.command = command
        self.progress = progress

    def prepare(self) -> None:
        """Nothing to check before the lock: the plan judges the output dir."""

    def locks(self) -> tuple[FileLock]:
        return (prune_lock(self.output_dir),)

    def plan(self) -> PrunePlan:
        return self.make_plan()

    def execute(self, plan: PrunePlan, progress: Any, on_stop: Callable[[Stop], None]) -> PruneResult:
        return execute_prune(plan, progress or self.progress, on_stop)

    def finished(self, plan: PrunePlan, result: PruneResult, signum: int) -> Stop:
        if changed_anything(result):
            return Stop(signum, result, done=LockedPrune(plan, result, None).done_text)
        return Stop(signum, result, note="nothing was pruned")

    def record(self, run: Run[PrunePlan, PruneResult]) -> JournalRecord | None:
        """A line when something was removed or failed part-way (an interruption's exit code: 3 after a change)."""
        if run.plan is None:  # stopped or refused before planning: nothing was changed
            return None
        done = run.result if run.result is not None else run.stop.account if run.stop is not None else None
        if not isinstance(done, PruneResult) or not changed_anything(done):
            return None
        if run.stop is not None:
            code = run.stop.exit_code
        else:
            code = EXIT_OK if done.ok else EXIT_PARTIAL
        return prune_record(run.plan, done, command=self.command, exit_code=code)
