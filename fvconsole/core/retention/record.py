"""The journal line of one executed ``checkpoints prune`` (the CLI's and the console's, via ``PruneOperation``)."""

from __future__ import annotations

import os

from fvconsole.core.journal.log import CHECKPOINTS_PRUNE, JournalRecord, result_for, shorten
from fvconsole.core.retention.execute import PruneResult
from fvconsole.core.retention.plan import PrunePlan


def prune_record(plan: PrunePlan, result: PruneResult, *, command: str, exit_code: int) -> JournalRecord:
    """What was removed (checkpoint names, leftovers by name), the errors, and what the plan kept."""
    items, total = shorten([os.path.basename(r.path) for r in result.removed])
    errors, errors_total = shorten(list(result.errors))
    details = {
        "real_target": os.path.realpath(plan.output_dir),
        "planned_bytes": result.planned_bytes,
        "partial_bytes": result.partial_bytes,
        "kept": len(plan.kept),
        "left_in_place": len(result.left),
        "rules": plan.rules.to_json(),
    }
    return JournalRecord.now(
        action=CHECKPOINTS_PRUNE, target=plan.output_dir, result=result_for(exit_code), exit_code=exit_code,
        bytes=result.freed_bytes, items=items, items_total=total, errors=errors, errors_total=errors_total,
        command=command, details=details,
    )
