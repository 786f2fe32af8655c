"""Fleet eviction as plan -> result: ``preview_fleet_eviction`` -> ``execute_fleet_eviction``.

The preview runs ``cache evict ROOT <selectors> --json`` (a dry run) on every node and
returns a frozen :class:`FleetEvictionPlan` holding everything execution needs: the root,
the protections, each node's planned keys and the exact arguments each node will be asked
to run (built from the typed :class:`~fvconsole.core.fleet.node_commands.NodeEviction`).
Execution takes only the plan: on each node that planned something it runs
``cache evict ROOT --key K ... <protections> --yes --json`` for exactly those keys, so it
cannot widen what was previewed. The node re-checks each entry right before deleting it
(an entry used since the preview is skipped), as single-node eviction always does, under
that root's eviction lock (the request's ``wait`` lets it wait for another evictor). The nodes
write no journal lines (``--no-journal``): the login side records the fleet eviction once,
with every node's outcome (``core/fleet/operation.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from fvconsole.core.fleet.aggregate import exit_code_for, planned_keys
from fvconsole.core.fleet.dispatch import DispatchOptions, NodeSelection, build_steps, run_steps
from fvconsole.core.fleet.documents import EVICT
from fvconsole.core.fleet.hostlist import compress_hostlist
from fvconsole.core.fleet.node_commands import NodeEviction
from fvconsole.core.fleet.outcomes import NodeOutcome
from fvconsole.core.fleet.slurm_state import DEFAULT_QUERY, SlurmJob, SlurmQuery, SlurmState, read_slurm_state
from fvconsole.core.shared import flags
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.progress import Progress
from fvconsole.core.shared.terminal_text import printable

NO_NODE_PLANNED = "no node could plan the eviction; nothing was executed"


#: What a node whose preview planned nothing says after the execution (it was not asked to run).
NOTHING_PLANNED = "nothing planned on this node"


def _freed(outcomes: Sequence[NodeOutcome]) -> int:
    """Bytes the nodes' documents say were (or would be) freed."""
    return sum(o.eviction.freed_bytes for o in outcomes if o.output is not None)


@dataclass(frozen=True)
class FleetEvictionPlan:
    """Every node's eviction preview, and exactly what each node will be asked to execute."""

    selection: NodeSelection
    root: str
    request: NodeEviction  # what every node was asked (selectors, protections, the execution's wait)
    outcomes: tuple[NodeOutcome, ...]  # the previews (dry runs), selection order
    requests: tuple[tuple[str, tuple[str, ...]], ...]  # (node, fvconsole args) for nodes with planned keys
    #: Slurm's state of the nodes at the preview (one squeue, one sinfo); None: not read.
    slurm: SlurmState | None = None

    executed = False  # a plan has deleted nothing (for renderers shared with the result)

    @cached_property
    def busy(self) -> dict[str, tuple[tuple[SlurmJob, ...], tuple[str, ...]]]:
        """node -> (jobs of the planned entries' owners running there, those planned keys).

        A warning, never a selector: the plan stands (see docs/cli.md, `fleet cache evict`).
        """
        if self.slurm is None:
            return {}
        out = {}
        for o in self.outcomes:
            if not o.ok:
                continue
            eviction = o.eviction
            owners = {eviction.owner(i) for i in eviction.evict} - {None}
            jobs = self.slurm.busy_jobs(o.node, owners) or ()
            if jobs:
                uids = {j.uid for j in jobs}
                out[o.node] = (jobs, tuple(i.key for i in eviction.evict if eviction.owner(i) in uids))
        return out

    @property
    def warnings(self) -> tuple[str, ...]:
        """One line per job of a planned entry's owner (its nodes grouped), the nodes where a free-space
        target cannot be reached (nothing evicted for it there), and Slurm's note."""
        by_job: dict[str, tuple[SlurmJob, list[str], int]] = {}
        for node, (jobs, keys) in self.busy.items():
            for job in jobs:
                _job, nodes, count = by_job.get(job.job_id, (job, [], 0))
                by_job[job.job_id] = (job, [*nodes, node], count + len(keys))
        lines = [f"node busy: {compress_hostlist(nodes)}: {job.text()} of the planned entries' owner "
                 f"runs there; {plural(count, 'planned entry', 'planned entries')} on "
                 f"{'it' if len(nodes) == 1 else 'them'} may be in use by it (still planned)"
                 for job, nodes, count in by_job.values()]
        held = [o.node for o in self.outcomes if o.ok and o.eviction.target_held_back]
        if held:
            lines.append(f"free-space target cannot be reached on {compress_hostlist(held)}: nothing is evicted "
                         f"for it there ({flags.BEST_EFFORT} frees what it can toward it)")
        if self.slurm is not None and self.slurm.note:
            lines.append(printable(self.slurm.note))
        return tuple(lines)

    def slurm_json(self) -> dict[str, Any] | None:
        if self.slurm is None:
            return None
        return {**self.slurm.to_json(),
                "busy": {node: {"jobs": [j.job_id for j in jobs], "keys": list(keys)}
                         for node, (jobs, keys) in self.busy.items()}}

    @property
    def node_keys(self) -> dict[str, tuple[str, ...]]:
        """node -> planned keys, for nodes whose preview succeeded."""
        return {o.node: planned_keys(o.eviction) for o in self.outcomes if o.ok}

    @property
    def freed_bytes(self) -> int:
        return _freed(self.outcomes)

    @property
    def any_planned(self) -> bool:
        return any(o.ok for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.outcomes)

    def to_json(self) -> dict[str, Any]:
        doc = {
            "executed": False,
            "nodes": {o.node: o.to_json() for o in self.outcomes},
            "freed_bytes": self.freed_bytes,
            "selection": self.selection.to_json(),
            "slurm": self.slurm_json(),
            "warnings": list(self.warnings),
        }
        if self.outcomes and not self.any_planned:
            doc["error"] = NO_NODE_PLANNED
        return doc


