"""Migration planning: the request, every refusal that applies, and the exact per-rank plan.

Plans are data, and so is what they are made from: the preview is two steps,
:func:`.sources.read_sources` (every file read once into a :class:`.sources.Sources`) and
:func:`plan_migration` (the preview from the request and that record alone, reading
nothing); :func:`preview_migration` is the one and then the other. The preview reports
*all* applicable refusals rather than stopping at the first, so one dry run tells an
operator everything that is wrong; each check returns its refusals as values, worded once
at the end (:func:`.request.refusals_of`). The plan splits the row groups once and walks one
shuffled shard per data-parallel group: O(row groups + ranks) (:mod:`fvconsole.core.formats.streaming`).
The plan it builds is a record of its own module (:mod:`.model`), which the receipt and
execution read without importing the planner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fvconsole.core.formats.runconfig import Mismatch
from fvconsole.core.formats.streaming import ShardOrders, Topology, compute_cursors, shard_layout
from fvconsole.core.migration import output_dir
from fvconsole.core.migration.elastic import Elastic, TargetLayout, groups_refusal, plan_elastic
from fvconsole.core.migration.model import MigrationPlan
from fvconsole.core.migration.receipt import set_files
from fvconsole.core.migration.request import Finding, Found, MigrationRequest, Refusal, refusals_of
from fvconsole.core.migration.reshard import Reshard
from fvconsole.core.migration.sources import STEPS, Sources, read_sources
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.progress import Progress, no_progress
from fvconsole.core.shared.reasons import Reason, invalid

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.formats.column_check import ColumnCheck
    from fvconsole.core.migration.inputs import CheckpointFacts


@dataclass(frozen=True)
class MigrationPreview:
    """The dry run: refusals (if any), warnings (``notes``), the mismatch report, and the plan iff no refusals."""

    request: MigrationRequest
    mismatches: tuple[Mismatch, ...]
    refusals: tuple[Refusal, ...]
    #: Every warning: the plan's, then what was found beside the output dir.
    notes: tuple[Reason, ...]
    plan: MigrationPlan | None
    #: What FastVideo's loader does at resume with the manifest's columns (None: not checked).
    columns: ColumnCheck | None = None
    #: Every reshard mode's accounting when the topology changes (also beside a refusal; None: no reshard).
    reshard: Reshard | None = None

    @property
    def ok(self) -> bool:
        return self.plan is not None

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warnings in the command line's words."""
        return tuple(n.cli for n in self.notes)

    def to_json(self) -> dict:
        return {
            "request": self.request.to_json(),
            "mismatches": [m.to_json() for m in self.mismatches],
            "refusals": [r.to_json() for r in self.refusals],
            "warnings": list(self.warnings),
            "columns": None if self.columns is None else self.columns.to_json(),
            "plan": None if self.plan is None else self.plan.to_json(),
            **({} if self.reshard is None else {"reshard": self.reshard.to_json()}),
        }


def plan_migration(req: MigrationRequest, sources: Sources) -> MigrationPreview:
    """The preview of ``req`` from what :func:`.sources.read_sources` read for it: all refusals that
    apply, warnings, the mismatch report, and the plan iff none refuse.

    Reads nothing: the confirmations, the target's layout (its shards and their orders made
    once, handed on to the reshard's accounting and the cursors), the reshard, the cursors, the
    plan record and the room rule are computed from the request and ``sources`` alone (the
    receipt whose size the room rule counts resolves its source paths: :func:`.receipt.set_files`).
    """
    if sources.refused:
        return MigrationPreview(req, (), refusals_of(sources.refused), (), None)
    target, layout_refusals = _target(req, sources)
    elastic = Elastic(None, target)
    if target is not None and sources.resharding:
        elastic = plan_elastic(req, sources.facts, sources.manifest.rows, sources.reshard, target)
    found: tuple[Found, ...] = (
        *sources.checkpoint_refusals, *_check_steps(req, sources.facts), *sources.config_refusals,
        *_check_confirmations(req, sources), *sources.output_refusals, *sources.dataset_refusals,
        *layout_refusals, *elastic.refusals)
    notes = (*sources.warnings, *elastic.warnings)
    if target is not None and sources.resharding and elastic.reshard is None and not found:
        found = (invalid("reshard", "the checkpoint's topology (its embedded training.distributed.num_gpus "
                         "and sp_size) could not be read"),)
    plan = None
    if elastic.target is not None and not found:
        plan, found, notes = _finish(req, sources, elastic.target, elastic.reshard, notes)
    return MigrationPreview(req, sources.mismatches, refusals_of(found), notes, plan, sources.columns,
                            elastic.reshard)


