"""Fleet cache operations: list every node's cache, preview and execute a fleet eviction.

Eviction is two-phase so that executing means executing exactly the previewed plan: the
preview runs ``cache evict ... --json`` (a dry run) on every node; execution then runs,
on each node that planned something, ``cache evict ROOT --key K ... --yes`` for exactly
the keys that node planned. The node re-checks each entry right before deleting it
(an entry used since the preview is skipped), as single-node eviction always does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from fvconsole.core.errors import UsageError
from fvconsole.core.fleet.aggregate import FleetCacheView, FleetEviction, aggregate_ls
from fvconsole.core.fleet.dispatch import (
    DEFAULT_PARALLEL,
    DEFAULT_TIMEOUT,
    FleetPlan,
    NodeOutcome,
    NodeSelection,
    build_plan,
    run_plan,
)
from fvconsole.core.progress import Progress

ENV_ROOT = "FASTVIDEO_WEIGHT_SHARD_CACHE"


def fleet_cache_root(arg: str | None) -> str:
    """``--cache-root``, else ``$FASTVIDEO_WEIGHT_SHARD_CACHE`` of the login node (may contain ``{node}``)."""
    root = arg or os.environ.get(ENV_ROOT)
    if not root:
        raise UsageError(f"no cache root: give --cache-root or set {ENV_ROOT}")
    return root


def ls_plan(selection: NodeSelection, root: str, *, timeout: float = DEFAULT_TIMEOUT,
            parallel: int = DEFAULT_PARALLEL, extra: Sequence[str] = (), srun: str = "srun") -> FleetPlan:
    """``cache ls ROOT --json`` on every node."""
    return build_plan(selection, ["cache", "ls", root, "--json", *extra], timeout=timeout,
                      parallel=parallel, srun=srun)


def fleet_ls(selection: NodeSelection, root: str, *, timeout: float = DEFAULT_TIMEOUT,
             parallel: int = DEFAULT_PARALLEL, extra: Sequence[str] = (), progress: Progress | None = None,
             srun: str = "srun") -> FleetCacheView:
    """Run ``cache ls`` on every node and aggregate (``extra``: more ``cache ls`` flags, e.g. --grace)."""
    plan = ls_plan(selection, root, timeout=timeout, parallel=parallel, extra=extra, srun=srun)
    return aggregate_ls(run_plan(plan, progress))


def preview_plan(selection: NodeSelection, root: str, selectors: Sequence[str], *,
                 timeout: float = DEFAULT_TIMEOUT, parallel: int = DEFAULT_PARALLEL,
                 srun: str = "srun") -> FleetPlan:
    """``cache evict ROOT <selectors> --json`` (no --yes: a dry run) on every node."""
    if "--yes" in selectors:
        raise UsageError("--yes is not a selector: previews never execute")
    return build_plan(selection, ["cache", "evict", root, *selectors, "--json"], timeout=timeout,
                      parallel=parallel, srun=srun)


def preview_fleet_eviction(selection: NodeSelection, root: str, selectors: Sequence[str], *,
                           timeout: float = DEFAULT_TIMEOUT, parallel: int = DEFAULT_PARALLEL,
                           progress: Progress | None = None, srun: str = "srun") -> FleetEviction:
    """Every node's eviction plan (nothing is deleted)."""
    plan = preview_plan(selection, root, selectors, timeout=timeout, parallel=parallel, srun=srun)
    run = run_plan(plan, progress)
    return FleetEviction(selection, False, run.outcomes)


def execution_plan(preview: FleetEviction, root: str, protections: Sequence[str] = (), *,
                   timeout: float = DEFAULT_TIMEOUT, parallel: int = DEFAULT_PARALLEL,
                   srun: str = "srun") -> FleetPlan:
    """Per node, exactly the previewed keys (nodes with nothing planned, or a failed preview, are not run).

    ``protections`` are the flags that change the node's re-check (``--force``, ``--grace S``),
    never selectors, so execution cannot widen the plan.
    """
    plans = preview.plans()

    def args_for(node: str) -> list[str] | None:
        keys = plans.get(node)
        if not keys:
            return None
        key_args = [arg for key in keys for arg in ("--key", key)]
        return ["cache", "evict", root, *key_args, *protections, "--yes", "--json"]

    return build_plan(preview.selection, args_for, timeout=timeout, parallel=parallel, srun=srun)


def _not_run(outcome: NodeOutcome) -> NodeOutcome:
    """A node with an empty plan: reported from its preview, marked as not executed."""
    doc = dict(outcome.output or {})
    doc.update({"executed": False, "evict": [], "freed_bytes": 0, "note": "nothing planned on this node"})
    return NodeOutcome(outcome.node, "ok", 0, doc, None)


def execute_fleet_eviction(preview: FleetEviction, root: str, protections: Sequence[str] = (), *,
                           timeout: float = DEFAULT_TIMEOUT, parallel: int = DEFAULT_PARALLEL,
                           progress: Progress | None = None, srun: str = "srun") -> FleetEviction:
    """Execute a previewed fleet eviction; nodes whose preview failed stay reported as failed.

    When no node's preview succeeded there is nothing to execute: the result says
    ``executed: false`` (and nothing is dispatched).
    """
    if not any(o.ok for o in preview.outcomes):
        return preview
    plan = execution_plan(preview, root, protections, timeout=timeout, parallel=parallel, srun=srun)
    ran = run_plan(plan, progress).by_node()
    outcomes = []
    for before in preview.outcomes:
        if before.node in ran:
            outcomes.append(ran[before.node])
        elif before.ok:
            outcomes.append(_not_run(before))
        else:
            outcomes.append(before)
    return FleetEviction(preview.selection, True, tuple(outcomes))


class SrunDispatcher:
    """The fleet operations the console calls, bound to srun settings (tests inject a stand-in).

    Every method blocks (srun round trips): callers run them in a worker thread.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, parallel: int = DEFAULT_PARALLEL,
                 srun: str = "srun", srun_args: Sequence[str] = ()) -> None:
        self.timeout = timeout
        self.parallel = parallel
        self.srun = srun
        self.srun_args = tuple(srun_args)

    def select(self, nodes: str | None, job_id: str | None) -> NodeSelection:
        """Resolve a node list and/or job id (reads squeue for a job)."""
        from fvconsole.core.fleet.dispatch import select_nodes

        return select_nodes(nodes, job_id, None, self.srun_args)

    def ls(self, selection: NodeSelection, root: str, progress: Progress | None = None) -> FleetCacheView:
        return fleet_ls(selection, root, timeout=self.timeout, parallel=self.parallel, progress=progress,
                        srun=self.srun)

    def preview(self, selection: NodeSelection, root: str, selectors: Sequence[str],
                progress: Progress | None = None) -> FleetEviction:
        return preview_fleet_eviction(selection, root, selectors, timeout=self.timeout, parallel=self.parallel,
                                      progress=progress, srun=self.srun)

    def execute(self, preview: FleetEviction, root: str, protections: Sequence[str] = (),
                progress: Progress | None = None) -> FleetEviction:
        return execute_fleet_eviction(preview, root, protections, timeout=self.timeout, parallel=self.parallel,
                                      progress=progress, srun=self.srun)
