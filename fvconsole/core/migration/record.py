"""The journal lines of an executed migration: the set published, a failure part-way, an interruption.

Both front ends journal through :class:`fvconsole.core.migration.locked.MigrationOperation`, so a
migration reads the same in ``fvconsole history`` whoever ran it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from fvconsole.core.formats.sidecar_files import RECEIPT_NAME, sidecar_name
from fvconsole.core.journal.log import MIGRATE, JournalRecord, result_for, shorten
from fvconsole.core.migration.failure import MigrationFailed, MigrationFailure
from fvconsole.core.migration.model import MigrationPlan
from fvconsole.core.migration.write import MigrationResult
from fvconsole.core.shared.interrupts import Interrupted


def migration_record(output_dir: str, *, command: str, exit_code: int, files: Sequence[str] = (),
                     written_bytes: int = 0, error: str | None = None,
                     details: Mapping[str, Any] | None = None) -> JournalRecord:
    """The line for one executed ``migrate --yes``: the files published (or the failure, exit 3)."""
    items, total = shorten(list(files))
    return JournalRecord.now(
        action=MIGRATE, target=os.path.abspath(output_dir), result=result_for(exit_code),
        exit_code=exit_code, bytes=written_bytes, items=items, items_total=total,
        errors=(error,) if error else (), command=command,
        details={"real_target": os.path.realpath(output_dir), **(details or {})},
    )


def _plan_details(plan: MigrationPlan) -> dict[str, Any]:
    return {"checkpoint": os.path.abspath(plan.checkpoint), "step": plan.step, "world_size": plan.world_size}


def migration_written_record(plan: MigrationPlan, result: MigrationResult, *, command: str) -> JournalRecord:
    """The line for a published set: its files and their bytes (stat'ed after publishing)."""
    out = result.output_dir
    files = [str(s.get("path")) for s in result.receipt.get("sidecars", [])] + [os.path.basename(result.receipt_path)]
    written = 0
    for name in files:
        with contextlib.suppress(OSError):  # verified just before; a file gone now only lowers the count
            written += os.lstat(os.path.join(out, name)).st_size
    details = _plan_details(plan)
    if result.lock_notes:  # a killed run's lock this one took over: worth finding in the history
        details["lock_taken_over"] = "; ".join(n.cli for n in result.lock_notes)
    return migration_record(out, command=command, exit_code=0, files=files, written_bytes=written,
                            details=details)


def migration_failed_record(plan: MigrationPlan, error: MigrationFailed, *, command: str) -> JournalRecord:
    """The line for a migration that failed part-way (exit 3): where it stopped and why."""
    return migration_record(plan.output_dir, command=command, exit_code=3, error=error.message,
                            details={**_plan_details(plan), **error.failure.journaled()})


def migration_interrupted_record(plan: MigrationPlan, stop: Interrupted, failure: MigrationFailure, *,
                                 command: str) -> JournalRecord:
    """The line for a migration stopped by a signal once it had begun writing.

    Stopped while staging: the output dir was not changed (exit 128 + signal). Stopped once
    publishing had begun: the set was published and verified first (exit 3), its files listed.
    """
    changed = failure.output_dir_changed
    files = [sidecar_name(c.rank) for c in plan.ranks] + [RECEIPT_NAME] if changed else []
    what = stop.done if changed else stop.note
    message = f"interrupted by {stop.name}" + (f"; {what}" if what else "")
    return migration_record(plan.output_dir, command=command, exit_code=3 if changed else stop.exit_code,
                            files=files, error=message,
                            details={**_plan_details(plan), **failure.journaled(), "interrupted_by": stop.name})
