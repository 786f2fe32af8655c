"""Migration planning: the request, every refusal that applies, and the exact per-rank plan.

The preview reads the checkpoint (never writes), the run config and the manifest, and
collects *all* applicable refusals rather than stopping at the first, so one dry run tells
an operator everything that is wrong. The plan splits the row groups once and walks one
shuffled shard per data-parallel group: O(row groups + ranks) (:mod:`fvconsole.core.formats.streaming`).
The plan it builds is a record of its own module (:mod:`.model`), which the receipt and
execution read without importing the planner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fvconsole.core.formats.runconfig import Mismatch, RunConfig
from fvconsole.core.formats.streaming import ShardOrders, Topology, compute_cursors, shard_layout
from fvconsole.core.migration import inputs, output_dir
from fvconsole.core.migration.elastic import TargetLayout, checkpoint_links, groups_refusal, plan_elastic
from fvconsole.core.migration.model import MigrationPlan
from fvconsole.core.migration.receipt import set_files
from fvconsole.core.migration.request import Collector, MigrationRequest, Refusal
from fvconsole.core.migration.reshard import MODES, Reshard
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import real
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.progress import Progress, no_progress
from fvconsole.core.shared.reasons import Reason

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration.columns import ColumnCheck


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


def plan_migration(req: MigrationRequest, progress: Progress | None = None, *,
                   break_lock: bool = False) -> MigrationPreview:
    """Dry run: all refusals that apply, warnings, the mismatch report, and the plan iff none refuse.

    Writes nothing. Reads metadata.json, dcp/.metadata, the run config, the manifest and (unless
    skipped) stats each dataset file once. Every output dir rule is applied
    (:mod:`.output_dir`), the lock only read (``break_lock``: judged as ``--break-lock``
    would), so the preview refuses exactly what executing the plan would.
    """
    return _plan(req, progress, output_rules=True, break_lock=break_lock)


def plan_from_sources(req: MigrationRequest, progress: Progress | None = None) -> MigrationPreview:
    """The plan from the checkpoint, the run config and the manifest alone; the output dir is not looked at.

    What verification compares a written set with: the set's own dir is the output dir,
    so no output dir rule (existing sidecars, overwrite, the lock) may refuse it.
    """
    return _plan(req, progress, output_rules=False, break_lock=False)


#: The preview's progress steps: the checkpoint, the run config, the manifest, its columns, the cursors.
STEPS = 5


@dataclass(frozen=True)
class _Sources:
    """What the checkpoint and the run config say, read once: the planner's inputs for every later step."""

    facts: inputs.CheckpointFacts
    step: int | None
    config: RunConfig | None
    mismatches: tuple[Mismatch, ...]
    #: The run config's checked values (the target's, when resharding).
    params: inputs.Params
    #: The topology changes, or a mode was chosen; ``native``: a rank-local checkpoint resharded (a checkpoint view).
    resharding: bool
    native: bool



def _plan(req: MigrationRequest, progress: Progress | None, *, output_rules: bool, break_lock: bool) -> MigrationPreview:
    progress = progress or no_progress
    col = Collector()
    if _refused_at_once(req, col, output_rules):
        return MigrationPreview(req, (), tuple(col.refusals), (), None)
    progress(0, STEPS, "reading checkpoint")
    ckpt = real(req.checkpoint)
    src = _read_sources(req, ckpt, col, progress)
    out = output_dir.resolve(req.output_dir)
    if output_rules:
        _check_output_dir(req.overwrite, ckpt, src, out, col)
    progress(2, STEPS, "loading manifest")
    manifest = _load_manifest(req, src.params, col, progress)
    columns = _check_columns(src.params, manifest, col, progress)
    progress(4, STEPS, "computing cursors")
    layout, reshard = _target(req, src, manifest, col)
    plan = None
    if layout is not None and not col.refusing:
        plan = _finish(req, ckpt, src, manifest, layout, columns, reshard, out, col, output_rules, break_lock)
    progress(5, STEPS, "done")
    return MigrationPreview(req, src.mismatches, tuple(col.refusals), tuple(col.notes), plan, columns, reshard)


def _refused_at_once(req: MigrationRequest, col: Collector, output_rules: bool) -> bool:
    """A path with a NUL byte (every os call would raise on it) or an unknown mode: refused before anything is read."""
    paths = [("config", req.config_path), ("checkpoint", req.checkpoint)]
    paths += [("output_dir", req.output_dir)] if output_rules else []
    for name, value in paths:
        if "\x00" in os.fspath(value):
            col.refuse(name, f"path contains a NUL byte ({os.fspath(value)!r})")
    if col.refusing:
        return True
    if req.reshard is not None and req.reshard not in MODES:
        col.refuse("reshard", f"unknown mode {req.reshard!r}; the modes are {', '.join(MODES)}")
        return True
    return False


