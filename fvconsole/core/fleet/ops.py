"""Fleet cache operations: list every node's cache; the dispatcher the console calls.

Eviction (plan -> result) lives in :mod:`.eviction`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from fvconsole.core.errors import UsageError
from fvconsole.core.fleet.aggregate import FleetCacheView, aggregate_ls
from fvconsole.core.fleet.dispatch import (
    AUTO,
    DEFAULT_PARALLEL,
    DEFAULT_TIMEOUT,
    DispatchOptions,
    NodeSelection,
    SrunSteps,
    build_steps,
    run_steps,
)
from fvconsole.core.fleet.documents import LS
from fvconsole.core.fleet.eviction import (
    FleetEvictionPlan,
    FleetEvictionResult,
    execute_fleet_eviction,
    preview_fleet_eviction,
)
from fvconsole.core.fleet.selection import select_nodes
from fvconsole.core.progress import Progress
from fvconsole.core.reasons import reason

ENV_ROOT = "FASTVIDEO_WEIGHT_SHARD_CACHE"


def fleet_cache_root(arg: str | None) -> str:
    """``--cache-root``, else ``$FASTVIDEO_WEIGHT_SHARD_CACHE`` of the login node (may contain ``{node}``)."""
    root = arg or os.environ.get(ENV_ROOT)
    if not root:
        raise UsageError.of(reason("fleet.no_root", "cache_root", env=ENV_ROOT))
    return root


def ls_steps(selection: NodeSelection, root: str, options: DispatchOptions | None = None,
             extra: Sequence[str] = ()) -> SrunSteps:
    """``cache ls ROOT --json`` on every node."""
    return build_steps(selection, ["cache", "ls", root, "--json", *extra], options, expects=LS)


def fleet_ls(selection: NodeSelection, root: str, options: DispatchOptions | None = None, *,
             extra: Sequence[str] = (), progress: Progress | None = None) -> FleetCacheView:
    """Run ``cache ls`` on every node and aggregate (``extra``: more ``cache ls`` flags, e.g. --grace)."""
    return aggregate_ls(run_steps(ls_steps(selection, root, options, extra), progress))


class SrunDispatcher:
    """The fleet operations the console calls, bound to dispatch options (tests inject a stand-in srun).

    Every method blocks (srun round trips): callers run them in a worker thread.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, parallel: int = DEFAULT_PARALLEL, srun: str = "srun",
                 srun_args: Sequence[str] = (), fanout: str = AUTO) -> None:
        self.options = DispatchOptions(srun=srun, timeout=timeout, parallel=parallel, fanout=fanout)
        self.srun_args = tuple(srun_args)

    def select(self, nodes: str | None, job_id: str | None) -> NodeSelection:
        """Resolve a node list and/or job id (reads squeue for a job)."""
        return select_nodes(nodes, job_id, None, self.srun_args)

    def ls(self, selection: NodeSelection, root: str, progress: Progress | None = None) -> FleetCacheView:
        return fleet_ls(selection, root, self.options, progress=progress)

    def preview(self, selection: NodeSelection, root: str, selectors: Sequence[str],
                progress: Progress | None = None) -> FleetEvictionPlan:
        return preview_fleet_eviction(selection, root, selectors, (), self.options, progress)

    def execute(self, plan: FleetEvictionPlan, progress: Progress | None = None) -> FleetEvictionResult:
        return execute_fleet_eviction(plan, self.options, progress)
