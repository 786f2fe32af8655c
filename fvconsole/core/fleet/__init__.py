"""Node-local weight shard caches across a Slurm job: hostlists, srun dispatch, aggregation.

Modules: :mod:`.hostlist` (Slurm hostlist syntax), :mod:`.selection` (``--nodes`` /
``--job``), :mod:`.dispatch` (one srun per node, timeouts, result parsing), :mod:`.node`
(the node-side entry point), :mod:`.aggregate` (pure fleet views over per-node JSON) and
:mod:`.ops` (ls, eviction preview and execution).
"""