def _read_sources(req: MigrationRequest, ckpt: str, col: Collector, progress: Progress) -> _Sources:
    """The checkpoint ``ckpt``, the steps, the run config and its values, each read once; the confirmations checked."""
    facts = inputs.inspect_source(ckpt, col)
    step = inputs.check_steps(req, facts, col)
    progress(1, STEPS, "reading run config")
    cfg, mismatches = inputs.check_config(req, facts, col)
    resharding = req.reshard is not None or bool(inputs.topology_change(mismatches))
    native = resharding and facts.kind == "rank-local"
    if not resharding:
        inputs.refuse_rank_local(facts, col)
    params = (inputs.read_params(cfg.keys, cfg.path or req.config_path, col, max_workers=1 if native else 0)
              if cfg is not None else inputs.Params())
    _check_confirmations(req, step, params, col, facts.topology if resharding else None)
    return _Sources(facts, step, cfg, mismatches, params, resharding, native)


def _check_output_dir(overwrite: bool, ckpt: str, src: _Sources, out: str, col: Collector) -> None:
    """Every output dir rule (and a checkpoint view's), as execution would apply them."""
    data_root = None if src.params.data_path is None else real(src.params.data_path)
    for why in output_dir.output_dir_rules(out, ckpt, data_root, overwrite).reasons:
        col.add(why)
    if src.native and src.step is not None:
        for why in output_dir.checkpoint_view_rules(out, src.step, _run_output_dirs(src.config, src.facts)):
            col.add(why)


def _target(req: MigrationRequest, src: _Sources, manifest: Any,
            col: Collector) -> tuple[TargetLayout | None, Reshard | None]:
    """The run config's layout and, when resharding, every mode with the chosen one's start applied to it."""
    where = (src.config.path if src.config is not None else None) or req.config_path
    layout = _layout(req, src.params, manifest, col, src.resharding, where)
    if layout is None or not src.resharding:
        return layout, None
    reshard = plan_elastic(req, src.params, manifest, src.facts, src.step, layout, col)
    if reshard is None:
        if not col.refusing:
            col.refuse("reshard", "the checkpoint's topology (its embedded training.distributed.num_gpus and "
                       "sp_size) could not be read")
        return layout, None
    start = reshard.start(reshard.mode) if reshard.mode else None
    return replace(layout, yielded=start.yielded_samples if start else 0, epoch=start.epoch if start else 0), reshard


def _finish(req: MigrationRequest, ckpt: str, src: _Sources, manifest: Any, layout: TargetLayout, columns: ColumnCheck | None,
            reshard: Reshard | None, out: str, col: Collector, output_rules: bool,
            break_lock: bool) -> MigrationPlan | None:
    """The plan, once nothing refuses: the output dir's review (its lock) and its room for the set."""
    if src.params.world == 1 and not src.resharding:
        col.warn("world size 1: FastVideo can resume this legacy checkpoint without sidecars")
    plan_notes = tuple(col.notes)
    review = output_dir.review(out, break_lock=break_lock) if output_rules else None
    if review is not None:
        for note in review.notes:
            col.note(note)
        if review.refusal:
            col.add(review.refusal)
    if col.refusing:
        return None
    plan = _make_plan(req, ckpt, src, manifest, layout, columns, reshard, out, plan_notes,
                      review.notes if review is not None else ())
    room = output_dir.room_rule(out, set_files(plan)) if output_rules else None
    if room is not None:  # as --yes refuses it, before anything is written
        col.add(room)
        return None
    return plan


def _make_plan(req: MigrationRequest, ckpt: str, src: _Sources, manifest: Any, layout: TargetLayout, columns: ColumnCheck | None,
               reshard: Reshard | None, out: str, notes: tuple[Reason, ...],
               output_dir_notes: tuple[Reason, ...]) -> MigrationPlan:
    """The record of exactly what executing writes: every rank's cursor from the layout, once per group."""
    topo, params, cfg = layout.topo, src.params, src.config
    return MigrationPlan(
        request=req,
        checkpoint=ckpt,
        checkpoint_metadata_sha256=src.facts.metadata_sha256 or "",
        config_path=(cfg.path if cfg is not None else None) or req.config_path,
        config_sha256=(cfg.sha256 if cfg is not None else None) or "",
        manifest_path=manifest.path,
        manifest_fingerprint=manifest.fingerprint,
        manifest_sha256=manifest.content_sha256,
        dataset_root=manifest.dataset_root,
        output_dir=out,
        step=src.step,
        world_size=topo.world_size,
        sp_world_size=topo.sp_world_size,
        batch_size=topo.batch_size,
        read_batch_size=params.read_batch,
        seed=params.seed,
        shuffle_row_groups=params.shuffle,
        gradient_accumulation_steps=params.accum,
        consumed_batches_per_rank=req.consumed_batches_per_rank,
        yielded_samples_per_rank=layout.yielded,
        samples_per_worker=layout.spw,
        num_row_groups=manifest.num_row_groups,
        total_rows=manifest.total_rows,
        ranks=compute_cursors(manifest.rows, manifest.sample_starts, layout.shards, topo, layout.yielded,
                              layout.epoch, layout.orders),
        mismatches=src.mismatches,
        notes=notes,
        output_dir_notes=output_dir_notes,
        columns=columns,
        reshard=reshard,
        links=checkpoint_links(ckpt) if src.native else (),
    )