def preview_migration(req: MigrationRequest, progress: Progress | None = None, *,
                      break_lock: bool = False) -> MigrationPreview:
    """Dry run: :func:`.sources.read_sources`, then :func:`plan_migration`. Writes nothing.

    Every output dir rule is applied (:mod:`.output_dir`), the lock only read (``break_lock``:
    judged as ``--break-lock`` would), so the preview refuses exactly what executing the plan would.
    """
    progress = progress or no_progress
    sources = read_sources(req, progress, break_lock=break_lock)
    if not sources.refused:
        progress(4, STEPS, "computing cursors")
    preview = plan_migration(req, sources)
    if not sources.refused:
        progress(5, STEPS, "done")
    return preview


def plan_from_sources(req: MigrationRequest, progress: Progress | None = None) -> MigrationPreview:
    """The plan from the checkpoint, the run config and the manifest alone; the output dir is not looked at.

    What verification compares a written set with: the set's own dir is the output dir,
    so no output dir rule (existing sidecars, overwrite, the lock) may refuse it.
    """
    return plan_migration(req, read_sources(req, progress, output_rules=False))


def _check_steps(req: MigrationRequest, facts: CheckpointFacts) -> tuple[Found, ...]:
    """expected_step vs metadata.json's step AND vs the directory name's."""
    found: tuple[Found, ...] = ()
    if facts.metadata_step is not None and req.expected_step != facts.metadata_step:
        found += (Finding("expected_step.metadata", "expected_step", (
            ("given", req.expected_step), ("actual", facts.metadata_step), ("path", facts.path))),)
    if facts.dir_step is not None and req.expected_step != facts.dir_step:
        found += (Finding("expected_step.directory", "expected_step", (
            ("given", req.expected_step), ("actual", facts.dir_step), ("name", os.path.basename(facts.path)))),)
    return found


def _check_confirmations(req: MigrationRequest, sources: Sources) -> tuple[Found, ...]:
    """The operator's --expected-world-size and --consumed-batches-per-rank against the sources.

    A reshard's expected world size is the checkpoint's (its embedded config), not the new config's.
    """
    params, step, found = sources.params, sources.facts.step, ()
    source = sources.facts.topology if sources.resharding else None
    if source is not None:
        if req.expected_world_size != source[0]:
            found += (Finding("expected_world_size.source", "expected_world_size", (
                ("given", req.expected_world_size), ("actual", source[0]))),)
    elif params.world is not None and req.expected_world_size != params.world:
        found += (Finding("expected_world_size.config", "expected_world_size", (
            ("given", req.expected_world_size), ("actual", params.world))),)
    if step is not None and params.accum is not None and req.consumed_batches_per_rank != step * params.accum:
        found += (Finding("consumed_batches_per_rank.config", "consumed_batches_per_rank", (
            ("given", req.consumed_batches_per_rank), ("step", step), ("accum", params.accum),
            ("actual", step * params.accum))),)
    return found