@dataclass(frozen=True)
class FleetEvictionResult:
    """What a fleet eviction did on each node (nodes whose preview failed keep that failure)."""

    plan: FleetEvictionPlan
    executed: bool  # False when no node could plan the eviction (nothing was dispatched)
    outcomes: tuple[NodeOutcome, ...]

    @property
    def selection(self) -> NodeSelection:
        return self.plan.selection

    @property
    def freed_bytes(self) -> int:
        return _freed(self.outcomes)

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.outcomes, executing=self.executed)

    def to_json(self) -> dict[str, Any]:
        if not self.executed:
            return self.plan.to_json()
        return {
            "executed": True,
            "nodes": {o.node: o.to_json() for o in self.outcomes},
            "freed_bytes": self.freed_bytes,
            "selection": self.selection.to_json(),
            "slurm": self.plan.slurm_json(),  # as at the preview
            "warnings": list(self.plan.warnings),
        }


def execution_requests(root: str, outcomes: Sequence[NodeOutcome],
                       request: NodeEviction) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per node with planned keys: exactly those keys (:meth:`NodeEviction.execute_args`)."""
    requests = []
    for o in outcomes:
        keys = planned_keys(o.eviction) if o.ok else ()
        if keys:
            requests.append((o.node, request.execute_args(root, keys)))
    return tuple(requests)


def preview_fleet_eviction(selection: NodeSelection, root: str, request: NodeEviction,
                           options: DispatchOptions | None = None, progress: Progress | None = None,
                           slurm: SlurmQuery | None = DEFAULT_QUERY) -> FleetEvictionPlan:
    """Every node's eviction plan (nothing is deleted; no node takes its root's lock), with
    Slurm's state of the nodes (``slurm=None``: not read)."""
    steps = build_steps(selection, request.preview_args(root), options, expects=EVICT)
    state = read_slurm_state(selection.nodes, slurm) if slurm is not None else None
    run = run_steps(steps, progress)
    return FleetEvictionPlan(selection, root, request, run.outcomes, execution_requests(root, run.outcomes, request),
                             state)


def _not_run(outcome: NodeOutcome) -> NodeOutcome:
    """A node with an empty plan: reported from its preview, marked as not executed."""
    doc = dict(outcome.output or {})
    doc.update({"executed": False, "evict": [], "freed_bytes": 0, "note": NOTHING_PLANNED})
    document = replace(outcome.eviction, evict=(), freed_bytes=0, note=NOTHING_PLANNED)
    return NodeOutcome(outcome.node, "ok", 0, doc, None, document=document)


def execute_fleet_eviction(plan: FleetEvictionPlan, options: DispatchOptions | None = None,
                           progress: Progress | None = None) -> FleetEvictionResult:
    """Run exactly ``plan.requests``; nodes whose preview failed stay reported as failed.

    When no node's preview succeeded there is nothing to execute: the result says
    ``executed: false`` (and nothing is dispatched).
    """
    if not plan.any_planned:
        return FleetEvictionResult(plan, False, plan.outcomes)
    ran: dict[str, NodeOutcome] = {}
    if plan.requests:
        steps = build_steps(plan.selection, dict(plan.requests), options, expects=EVICT)
        ran = run_steps(steps, progress).by_node()
    outcomes = []
    for before in plan.outcomes:
        if before.node in ran:
            outcomes.append(ran[before.node])
        elif before.ok:
            outcomes.append(_not_run(before))
        else:
            outcomes.append(before)
    return FleetEvictionResult(plan, True, tuple(outcomes))
