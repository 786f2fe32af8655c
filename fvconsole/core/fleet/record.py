"""The login node's journal line of one executed ``fleet cache evict``, with per-node outcomes.

Journaled by the runner for both front ends (``core/fleet/operation.py``); the nodes run with
``--no-journal``.
"""

from __future__ import annotations

from typing import Any

from fvconsole.core.fleet.eviction import FleetEvictionPlan, FleetEvictionResult
from fvconsole.core.fleet.hostlist import compress_hostlist
from fvconsole.core.journal.log import FLEET_EVICT, JournalRecord, result_for, shorten
from fvconsole.core.shared.operation import Stop


def fleet_eviction_record(result: FleetEvictionResult, *, command: str, exit_code: int | None = None) -> JournalRecord:
    """``node:key`` for every entry evicted, one error per failed node, outcomes by kind and per node."""
    evicted: list[str] = []
    failed: list[str] = []
    nodes: list[dict[str, Any]] = []
    for o in result.outcomes:
        doc = o.output if o.ok and isinstance(o.output, dict) else {}
        keys = [str(i.get("key")) for i in doc.get("evict") or [] if isinstance(i, dict)] if doc.get("executed") else []
        evicted += [f"{o.node}:{k}" for k in keys]
        if not o.ok:
            failed.append(f"{o.node}: {o.error}")
        nodes.append({"node": o.node, "outcome": o.kind, "exit": o.exit_code, "evicted": len(keys),
                      "freed_bytes": doc.get("freed_bytes") if doc.get("executed") else 0})
    items, total = shorten(evicted)
    errors, errors_total = shorten(failed)
    by_outcome: dict[str, list[str]] = {}
    for o in result.outcomes:
        by_outcome.setdefault(o.kind, []).append(o.node)
    details = {
        "outcomes": {kind: {"count": len(ns), "nodes": compress_hostlist(ns)} for kind, ns in sorted(by_outcome.items())},
        "job": result.selection.job_id,
        "nodes": list(shorten(nodes)[0]),
        "nodes_total": len(nodes),
    }
    code = result.exit_code if exit_code is None else exit_code
    return JournalRecord.now(
        action=FLEET_EVICT, target=result.plan.root, result=result_for(code), exit_code=code,
        bytes=result.freed_bytes, items=items, items_total=total, errors=errors, errors_total=errors_total,
        command=command, details=details,
    )


def fleet_interrupted_record(plan: FleetEvictionPlan, stop: Stop, *, command: str) -> JournalRecord:
    """A fleet eviction stopped by a signal while the nodes ran: the nodes asked, the signal (exit 3)."""
    asked = [node for node, _args in plan.requests]
    details = {"job": plan.selection.job_id, "asked": compress_hostlist(asked), "nodes_total": len(plan.outcomes),
               "interrupted_by": stop.name}
    return JournalRecord.now(
        action=FLEET_EVICT, target=plan.root, result=result_for(stop.exit_code), exit_code=stop.exit_code, bytes=0,
        errors=(stop.message,), command=command, details=details,
    )
