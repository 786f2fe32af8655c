"""Planning an elastic resume: the checkpoint's loader as the source, every mode's accounting, its refusals.

The planner (:mod:`.plan`) calls :func:`plan_elastic` when the run config's world size or
sp size differs from the checkpoint's, or a mode was chosen: the source is the checkpoint's
own layout in the epoch its loader state names (a legacy checkpoint's computed from the step,
a native one's read from its sidecars, :mod:`.source_state`), the target the run config's,
and the arithmetic is :mod:`.reshard`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fvconsole.core.formats import streaming
from fvconsole.core.formats.sidecar_files import classify_entry
from fvconsole.core.formats.streaming import MAX_WORLD_SIZE, ShardOrders, Topology, shard_layout
from fvconsole.core.migration.reshard import MODES, Reshard, SourceLoader, TargetLoader, plan_reshard
from fvconsole.core.migration.source_state import FIELD as SOURCE_FIELD
from fvconsole.core.migration.source_state import read_source_states
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.walk import listing

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration import inputs
    from fvconsole.core.migration.request import Collector, MigrationRequest


@dataclass(frozen=True)
class TargetLayout:
    """The target topology's shards and samples_per_worker, where each rank starts (``epoch``,
    ``yielded`` samples into it), and the shards' orders, made once for every use."""

    topo: Topology
    shards: list[range]
    spw: int
    yielded: int
    orders: ShardOrders
    epoch: int = 0


@dataclass(frozen=True)
class _Source:
    """The checkpoint's own layout: its topology, shards and samples_per_worker, the shards' orders."""

    topo: Topology
    shards: list[range]
    spw: int
    orders: ShardOrders


def groups_refusal(world: int, sp: int, manifest: Any, col: Collector, where: str = "") -> bool:
    """Some shard would be empty (samples_per_worker 0), or more ranks than a plan is made for: refused
    without building one shard per group or one cursor per rank.

    For a typo like 1e11 GPUs, building the (possibly empty) shards would exhaust memory; for
    1e9 GPUs in one SP group, planning and writing a sidecar per rank would.
    ``where``: the config the world size is from, as the refusal names it.
    """
    if world // sp > manifest.num_row_groups:
        col.refuse(
            "samples_per_worker",
            f"dataset too small: {plural(manifest.num_row_groups, 'row group')} cannot feed "
            f"{plural(world // sp, 'data-parallel group')} (training.distributed.num_gpus {world} / sp_size {sp}; "
            "samples_per_worker 0)",
        )
        return True
    if world > MAX_WORLD_SIZE:
        col.refused("world_size.max", "training.distributed.num_gpus", world=world, where=where,
                    max=MAX_WORLD_SIZE)
        return True
    return False


def plan_elastic(req: MigrationRequest, params: inputs.Params, manifest: Any, facts: inputs.CheckpointFacts,
                 step: int | None, target: TargetLayout, col: Collector) -> Reshard | None:
    """Every mode's start and accounting from the checkpoint's loader state to the target's layout.

    The source is the checkpoint's topology (its embedded config) in the epoch its state
    names: a legacy checkpoint's cursor is computed from the step (epoch 0, as a migration
    does); a native one's is read from its sidecars. Without a mode the reshard is refused
    (naming the option) but carried, so the refusal shows every mode's accounting.
    """
    if facts.topology is None or step is None or target.spw == 0 or req.consumed_batches_per_rank < 0:
        return None
    source = _source_layout(facts.topology, target.topo, params, manifest, col)
    if source is None:
        return None
    loader = (_native_loader(req, params, manifest, facts, step, source, col) if facts.kind == "rank-local"
              else _legacy_loader(req, source, col))
    if loader is None:
        return None
    found = plan_reshard(
        manifest.rows, source.shards, target.shards, loader,
        TargetLoader(target.topo.world_size, target.topo.sp_world_size, target.spw),
        batch_size=source.topo.batch_size, seed=params.seed, shuffle=params.shuffle,
        source_orders=source.orders, target_orders=target.orders,
    )
    if req.reshard is None:
        col.refused("reshard.required", "reshard", source_world=loader.world_size, source_sp=loader.sp_world_size,
                    target_world=target.topo.world_size, target_sp=target.topo.sp_world_size,
                    modes=", ".join(MODES))
        return found
    chosen = found.choose(req.reshard)
    _warn_target(chosen, facts.path, col)
    return chosen


def _source_layout(topology: tuple[int, int], target: Topology, params: inputs.Params, manifest: Any,
                   col: Collector) -> _Source | None:
    """The checkpoint's layout on the same rows and batch, or None (refused) when it cannot feed every group."""
    world, sp = topology
    batch = target.batch_size
    if groups_refusal(world, sp, manifest, col, "the checkpoint's embedded config"):
        return None
    topo = Topology(world, sp, batch, params.seed, params.shuffle)
    shards, spw = shard_layout(manifest.rows, topo)
    if spw == 0:
        col.refuse("samples_per_worker", f"the checkpoint's layout (world size {world}, sp size {sp}) has a shard "
                   f"with fewer than training.data.train_batch_size {batch} rows (samples_per_worker 0)")
        return None
    return _Source(topo, shards, spw, ShardOrders(shards, params.seed, params.shuffle))