def _run_output_dirs(cfg: RunConfig | None, facts: inputs.CheckpointFacts) -> tuple[str, ...]:
    """The run's ``training.checkpoint.output_dir``, in the new config and in the checkpoint's (where set)."""
    found = []
    for keys in (facts.keys,) if cfg is None else (cfg.keys, facts.keys):
        value = keys.output_dir
        if isinstance(value, str) and value.strip() and "\x00" not in value:
            found.append(real(os.path.expanduser(value)))
    found.append(os.path.dirname(facts.path))  # the checkpoint's own parent is a run's output dir
    return tuple(dict.fromkeys(found))


def _check_confirmations(req: MigrationRequest, step: int | None, params: inputs.Params, col: Collector,
                         source: tuple[int, int] | None = None) -> None:
    """The operator's --expected-world-size and --consumed-batches-per-rank against the sources.

    ``source``: a reshard's (world size, sp size) from the checkpoint: the expected world size
    is the checkpoint's, not the new config's.
    """
    if source is not None:
        if req.expected_world_size != source[0]:
            col.refused("expected_world_size.source", "expected_world_size", given=req.expected_world_size,
                        actual=source[0])
    elif params.world is not None and req.expected_world_size != params.world:
        col.refused("expected_world_size.config", "expected_world_size", given=req.expected_world_size,
                    actual=params.world)
    if step is not None and params.accum is not None:
        expected = step * params.accum
        if req.consumed_batches_per_rank != expected:
            col.refused("consumed_batches_per_rank.config", "consumed_batches_per_rank",
                        given=req.consumed_batches_per_rank, step=step, accum=params.accum, actual=expected)


def _load_manifest(req: MigrationRequest, params: inputs.Params, col: Collector, progress: Progress) -> Any:
    """The manifest named by the config, its integrity and (unless skipped) its source check."""
    from fvconsole.core.formats.manifest import check_manifest, load_manifest

    if params.manifest_path is None:
        return None
    try:
        manifest = load_manifest(params.manifest_path)
    except FvError as exc:
        col.refuse("training.data.streaming_manifest_path", str(exc))
        return None
    progress(3, STEPS, "checking manifest")
    check = check_manifest(manifest, params.data_path, source=True)
    for problem in check.problems:
        col.refuse("manifest", problem)
    for problem in check.source_problems:
        if req.skip_source_check:
            col.warn(f"source check skipped: {problem}")
        else:
            col.refused("manifest.source", "manifest.source", problem=problem)
    for warning in check.warnings:
        col.warn(warning)
    return manifest


def _check_columns(params: inputs.Params, manifest: Any, col: Collector, progress: Progress) -> ColumnCheck | None:
    """The manifest's columns against the run's projection: a refusal when FastVideo could not resume."""
    from fvconsole.core.formats.parquet_columns import TYPE_PATH
    from fvconsole.core.migration.columns import check_columns

    if manifest is None or params.data_type is None:
        return None
    check = check_columns(manifest, params.data_type, lambda done, total, message: progress(
        3, STEPS, f"{message} ({done}/{total})"))
    if check.refuses:
        col.refuse(TYPE_PATH, check.message)
    elif check.verdict == "not-checked":
        col.warn(check.message)
    return check


def _layout(req: MigrationRequest, params: inputs.Params, manifest: Any, col: Collector,
            resharding: bool = False, where: str = "") -> TargetLayout | None:
    """The run config's (the target's) layout when it can feed this step, else None.

    ``resharding``: the step is the checkpoint's, on its own layout (:func:`plan_elastic` checks it).
    """
    batch, world, sp = params.batch, params.world, params.sp
    if manifest is None or None in (batch, world, sp, params.seed, params.shuffle) or world % sp:
        return None
    if groups_refusal(world, sp, manifest, col, f"the run config {where}"):
        return None
    topo = Topology(world, sp, batch, params.seed, params.shuffle)
    shards, spw = shard_layout(manifest.rows, topo)
    yielded = req.consumed_batches_per_rank * batch
    if spw == 0:
        col.refuse(
            "samples_per_worker",
            f"dataset too small: the smallest of {plural(world // sp, 'shard')} has fewer than "
            f"training.data.train_batch_size {batch} rows (samples_per_worker 0)",
        )
    elif req.consumed_batches_per_rank < 0:
        col.refuse("consumed_batches_per_rank", f"must be >= 0 (got {req.consumed_batches_per_rank})")
    elif yielded >= spw and not resharding:
        col.refuse(
            "consumed_batches_per_rank",
            f"{plural(req.consumed_batches_per_rank, 'batch', 'batches')} x {batch} = {plural(yielded, 'sample')} "
            f"per rank reaches the epoch boundary (samples_per_worker {spw}); only first-epoch cursors can be "
            "reconstructed",
        )
    return TargetLayout(topo, shards, spw, yielded, ShardOrders(shards, params.seed, params.shuffle))
