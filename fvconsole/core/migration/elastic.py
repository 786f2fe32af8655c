"""Planning an elastic resume: the checkpoint's loader as the source, every mode's accounting, its refusals.

The planner (:mod:`.plan`) calls :func:`plan_elastic` when the run config's world size or
sp size differs from the checkpoint's, or a mode was chosen: the source is the checkpoint's
own layout in the epoch its loader state names (a legacy checkpoint's computed from the step,
a native one's read from its sidecars, :mod:`.source_state`), the target the run config's,
and the arithmetic is :mod:`.reshard`'s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fvconsole.core.formats import streaming
from fvconsole.core.formats.sidecar_files import classify_entry
from fvconsole.core.formats.streaming import MAX_WORLD_SIZE, ShardOrders, Topology, shard_layout
from fvconsole.core.migration.request import Finding, Found
from fvconsole.core.migration.reshard import MODES, Reshard, SourceLoader, TargetLoader, plan_reshard
from fvconsole.core.migration.source_state import FIELD as SOURCE_FIELD
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.reasons import Reason, invalid
from fvconsole.core.shared.walk import listing

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.formats.run_params import Params
    from fvconsole.core.migration import inputs
    from fvconsole.core.migration.request import MigrationRequest


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
class SourceLayout:
    """The checkpoint's own layout: its topology, shards and samples_per_worker, the shards' orders."""

    topo: Topology
    shards: list[range]
    spw: int
    orders: ShardOrders


@dataclass(frozen=True)
class ReshardSources:
    """What a reshard reads of the checkpoint (:mod:`.sources`), for :func:`plan_elastic`.

    ``layout``: the checkpoint's layout on the run's rows and batch (None: refused, ``refusals``
    say why); ``states``: a native checkpoint's (epoch, yielded samples per rank) its sidecars
    agree on, or the first problem found (None: not read); the target ranks' RNG files.
    """

    layout: SourceLayout | None
    refusals: tuple[Found, ...] = ()
    states: tuple[int, int] | str | None = None
    #: The ranks r with an ``rng_state_rank<r>.pt`` file; whether ``rng_state.pt`` is one.
    rng_ranks: frozenset[int] = frozenset()
    rng_fallback: bool = False


@dataclass(frozen=True)
class Elastic:
    """:func:`plan_elastic`'s answer: every mode's accounting (None: not planned), the target's layout
    with the chosen mode's start, and the refusals and warnings found."""

    reshard: Reshard | None
    target: TargetLayout | None
    refusals: tuple[Found, ...] = ()
    warnings: tuple[Reason, ...] = ()


def groups_refusal(world: int, sp: int, manifest: Any, where: str = "") -> Found | None:
    """Some shard would be empty (samples_per_worker 0), or more ranks than a plan is made for: refused
    without building one shard per group or one cursor per rank.

    For a typo like 1e11 GPUs, building the (possibly empty) shards would exhaust memory; for
    1e9 GPUs in one SP group, planning and writing a sidecar per rank would.
    ``where``: the config the world size is from, as the refusal names it.
    """
    if world // sp > manifest.num_row_groups:
        return invalid(
            "samples_per_worker",
            f"dataset too small: {plural(manifest.num_row_groups, 'row group')} cannot feed "
            f"{plural(world // sp, 'data-parallel group')} (training.distributed.num_gpus {world} / sp_size {sp}; "
            "samples_per_worker 0)",
        )
    if world > MAX_WORLD_SIZE:
        return Finding("world_size.max", "training.distributed.num_gpus",
                       (("world", world), ("where", where), ("max", MAX_WORLD_SIZE)))
    return None


def source_layout(topology: tuple[int, int], params: Params,
                  manifest: Any) -> tuple[SourceLayout | None, tuple[Found, ...]]:
    """The checkpoint's layout on the same rows and batch, or None (refused) when it cannot feed every group."""
    world, sp = topology
    batch = params.batch
    refused = groups_refusal(world, sp, manifest, "the checkpoint's embedded config")
    if refused is not None:
        return None, (refused,)
    topo = Topology(world, sp, batch, params.seed, params.shuffle)
    shards, spw = shard_layout(manifest.rows, topo)
    if spw == 0:
        return None, (invalid("samples_per_worker", f"the checkpoint's layout (world size {world}, sp size {sp}) "
                              f"has a shard with fewer than training.data.train_batch_size {batch} rows "
                              "(samples_per_worker 0)"),)
    return SourceLayout(topo, shards, spw, ShardOrders(shards, params.seed, params.shuffle)), ()


def source_topology(layout: SourceLayout, params: Params) -> dict[str, Any]:
    """The source loader's topology as FastVideo's state names it (less ``global_rank``/``sp_group_index``)."""
    topo = layout.topo
    return streaming.dataset_state(
        fingerprint="", global_rank=0, world_size=topo.world_size, sp_world_size=topo.sp_world_size,
        batch_size=topo.batch_size, read_batch_size=params.read_batch, seed=params.seed,
        shuffle_row_groups=params.shuffle, samples_per_worker=layout.spw, row_group_position=0, row_offset=0,
        yielded_samples=0, num_workers=params.workers or 1)["topology"]


