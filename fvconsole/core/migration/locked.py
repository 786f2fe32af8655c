"""A migration as an operation of the one runner (``core/shared/operation.py: run_locked``).

Why one operation: the CLI's ``migrate --yes`` and the console's migration must lock, write,
release and journal the same way, as an eviction and a prune do. Its steps: the refusals
before the lock (:func:`.write.prepare_output`: the output dir rules, the sources re-checked,
the room; nothing written, the lock file included); its lock, the output dir's lock file
beside it (a dead holder's taken over, another host's broken only with ``--break-lock``); the
plan under it is the plan the operator saw, its output dir checked again now that the lock is
held (its policy: a migration never plans again; every source and rule is re-checked, and a
difference refuses); staging, publishing and the read-back (:func:`.write.write_set`); the
journal line of :mod:`.record` for the published set, the failure part-way or the
interruption. Blocking (the console runs it in a thread worker); never prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fvconsole.core.journal.log import JournalRecord
from fvconsole.core.migration.failure import MigrationFailed, MigrationFailure
from fvconsole.core.migration.model import MigrationPlan
from fvconsole.core.migration.record import (
    migration_failed_record,
    migration_interrupted_record,
    migration_written_record,
)
from fvconsole.core.migration.write import MigrationResult, completed, output_lock, prepare_output, write_set
from fvconsole.core.shared.interrupts import Interrupted
from fvconsole.core.shared.locks import FileLock, LockState, ReaderRecord
from fvconsole.core.shared.operation import Run, Stop, run_locked
from fvconsole.core.shared.progress import Progress, no_progress
from fvconsole.core.shared.reasons import Reason


class _SourceReading:
    """The reader's record of the source checkpoint (a prune of its run keeps it while this reads),
    remembering how it was taken: a record that could not be written is a warning, never a refusal."""

    def __init__(self, checkpoint: str) -> None:
        self.record = ReaderRecord.of_checkpoint(checkpoint, operation="migrate")
        self.state: LockState | None = None

    def acquire(self, wait: float = 0.0, *, break_stale: bool = False) -> LockState:
        self.state = self.record.acquire(wait, break_stale=break_stale)
        return self.state

    def release(self) -> Reason | None:
        return self.record.release()


class MigrationOperation:
    """Write exactly ``plan``'s sidecars and receipt to its output dir, under the output dir's lock.

    ``on_warning`` receives each warning execution finds that the plan did not already carry,
    when it is found (staging dirs of other hosts left alone, the lock's release failing);
    ``on_lock_note`` each lock taken over (else ``on_warning``); both are also in the result
    (``lock_notes`` journaled). ``torch_check``: each staged sidecar is also read back with real torch.
    """

    def __init__(self, plan: MigrationPlan, *, command: str = "", workers: int | None = None,
                 on_warning: Callable[[Reason], None] | None = None,
                 on_lock_note: Callable[[Reason], None] | None = None, torch_check: bool = False) -> None:
        self.confirmed = plan
        self.command = command
        self.workers = workers
        self.on_warning = on_warning
        self.on_lock_note = on_lock_note
        self.torch_check = torch_check
        self.told: list[Reason] = [*plan.notes, *plan.output_dir_notes]
        self.out = self.parent = self.outname = ""
        self.lock: FileLock | None = None
        self.reading: _SourceReading | None = None

    def warn(self, why: Reason) -> None:
        if why not in self.told:
            self.told.append(why)
            if self.on_warning is not None:
                self.on_warning(why)

    def prepare(self) -> None:
        self.out, self.parent, self.outname = prepare_output(self.confirmed, torch_check=self.torch_check)

    def locks(self) -> tuple[FileLock, _SourceReading]:
        """The output dir's lock, then (read and linked to while this runs) the source checkpoint's reader record."""
        self.lock = output_lock(self.out)
        self.reading = _SourceReading(self.confirmed.checkpoint)
        return (self.lock, self.reading)

    @property
    def lock_notes(self) -> tuple[Reason, ...]:
        """A stale lock taken over (or broken with --break-lock) by this run."""
        return tuple(self.lock.notes) if self.lock is not None and self.lock.held is not None else ()

    def plan(self) -> MigrationPlan:
        """The plan the operator saw (re-checked by :func:`write_set` under the lock); the lock's notes said."""
        for note in self.lock_notes:
            if self.on_lock_note is not None:
                self.told.append(note)
                self.on_lock_note(note)
            else:
                self.warn(note)
        state = self.reading.state if self.reading is not None else None
        if state is not None and state.problem is not None:  # a record not written: a prune will not see us
            self.warn(state.problem)
        return self.confirmed

    def execute(self, plan: MigrationPlan, progress: Progress | None,
                on_stop: Callable[[Stop], None]) -> MigrationResult:
        notes = self.lock_notes
        try:
            receipt = write_set(plan, self.out, self.parent, self.outname, progress or no_progress, self.workers,
                                self.warn, self.torch_check, on_stop)
        except MigrationFailed as exc:
            if notes:
                raise exc.after_taking_over("; ".join(n.cli for n in notes)) from None
            raise
        return MigrationResult(plan, receipt, self.out, tuple(self.told), notes)

    def finished(self, plan: MigrationPlan, result: MigrationResult, signum: int) -> Stop:
        """A signal while the lock of a published set was released: the set stands (exit 3)."""
        return Stop(signum, MigrationFailure.published(result.output_dir, result.sidecars),
                    done=completed(result.sidecars, result.output_dir))

    def record(self, run: Run[MigrationPlan, MigrationResult]) -> JournalRecord | None:
        """The published set, the failure part-way, or the interruption once staging had begun; else no line."""
        plan = self.confirmed
        if run.stop is not None:
            failure = run.stop.account
            if not isinstance(failure, MigrationFailure):  # stopped before staging: nothing was written
                return None
            return migration_interrupted_record(plan, run.stop, failure, command=self.command)
        if isinstance(run.failure, MigrationFailed):
            return migration_failed_record(plan, run.failure, command=self.command)
        if run.result is not None:
            return migration_written_record(plan, run.result, command=self.command)
        return None

    def settled(self, run: Run[MigrationPlan, MigrationResult]) -> MigrationResult | None:
        """The run's result with the lock's release problems among its notes (each warned as found)."""
        for problem in run.problems:
            self.warn(problem)
        return None if run.result is None else replace(run.result, notes=tuple(self.told))


def execute_migration(plan: MigrationPlan, progress: Progress | None = None, workers: int | None = None, *,
                      break_lock: bool = False, on_warning: Callable[[Reason], None] | None = None,
                      on_lock_note: Callable[[Reason], None] | None = None,
                      torch_check: bool = False) -> MigrationResult:
    """The runner without a journal, for tests and tools: the result, or the failure (exit 3) or the signal raised."""
    operation = MigrationOperation(plan, workers=workers, on_warning=on_warning, on_lock_note=on_lock_note,
                                   torch_check=torch_check)
    run = run_locked(operation, break_stale=break_lock, progress=progress)
    result = operation.settled(run)
    if run.stop is not None:
        raise Interrupted(run.stop.signum)
    if run.failure is not None:
        raise run.failure
    assert result is not None
    return result