def _target(req: MigrationRequest, sources: Sources) -> tuple[TargetLayout | None, tuple[Found, ...]]:
    """The run config's (the target's) layout when it can feed this step, else None, and its refusals.

    When resharding, the step is the checkpoint's, on its own layout (:func:`plan_elastic` checks
    it); on the checkpoint's own topology its layout is the one :mod:`.sources` made.
    """
    params, manifest = sources.params, sources.manifest
    batch, world, sp = params.batch, params.world, params.sp
    if manifest is None or None in (batch, world, sp, params.seed, params.shuffle) or world % sp:
        return None, ()
    refused = groups_refusal(world, sp, manifest, f"the run config {sources.config_where}")
    if refused is not None:
        return None, (refused,)
    topo = Topology(world, sp, batch, params.seed, params.shuffle)
    source = sources.reshard.layout if sources.reshard is not None else None
    if source is not None and source.topo == topo:
        shards, spw, orders = source.shards, source.spw, source.orders
    else:
        shards, spw = shard_layout(manifest.rows, topo)
        orders = ShardOrders(shards, params.seed, params.shuffle)
    yielded = req.consumed_batches_per_rank * batch
    found: tuple[Found, ...] = ()
    if spw == 0:
        found = (invalid("samples_per_worker", f"dataset too small: the smallest of {plural(world // sp, 'shard')} "
                         f"has fewer than training.data.train_batch_size {batch} rows (samples_per_worker 0)"),)
    elif req.consumed_batches_per_rank < 0:
        found = (invalid("consumed_batches_per_rank", f"must be >= 0 (got {req.consumed_batches_per_rank})"),)
    elif yielded >= spw and not sources.resharding:
        found = (invalid("consumed_batches_per_rank", (
            f"{plural(req.consumed_batches_per_rank, 'batch', 'batches')} x {batch} = {plural(yielded, 'sample')} "
            f"per rank reaches the epoch boundary (samples_per_worker {spw}); only first-epoch cursors can be "
            "reconstructed")),)
    return TargetLayout(topo, shards, spw, yielded, orders), found


def _finish(req: MigrationRequest, sources: Sources, target: TargetLayout, reshard: Reshard | None,
            notes: tuple[Reason, ...]) -> tuple[MigrationPlan | None, tuple[Found, ...], tuple[Reason, ...]]:
    """The plan, once nothing refuses, and the refusals and warnings with it: the output dir's review
    (its lock) and its room for the set."""
    if sources.params.world == 1 and not sources.resharding:
        notes += (invalid("warning", "world size 1: FastVideo can resume this legacy checkpoint without sidecars"),)
    review = sources.review
    beside = review.notes if review is not None else ()
    if review is not None and review.refusal:
        return None, (review.refusal,), (*notes, *beside)
    plan = _make_plan(req, sources, target, reshard, notes, beside)
    if not sources.output_rules:
        return plan, (), (*notes, *beside)
    files = set_files(plan)
    room = output_dir.room_rule(plan.output_dir, files, sources.space)
    if room is not None:  # as --yes refuses it, before anything is written
        return None, (room,), (*notes, *beside)
    return plan, (), (*notes, *beside)


def _make_plan(req: MigrationRequest, sources: Sources, target: TargetLayout, reshard: Reshard | None,
               notes: tuple[Reason, ...], output_dir_notes: tuple[Reason, ...]) -> MigrationPlan:
    """The record of exactly what executing writes: every rank's cursor from the layout, once per group."""
    topo, params, cfg, manifest = target.topo, sources.params, sources.config, sources.manifest
    return MigrationPlan(
        request=req,
        checkpoint=sources.checkpoint,
        checkpoint_metadata_sha256=sources.facts.metadata_sha256 or "",
        config_path=(cfg.path if cfg is not None else None) or req.config_path,
        config_sha256=(cfg.sha256 if cfg is not None else None) or "",
        manifest_path=manifest.path,
        manifest_fingerprint=manifest.fingerprint,
        manifest_sha256=manifest.content_sha256,
        dataset_root=manifest.dataset_root,
        output_dir=sources.output_dir,
        step=sources.facts.step,
        world_size=topo.world_size,
        sp_world_size=topo.sp_world_size,
        batch_size=topo.batch_size,
        read_batch_size=params.read_batch,
        seed=params.seed,
        shuffle_row_groups=params.shuffle,
        gradient_accumulation_steps=params.accum,
        consumed_batches_per_rank=req.consumed_batches_per_rank,
        yielded_samples_per_rank=target.yielded,
        samples_per_worker=target.spw,
        num_row_groups=manifest.num_row_groups,
        total_rows=manifest.total_rows,
        ranks=compute_cursors(manifest.rows, manifest.sample_starts, target.shards, topo, target.yielded,
                              target.epoch, target.orders),
        mismatches=sources.mismatches,
        notes=notes,
        output_dir_notes=output_dir_notes,
        columns=sources.columns,
        reshard=reshard,
        links=sources.links,
    )
