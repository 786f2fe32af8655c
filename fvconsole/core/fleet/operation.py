"""A fleet eviction as an operation of the one runner (``core/shared/operation.py: run_locked``).

Why here and not on the nodes: the login side holds no lock (each node takes its own root's
evictor lock when it executes) and writes the one journal line of the fleet eviction, with
every node's outcome (:func:`~fvconsole.core.fleet.record.fleet_eviction_record`); the nodes
run with ``--no-journal``. Its policy when the plan differs from what is on the nodes now:
execution takes only the confirmed plan (the keys each node previewed) and each node
re-checks every entry right before removing it. The CLI's ``fleet cache evict --yes`` and the
console's view 4 run it, so both are journaled. Blocking: the console runs it in a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fvconsole.core.fleet.dispatch import DispatchOptions
from fvconsole.core.fleet.eviction import FleetEvictionPlan, FleetEvictionResult, execute_fleet_eviction
from fvconsole.core.fleet.hostlist import compress_hostlist
from fvconsole.core.fleet.record import fleet_eviction_record, fleet_interrupted_record
from fvconsole.core.journal.log import JournalRecord
from fvconsole.core.shared.interrupts import as_interrupted
from fvconsole.core.shared.operation import Run, Stop


def ran_on(result: FleetEvictionResult) -> str:
    """``the eviction ran on n[1-4]``: what stands once the nodes have answered."""
    return f"the eviction ran on {compress_hostlist(result.selection.nodes)}"


class FleetEvictionOperation:
    """Execute exactly a previewed :class:`FleetEvictionPlan` on its nodes, then journal it once."""

    def __init__(self, plan: FleetEvictionPlan, *, command: str, options: DispatchOptions | None = None) -> None:
        self.confirmed = plan
        self.command = command
        self.options = options

    def prepare(self) -> None:
        """Nothing to check here: each node checks its root."""

    def locks(self) -> tuple[()]:
        """None on the login side: each node locks its own cache root."""
        return ()

    def plan(self) -> FleetEvictionPlan:
        return self.confirmed

    def execute(self, plan: FleetEvictionPlan, progress: Any,
                on_stop: Callable[[Stop], None]) -> FleetEvictionResult:
        try:
            return execute_fleet_eviction(plan, self.options, progress)
        except KeyboardInterrupt as exc:  # the steps are torn down; the nodes may have acted
            signum = as_interrupted(exc).signum
            nodes = [node for node, _args in plan.requests]
            if nodes:
                on_stop(Stop(signum, None, done=f"the eviction was sent to {compress_hostlist(nodes)}; what each "
                                                "node removed is not known (fvconsole fleet cache ls)"))
            else:
                on_stop(Stop(signum, None, note="nothing was evicted"))
            raise

    def finished(self, plan: FleetEvictionPlan, result: FleetEvictionResult, signum: int) -> Stop:
        if result.executed:
            return Stop(signum, result, done=ran_on(result))
        return Stop(signum, result, note="nothing was evicted")

    def record(self, run: Run[FleetEvictionPlan, FleetEvictionResult]) -> JournalRecord | None:
        """A line once some node was asked to delete something (an interrupted dispatch: the nodes asked)."""
        result, plan = run.result, run.plan
        if result is not None:
            if not (result.executed and result.plan.requests):
                return None
            if run.stop is not None:
                return fleet_eviction_record(result, command=self.command, exit_code=run.stop.exit_code)
            return fleet_eviction_record(result, command=self.command)
        if run.stop is not None and run.stop.changed and plan is not None:
            return fleet_interrupted_record(plan, run.stop, command=self.command)
        return None