def _native_loader(req: MigrationRequest, params: inputs.Params, manifest: Any, facts: inputs.CheckpointFacts,
                   step: int, source: _Source, col: Collector) -> SourceLoader | None:
    """A native checkpoint's loader as its sidecars say, checked against the manifest and the batch count."""
    topo, spw, batch = source.topo, source.spw, source.topo.batch_size
    found = read_source_states(
        facts.path, step=step, world_size=topo.world_size, sp_world_size=topo.sp_world_size,
        fingerprint=manifest.fingerprint,
        topology=streaming.dataset_state(
            fingerprint="", global_rank=0, world_size=topo.world_size, sp_world_size=topo.sp_world_size,
            batch_size=batch, read_batch_size=params.read_batch, seed=params.seed,
            shuffle_row_groups=params.shuffle, samples_per_worker=spw, row_group_position=0, row_offset=0,
            yielded_samples=0, num_workers=params.workers or 1)["topology"],
        rows=manifest.rows, orders=source.orders, batch_size=batch)
    if isinstance(found, str):
        col.refuse(SOURCE_FIELD, found)
        return None
    epoch, yielded = found
    drawn = epoch * (spw // batch) + yielded // batch
    if req.consumed_batches_per_rank != drawn:
        col.refused("consumed_batches_per_rank.source", "consumed_batches_per_rank",
                    given=req.consumed_batches_per_rank, epoch=epoch, yielded=yielded, batch=batch,
                    per_epoch=spw // batch, actual=drawn)
    return SourceLoader(topo.world_size, topo.sp_world_size, epoch, yielded, spw, "native")


def _legacy_loader(req: MigrationRequest, source: _Source, col: Collector) -> SourceLoader | None:
    """A legacy checkpoint's loader: in its first epoch, the step's batches yielded (refused at the epoch's end)."""
    batch, spw = source.topo.batch_size, source.spw
    yielded = req.consumed_batches_per_rank * batch
    if yielded >= spw:
        col.refuse(
            "consumed_batches_per_rank",
            f"{plural(req.consumed_batches_per_rank, 'batch', 'batches')} x {batch} = "
            f"{plural(yielded, 'sample')} per rank reaches the epoch boundary of the checkpoint's layout "
            f"(samples_per_worker {spw}); a legacy checkpoint's "
            "cursor can be reconstructed in its first epoch only",
        )
        return None
    return SourceLoader(source.topo.world_size, source.topo.sp_world_size, 0, yielded, spw, "legacy")


def _warn_target(chosen: Reshard, checkpoint: str, col: Collector) -> None:
    """What the chosen reshard changes for training: the global batch, the target ranks without an RNG state."""
    batch = chosen.batch_size
    if chosen.global_batch_before != chosen.global_batch_after:
        col.warn(f"the global batch changes from {chosen.global_batch_before} (batch {batch} x "
                 f"{plural(chosen.source.groups, 'data-parallel group')}) to {chosen.global_batch_after} "
                 f"(batch {batch} x "
                 f"{chosen.target.groups}): the learning-rate schedule sees another batch")
    try:
        with listing(checkpoint) as entries:  # one listing, not a stat per target rank
            names = {e.name for e in entries}
    except OSError:
        names = set()
    missing = [r for r in range(chosen.target.world_size) if f"rng_state_rank{r}.pt" not in names
               or not os.path.isfile(os.path.join(checkpoint, f"rng_state_rank{r}.pt"))]
    if missing:
        fallback = ("falls back to rng_state.pt" if os.path.isfile(os.path.join(checkpoint, "rng_state.pt"))
                    else "skips the RNG restore with a warning")
        col.warn(f"the checkpoint has no rng_state_rank<r>.pt for {plural(len(missing), 'target rank')} "
                 f"({rank_ranges(missing)}): FastVideo {fallback} there")


def rank_ranges(ranks: list[int], limit: int = 4) -> str:
    """``ranks 8-15, 20`` for a sorted rank list (the first ``limit`` runs); ``rank 8`` for one rank."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs[:limit])
    return ("rank " if len(ranks) == 1 else "ranks ") + text + (" ..." if len(runs) > limit else "")


def checkpoint_links(checkpoint: str) -> tuple[tuple[str, str], ...]:
    """What a checkpoint view links: every entry of the source checkpoint but its loader sidecars (and their temps).

    The view's own sidecars replace those; everything else (``dcp/``, ``metadata.json``,
    ``rng_state_rank<r>.pt``, callback files) is the source's, reached by an absolute symlink.
    """
    with listing(checkpoint) as entries:
        names = sorted(e.name for e in entries if classify_entry(e.name) not in ("sidecar", "temp", "receipt"))
    return tuple((name, os.path.join(checkpoint, name)) for name in names)