def plan_elastic(req: MigrationRequest, facts: inputs.CheckpointFacts, rows: Sequence[int] | Any,
                 read: ReshardSources | None, target: TargetLayout) -> Elastic:
    """Every mode's start and accounting from the checkpoint's loader state to the target's layout.

    The source is the checkpoint's topology (its embedded config) in the epoch its state
    names: a legacy checkpoint's cursor is computed from the step (epoch 0, as a migration
    does); a native one's is read from its sidecars (``read.states``, read by :mod:`.sources`
    with the checkpoint's layout). Without a mode the reshard is refused (naming the option)
    but carried, so the refusal shows every mode's accounting. ``rows``: the manifest's.
    """
    if facts.topology is None or facts.step is None or target.spw == 0 or req.consumed_batches_per_rank < 0:
        return Elastic(None, target)
    if read is None or read.layout is None:
        return Elastic(None, target, () if read is None else read.refusals)
    source = read.layout
    loader, refused = (_native_loader(req, read.states, source) if facts.kind == "rank-local"
                       else _legacy_loader(req, source))
    if loader is None:
        return Elastic(None, target, refused)
    if req.reshard is None:
        refused += (Finding("reshard.required", "reshard", (
            ("source_world", loader.world_size), ("source_sp", loader.sp_world_size),
            ("target_world", target.topo.world_size), ("target_sp", target.topo.sp_world_size),
            ("modes", ", ".join(MODES)))),)
    warnings = () if req.reshard is None else _target_warnings(loader, target, read)
    found = plan_reshard(
        rows, loader, TargetLoader(target.topo.world_size, target.topo.sp_world_size, target.spw),
        source.orders, target.orders, batch_size=source.topo.batch_size, mode=req.reshard,
    )
    start = found.start(found.mode) if found.mode else None
    started = replace(target, yielded=start.yielded_samples if start else 0, epoch=start.epoch if start else 0)
    return Elastic(found, started, refused, warnings)


def _native_loader(req: MigrationRequest, states: tuple[int, int] | str | None,
                   source: SourceLayout) -> tuple[SourceLoader | None, tuple[Found, ...]]:
    """A native checkpoint's loader as its sidecars say (read by :mod:`.sources`), checked against the batch count."""
    topo, spw, batch = source.topo, source.spw, source.topo.batch_size
    if states is None or isinstance(states, str):
        return None, (invalid(SOURCE_FIELD, str(states)),)
    epoch, yielded = states
    drawn = epoch * (spw // batch) + yielded // batch
    refused: tuple[Found, ...] = ()
    if req.consumed_batches_per_rank != drawn:
        refused = (Finding("consumed_batches_per_rank.source", "consumed_batches_per_rank", (
            ("given", req.consumed_batches_per_rank), ("epoch", epoch), ("yielded", yielded), ("batch", batch),
            ("per_epoch", spw // batch), ("actual", drawn))),)
    return SourceLoader(topo.world_size, topo.sp_world_size, epoch, yielded, spw, "native"), refused


def _legacy_loader(req: MigrationRequest, source: SourceLayout) -> tuple[SourceLoader | None, tuple[Found, ...]]:
    """A legacy checkpoint's loader: in its first epoch, the step's batches yielded (refused at the epoch's end)."""
    batch, spw = source.topo.batch_size, source.spw
    yielded = req.consumed_batches_per_rank * batch
    if yielded >= spw:
        return None, (invalid(
            "consumed_batches_per_rank",
            f"{plural(req.consumed_batches_per_rank, 'batch', 'batches')} x {batch} = "
            f"{plural(yielded, 'sample')} per rank reaches the epoch boundary of the checkpoint's layout "
            f"(samples_per_worker {spw}); a legacy checkpoint's "
            "cursor can be reconstructed in its first epoch only",
        ),)
    return SourceLoader(source.topo.world_size, source.topo.sp_world_size, 0, yielded, spw, "legacy"), ()


def _target_warnings(loader: SourceLoader, target: TargetLayout, read: ReshardSources) -> tuple[Reason, ...]:
    """What a chosen reshard changes for training: the global batch, the target ranks without an RNG state."""
    batch, groups = target.topo.batch_size, target.topo.world_size // target.topo.sp_world_size
    warned = []
    if loader.groups != groups:
        warned.append(invalid("warning", f"the global batch changes from {batch * loader.groups} (batch {batch} x "
                              f"{plural(loader.groups, 'data-parallel group')}) to {batch * groups} "
                              f"(batch {batch} x {groups}): the learning-rate schedule sees another batch"))
    missing = [r for r in range(target.topo.world_size) if r not in read.rng_ranks]
    if missing:
        fallback = "falls back to rng_state.pt" if read.rng_fallback else "skips the RNG restore with a warning"
        warned.append(invalid("warning", f"the checkpoint has no rng_state_rank<r>.pt for "
                              f"{plural(len(missing), 'target rank')} ({rank_ranges(missing)}): FastVideo {fallback} "
                              "there"))
    return tuple(warned)


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

