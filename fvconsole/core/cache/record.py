"""The journal line of one executed ``cache evict`` (the CLI's and the console's, via ``evict_under_lock``)."""

from __future__ import annotations

import os

from fvconsole.core.cache.evict import EvictionResult
from fvconsole.core.cache.plan import EvictionPlan
from fvconsole.core.journal.log import CACHE_EVICT, JournalRecord, result_for, shorten


def eviction_record(plan: EvictionPlan, result: EvictionResult, *, command: str, exit_code: int,
                    lock_taken_over: str | None = None) -> JournalRecord:
    """What was removed (entry keys, leftovers by name), the errors, and the free space around it."""
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
