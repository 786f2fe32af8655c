"""Node-local weight shard caches across a Slurm job: hostlists, srun dispatch, aggregation.

Modules, from the command line inward: :mod:`.selection` (``--nodes`` / ``--job``) and
:mod:`.hostlist` (Slurm hostlist syntax); :mod:`.dispatch` (the srun steps: per-node or one
single step, and running them); :mod:`.process` (one srun, read incrementally with a
deadline); :mod:`.demux` (srun output -> per-node streams, with a byte budget per node);
:mod:`.frames` (the wire protocol with the node-side runner, :mod:`fvconsole.cli.node`);
:mod:`.outcomes` and :mod:`.documents` (classifying each node's answer and checking its
shape); :mod:`.aggregate` (pure fleet views over per-node JSON); :mod:`.ops` (``fleet cache
ls``, the console's dispatcher) and :mod:`.eviction` (preview plan -> execution result).
Nothing here imports the CLI or the console.
"""
