"""Fleet cache operations: list every node's cache; the dispatcher the console calls.

Eviction (plan -> result) lives in :mod:`.eviction`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.selectors import EvictionSelectors
from fvconsole.core.cache.verify import EntryVerification
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
from fvconsole.core.fleet.documents import LS, VERIFY
from fvconsole.core.fleet.eviction import (
    FleetEvictionPlan,
    preview_fleet_eviction,
)
from fvconsole.core.fleet.node_commands import NodeEviction, ls_args, verify_args
from fvconsole.core.fleet.operation import FleetEvictionOperation
from fvconsole.core.fleet.outcomes import NodeOutcome
from fvconsole.core.fleet.selection import select_nodes
from fvconsole.core.fleet.slurm_state import DEFAULT_QUERY, SlurmQuery, read_slurm_state
from fvconsole.core.shared.errors import UsageError
from fvconsole.core.shared.progress import Progress
from fvconsole.core.shared.reasons import reason

ENV_ROOT = "FASTVIDEO_WEIGHT_SHARD_CACHE"


def fleet_cache_root(arg: str | None) -> str:
    """``--cache-root``, else ``$FASTVIDEO_WEIGHT_SHARD_CACHE`` of the login node (may contain ``{node}``)."""
    root = arg or os.environ.get(ENV_ROOT)
    if not root:
        raise UsageError.of(reason("fleet.no_root", "cache_root", env=ENV_ROOT))
    return root


def ls_steps(selection: NodeSelection, root: str, options: DispatchOptions | None = None,
             grace: float | None = None) -> SrunSteps:
    """``cache ls ROOT --json`` on every node."""
    return build_steps(selection, ls_args(root, grace), options, expects=LS)


def fleet_ls(selection: NodeSelection, root: str, options: DispatchOptions | None = None, *,
             grace: float | None = None, progress: Progress | None = None,
             slurm: SlurmQuery | None = DEFAULT_QUERY) -> FleetCacheView:
    """Run ``cache ls`` on every node and aggregate (``grace``: the nodes' ``--grace``; None: theirs),
    with Slurm's state of the nodes: one squeue and one sinfo call (``slurm=None``: not read)."""
    steps = ls_steps(selection, root, options, grace)  # usage errors and "srun not found" first
    state = read_slurm_state(selection.nodes, slurm) if slurm is not None else None
    return aggregate_ls(run_steps(steps, progress), state)


@dataclass(frozen=True)
class FleetVerification:
    """``cache verify --json`` on every node: which entries fail where, and which nodes did not answer.

    A node whose verification found problems exits 1 with its full answer (its ``entries``,
    and the ``error`` every failed command carries): that is an answer (``failing``), not a
    node failure (``unanswered``, which has no ``entries``). Each answer is read into a
    :class:`~fvconsole.core.cache.verify.CacheVerification` (``documents.py: NodeVerification``).
    """

    outcomes: tuple[NodeOutcome, ...]

    @staticmethod
    def answered(outcome: NodeOutcome) -> bool:
        return (outcome.exit_code in (0, 1) and outcome.output is not None
                and outcome.verification.verification is not None)

    @property
    def unanswered(self) -> tuple[NodeOutcome, ...]:
        return tuple(o for o in self.outcomes if not self.answered(o))

    def _entries(self) -> tuple[tuple[str, EntryVerification], ...]:
        return tuple((o.node, e) for o in self.outcomes if self.answered(o)
                     for e in o.verification.verification.entries)

    @property
    def failing(self) -> tuple[tuple[str, EntryVerification], ...]:
        """(node, entry) for every verifiable entry a node reported not ok."""
        return tuple((node, e) for node, e in self._entries() if not e.ok and e.not_verifiable is None)

    @property
    def not_verifiable(self) -> tuple[tuple[str, EntryVerification], ...]:
        """(node, entry) for every entry a node could not verify (no manifest.json: normal on a
        node-local cache on every node but rank 0's), apart from the failures."""
        return tuple((node, e) for node, e in self._entries() if e.not_verifiable is not None)

    @property
    def exit_code(self) -> int:
        """0 every node verified everything, 1 a problem found (or no node answered), 3 some nodes did not answer."""
        if not self.unanswered:
            return 0 if not self.failing else 1
        return 1 if len(self.unanswered) == len(self.outcomes) else 3

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.exit_code == 0,
                "nodes": {o.node: o.output if self.answered(o) else o.to_json() for o in self.outcomes},
                "failing": [{"node": node, "key": e.key, "problems": [p.to_json() for p in e.problems]}
                            for node, e in self.failing],
                "not_verifiable": [{"node": node, "key": e.key, "why": e.not_verifiable}
                                   for node, e in self.not_verifiable]}


def fleet_verify(selection: NodeSelection, root: str, options: DispatchOptions | None = None, *,
                 keys: Sequence[str] = (), deep: bool = False, progress: Progress | None = None) -> FleetVerification:
    """Run ``cache verify ROOT --json`` on every node (only ``keys`` when given; ``deep``: every byte)."""
    steps = build_steps(selection, verify_args(root, keys, deep), options, expects=VERIFY)
    return FleetVerification(run_steps(steps, progress).outcomes)


class SrunDispatcher:
    """The fleet operations the console calls, bound to dispatch options (tests inject a stand-in srun).

    Every method blocks (srun round trips): callers run them in a worker thread.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, parallel: int = DEFAULT_PARALLEL, srun: str = "srun",
                 srun_args: Sequence[str] = (), fanout: str = AUTO, slurm: SlurmQuery | None = DEFAULT_QUERY) -> None:
        self.options = DispatchOptions(srun=srun, timeout=timeout, parallel=parallel, fanout=fanout)
        self.srun_args = tuple(srun_args)
        self.slurm = slurm

    def select(self, nodes: str | None, job_id: str | None) -> NodeSelection:
        """Resolve a node list and/or job id (reads squeue for a job)."""
        return select_nodes(nodes, job_id, None, self.srun_args)

    def ls(self, selection: NodeSelection, root: str, progress: Progress | None = None) -> FleetCacheView:
        return fleet_ls(selection, root, self.options, progress=progress, slurm=self.slurm)

    def preview(self, selection: NodeSelection, root: str, selectors: EvictionSelectors,
                progress: Progress | None = None) -> FleetEvictionPlan:
        return preview_fleet_eviction(selection, root, NodeEviction(selectors), self.options, progress,
                                      slurm=self.slurm)

    def eviction(self, plan: FleetEvictionPlan, command: str) -> FleetEvictionOperation:
        """The confirmed plan's execution, for the runner (which journals it as the CLI's is)."""
        return FleetEvictionOperation(plan, command=command, options=self.options)
