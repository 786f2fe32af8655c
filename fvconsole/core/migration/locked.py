"""A migration as a front end runs it for ``--yes``: lock, execute, journal, outcome.

Why one function: the CLI's ``migrate --yes`` and the console's migration must journal the
same lines at the same points, as ``core/cache/locked.py: evict_under_lock`` does for an
eviction. The output dir's lock is taken and released by :func:`execute_migration`; the
line is appended after it, since only then is it known how the run ended. ``execute_migration``
itself stays free of the journal (tests and tools call it directly).

Blocking (the console calls it from a thread worker); never prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fvconsole.core.journal.log import JournalRecord, JournalWrite, append_record
from fvconsole.core.migration.failure import MigrationFailed, MigrationFailure
from fvconsole.core.migration.model import MigrationPlan
from fvconsole.core.migration.record import (
    migration_failed_record,
    migration_interrupted_record,
    migration_written_record,
)
from fvconsole.core.migration.write import MigrationResult, execute_migration
from fvconsole.core.shared.interrupts import Interrupted
from fvconsole.core.shared.progress import Progress


@dataclass(frozen=True)
class MigrationRun:
    """A published set and its journal line (None: no journal asked for)."""

    result: MigrationResult
    journal: JournalWrite | None


def run_migration(plan: MigrationPlan, *, command: str, journal_path: str | None,
                  progress: Progress | None = None, workers: int | None = None, break_lock: bool = False,
                  on_warning: Callable[[str], None] | None = None, on_lock_note: Callable[[str], None] | None = None,
                  torch_check: bool = False) -> MigrationRun:
    """Execute ``plan`` under its output dir's lock, then journal how it ended (``journal_path`` None: no line).

    Raises what :func:`execute_migration` raises, with the line appended first where the run
    had begun writing: :class:`MigrationFailed` (exit 3; ``journal`` set) and
    :class:`Interrupted` once staging had begun (its ``partial`` a MigrationFailure;
    ``journal`` set). A refusal (FvError: nothing written) has no line.
    """

    def journal(build: Callable[..., JournalRecord], *values: object) -> JournalWrite | None:
        return None if journal_path is None else append_record(build(plan, *values, command=command), journal_path)

    try:
        result = execute_migration(plan, progress=progress, workers=workers, break_lock=break_lock,
                                   on_warning=on_warning, on_lock_note=on_lock_note, torch_check=torch_check)
    except MigrationFailed as exc:
        exc.journal = journal(migration_failed_record, exc)
        raise
    except Interrupted as stop:
        failure = stop.partial
        if isinstance(failure, MigrationFailure):  # staging had begun (or the set was published)
            stop.journal = journal(migration_interrupted_record, stop, failure)
        raise
    return MigrationRun(result, journal(migration_written_record, result))
