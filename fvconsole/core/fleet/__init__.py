"""Node-local weight shard caches across a Slurm job: hostlists, srun dispatch, aggregation.

Modules, from the command line inward: :mod:`.selection` (``--nodes`` / ``--job``) and
:mod:`.hostlist` (Slurm hostlist syntax); :mod:`.dispatch` (the srun steps: per-node or one
single step, and running them); :mod:`.process` (one srun, read incrementally with a
deadline); :mod:`.demux` (srun output -> per-node streams, with a byte budget per node);
:mod:`.frames` (the wire protocol with the node-side runner, :mod:`fvconsole.cli.node`);
:mod:`.outcomes` and :mod:`.documents` (classifying each node's answer and reading it
into typed records through the untrusted-document door); :mod:`.aggregate` (pure fleet views
over those records); :mod:`.ops` (``fleet cache ls``, the console's dispatcher),
:mod:`.eviction` (preview plan -> execution result), :mod:`.operation` (its execution as an
operation of the one runner, journaled by :mod:`.record`) and :mod:`.node_commands` (what each
node is asked to run, built from typed values in one place).
Nothing here imports the CLI or the console.
"""

from __future__ import annotations

from fvconsole.core.fleet.aggregate import FleetCacheView, KeyRow
from fvconsole.core.fleet.dispatch import (
    AUTO,
    DEFAULT_PARALLEL,
    DEFAULT_TIMEOUT,
    FANOUTS,
    MAX_NODE_OUTPUT,
    MAX_TIMEOUT,
    SINGLE_STEP_MIN_NODES,
    DispatchOptions,
)
from fvconsole.core.fleet.eviction import (
    FleetEvictionPlan,
    FleetEvictionResult,
    execute_fleet_eviction,
    preview_fleet_eviction,
)
from fvconsole.core.fleet.export import FLEET_LISTING_FORMATS, fleet_csv
from fvconsole.core.fleet.frames import result_lines, start_line
from fvconsole.core.fleet.hostlist import compress_hostlist, expand_hostlist
from fvconsole.core.fleet.node_commands import NodeEviction
from fvconsole.core.fleet.operation import FleetEvictionOperation, ran_on
from fvconsole.core.fleet.ops import (
    FleetVerification,
    SrunDispatcher,
    fleet_cache_root,
    fleet_ls,
    fleet_verify,
)
from fvconsole.core.fleet.outcomes import NodeOutcome
from fvconsole.core.fleet.process import read_pipes
from fvconsole.core.fleet.selection import (
    NodeSelection,
    check_selection_args,
    find_srun,
    select_nodes,
)
from fvconsole.core.fleet.slurm_state import SlurmJob

__all__ = [
    "AUTO",
    "DEFAULT_PARALLEL",
    "DEFAULT_TIMEOUT",
    "DispatchOptions",
    "FANOUTS",
    "FLEET_LISTING_FORMATS",
    "FleetCacheView",
    "FleetEvictionOperation",
    "FleetEvictionPlan",
    "FleetEvictionResult",
    "FleetVerification",
    "KeyRow",
    "MAX_NODE_OUTPUT",
    "MAX_TIMEOUT",
    "NodeEviction",
    "NodeOutcome",
    "NodeSelection",
    "SINGLE_STEP_MIN_NODES",
    "SlurmJob",
    "SrunDispatcher",
    "check_selection_args",
    "compress_hostlist",
    "execute_fleet_eviction",
    "expand_hostlist",
    "find_srun",
    "fleet_cache_root",
    "fleet_csv",
    "fleet_ls",
    "fleet_verify",
    "preview_fleet_eviction",
    "ran_on",
    "read_pipes",
    "result_lines",
    "select_nodes",
    "start_line",
]
