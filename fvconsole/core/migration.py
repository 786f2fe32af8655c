"""Migration preview: every refusal that applies, and the exact per-rank plan when none do.

The preview reads the checkpoint (never writes), the run config and the manifest, and
collects *all* applicable refusals rather than stopping at the first, so one dry run tells
an operator everything that is wrong. The plan splits the row groups once and walks one
shuffled shard per data-parallel group: O(row groups + ranks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core import streaming
from fvconsole.core.errors import FvError
from fvconsole.core.fsutil import is_within, real, sha256_file
from fvconsole.core.progress import Progress, no_progress
from fvconsole.core.runconfig import MISSING, Mismatch, RunConfig, compare_configs, get_path, load_run_config

SIDECAR_VERSION = 1
SIDECAR_RE_NAME = "dataloader_state_rank{rank}.pt"


@dataclass(frozen=True)
class MigrationRequest:
    """What the operator asks for; the three expected/consumed numbers are confirmations."""

    config_path: str
    checkpoint: str
    output_dir: str
    expected_step: int
    expected_world_size: int
    consumed_batches_per_rank: int
    overrides: tuple[str, ...] = ()
    overwrite: bool = False
    skip_source_check: bool = False

    def to_json(self) -> dict:
        return {
            "config_path": self.config_path,
            "checkpoint": self.checkpoint,
            "output_dir": self.output_dir,
            "expected_step": self.expected_step,
            "expected_world_size": self.expected_world_size,
            "consumed_batches_per_rank": self.consumed_batches_per_rank,
            "overrides": list(self.overrides),
            "overwrite": self.overwrite,
            "skip_source_check": self.skip_source_check,
        }


@dataclass(frozen=True)
class Refusal:
    """One reason not to migrate; ``message`` starts with the field and names both values."""

    field: str
    message: str

    def to_json(self) -> dict:
        return {"field": self.field, "message": self.message}


@dataclass(frozen=True)
class RankCursor:
    """Where one rank's loader stands after the checkpoint's step."""

    rank: int
    sp_group_index: int
    row_group_position: int
    row_offset: int
    yielded_samples: int
    next_sample_index: int
    next_row_group: int  # manifest index, -1 if none

    def to_json(self) -> dict:
        return {
            "rank": self.rank,
            "sp_group_index": self.sp_group_index,
            "row_group_position": self.row_group_position,
            "row_offset": self.row_offset,
            "yielded_samples": self.yielded_samples,
            "next_sample_index": self.next_sample_index,
            "next_row_group": self.next_row_group,
        }


def sidecar_name(rank: int) -> str:
    """``dataloader_state_rank<r>.pt``: the file FastVideo looks for."""
    return SIDECAR_RE_NAME.format(rank=rank)


@dataclass(frozen=True)
class MigrationPlan:
    """Exactly what executing the migration writes (one sidecar per rank)."""

    request: MigrationRequest
    checkpoint: str
    checkpoint_metadata_sha256: str
    config_path: str
    config_sha256: str
    manifest_path: str
    manifest_fingerprint: str
    dataset_root: str
    output_dir: str
    step: int
    world_size: int
    sp_world_size: int
    batch_size: int
    read_batch_size: int
    seed: int
    shuffle_row_groups: bool
    gradient_accumulation_steps: int
    consumed_batches_per_rank: int
    yielded_samples_per_rank: int
    samples_per_worker: int
    num_row_groups: int
    total_rows: int
    ranks: tuple[RankCursor, ...] = field(repr=False)
    mismatches: tuple[Mismatch, ...] = field(default=(), repr=False)
    warnings: tuple[str, ...] = ()

    @property
    def epoch_progress(self) -> float:
        """Fraction of the first epoch each rank has consumed."""
        return self.yielded_samples_per_rank / self.samples_per_worker if self.samples_per_worker else 0.0

    @property
    def num_sp_groups(self) -> int:
        return self.world_size // self.sp_world_size

    def cursor(self, rank: int) -> RankCursor:
        if not 0 <= rank < len(self.ranks):
            raise IndexError(f"rank {rank} outside world size {self.world_size}")
        return self.ranks[rank]

    def dataset_state(self, rank: int) -> dict:
        """FORMATS.md §5 state for ``rank`` (what FastVideo's loader would report)."""
        c = self.cursor(rank)
        return streaming.dataset_state(
            fingerprint=self.manifest_fingerprint,
            global_rank=rank,
            world_size=self.world_size,
            sp_world_size=self.sp_world_size,
            batch_size=self.batch_size,
            read_batch_size=self.read_batch_size,
            seed=self.seed,
            shuffle_row_groups=self.shuffle_row_groups,
            samples_per_worker=self.samples_per_worker,
            row_group_position=c.row_group_position,
            row_offset=c.row_offset,
            yielded_samples=c.yielded_samples,
            num_workers=1,
        )

    def sidecar_payload(self, rank: int) -> dict:
        """FORMATS.md §3 sidecar dict (state_kind "dataset"); step is the directory-name step."""
        return {
            "version": SIDECAR_VERSION,
            "rank": int(rank),
            "world_size": self.world_size,
            "step": self.step,
            "state_kind": "dataset",
            "state": self.dataset_state(rank),
        }

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "world_size": self.world_size,
            "sp_world_size": self.sp_world_size,
            "num_sp_groups": self.num_sp_groups,
            "batch_size": self.batch_size,
            "read_batch_size": self.read_batch_size,
            "seed": self.seed,
            "shuffle_row_groups": self.shuffle_row_groups,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "consumed_batches_per_rank": self.consumed_batches_per_rank,
            "yielded_samples_per_rank": self.yielded_samples_per_rank,
            "samples_per_worker": self.samples_per_worker,
            "epoch_progress": self.epoch_progress,
            "num_row_groups": self.num_row_groups,
            "total_rows": self.total_rows,
            "checkpoint": self.checkpoint,
            "checkpoint_metadata_sha256": self.checkpoint_metadata_sha256,
            "config_path": self.config_path,
            "config_sha256": self.config_sha256,
            "manifest_path": self.manifest_path,
            "manifest_fingerprint": self.manifest_fingerprint,
            "dataset_root": self.dataset_root,
            "output_dir": self.output_dir,
            "warnings": list(self.warnings),
            "ranks": [c.to_json() for c in self.ranks],
        }


@dataclass(frozen=True)
class MigrationPreview:
    """The dry run: refusals (if any), warnings, the mismatch report, and the plan iff no refusals."""

    request: MigrationRequest
    mismatches: tuple[Mismatch, ...]
    refusals: tuple[Refusal, ...]
    warnings: tuple[str, ...]
    plan: MigrationPlan | None

    @property
    def ok(self) -> bool:
        return self.plan is not None

    def to_json(self) -> dict:
        return {
            "request": self.request.to_json(),
            "mismatches": [m.to_json() for m in self.mismatches],
            "refusals": [r.to_json() for r in self.refusals],
            "warnings": list(self.warnings),
            "plan": None if self.plan is None else self.plan.to_json(),
        }


# --------------------------------------------------------------------------- plan arithmetic


@dataclass(frozen=True)
class Topology:
    """The layout parameters the cursor arithmetic needs (all validated)."""

    world_size: int
    sp_world_size: int
    batch_size: int
    seed: int
    shuffle: bool


def shard_layout(rows: list[int] | Any, topo: Topology) -> tuple[list[range], int]:
    """(one contiguous shard per SP group, samples_per_worker) — computed once per plan."""
    groups = topo.world_size // topo.sp_world_size
    shards = streaming.contiguous_shards(rows, groups)
    shard_rows = [sum(rows[i] for i in shard) for shard in shards]
    return shards, streaming.samples_per_worker(shard_rows, topo.batch_size)


def compute_cursors(
    rows: Any, sample_starts: Any, shards: list[range], topo: Topology, yielded: int
) -> tuple[RankCursor, ...]:
    """One shuffle and one walk per SP group; ranks of a group share the cursor."""
    sp = topo.sp_world_size
    out: list[RankCursor] = []
    for group, shard in enumerate(shards):
        order = streaming.shard_order(shard, topo.seed, 0, topo.shuffle)
        c = streaming.walk(order, rows, yielded)
        nxt = -1 if c.next_row_group < 0 else sample_starts[c.next_row_group] + c.next_row_offset
        for rank in range(group * sp, (group + 1) * sp):
            out.append(RankCursor(rank, group, c.row_group_position, c.row_offset, yielded, nxt, c.next_row_group))
    return tuple(out)


# --------------------------------------------------------------------------- preview


class _Collector:
    """Accumulates refusals and warnings; every message is prefixed with its field."""

    def __init__(self) -> None:
        self.refusals: list[Refusal] = []
        self.warnings: list[str] = []

    def refuse(self, field_name: str, message: str) -> None:
        self.refusals.append(Refusal(field_name, f"{field_name}: {message}"))

    def warn(self, message: str) -> None:
        self.warnings.append(message)


@dataclass
class _Params:
    """Values read from the run config; None where missing or invalid (already refused)."""

    world: int | None = None
    sp: int | None = None
    batch: int | None = None
    read_batch: int | None = None
    accum: int | None = None
    seed: int | None = None
    shuffle: bool | None = None
    workers: int | None = None
    loader_type: str | None = None
    manifest_path: str | None = None
    data_path: str | None = None


def _int_param(cfg: Mapping, dotted: str, where: str, col: _Collector, minimum: int | None) -> int | None:
    value = get_path(cfg, dotted)
    if value is MISSING:
        col.refuse(dotted, f"missing from the run config {where}")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        col.refuse(dotted, f"must be an integer in {where} (got {value!r})")
        return None
    if minimum is not None and value < minimum:
        col.refuse(dotted, f"must be >= {minimum} in {where} (got {value})")
        return None
    return value


def _str_param(cfg: Mapping, dotted: str, where: str, col: _Collector) -> str | None:
    value = get_path(cfg, dotted)
    if value is MISSING or value is None:
        col.refuse(dotted, f"missing from the run config {where}")
        return None
    if not isinstance(value, str) or not value.strip():
        col.refuse(dotted, f"must be a non-empty string in {where} (got {value!r})")
        return None
    if "\x00" in value:
        col.refuse(dotted, f"contains a NUL byte in {where} (got {value!r})")
        return None
    return value


def _read_params(cfg: Mapping, where: str, col: _Collector) -> _Params:
    p = _Params()
    p.world = _int_param(cfg, "training.distributed.num_gpus", where, col, 1)
    p.sp = _int_param(cfg, "training.distributed.sp_size", where, col, 1)
    p.batch = _int_param(cfg, "training.data.train_batch_size", where, col, 1)
    p.read_batch = _int_param(cfg, "training.data.streaming_read_batch_size", where, col, 1)
    p.accum = _int_param(cfg, "training.loop.gradient_accumulation_steps", where, col, 1)
    p.seed = _int_param(cfg, "training.data.seed", where, col, None)
    p.workers = _int_param(cfg, "training.data.dataloader_num_workers", where, col, 0)
    shuffle = get_path(cfg, "training.data.streaming_shuffle_row_groups")
    if isinstance(shuffle, bool):
        p.shuffle = shuffle
    else:
        what = "missing from" if shuffle is MISSING else f"must be true or false (got {shuffle!r}) in"
        col.refuse("training.data.streaming_shuffle_row_groups", f"{what} the run config {where}")
    p.loader_type = _str_param(cfg, "training.data.dataloader_type", where, col)
    p.manifest_path = _str_param(cfg, "training.data.streaming_manifest_path", where, col)
    p.data_path = _str_param(cfg, "training.data.data_path", where, col)
    if p.loader_type is not None and "".join(p.loader_type.split()).lower() != "streaming":
        col.refuse(
            "training.data.dataloader_type",
            f"is {p.loader_type!r} in {where}; only the 'streaming' dataloader can be migrated",
        )
    if p.workers is not None and p.workers != 0:
        col.refuse(
            "training.data.dataloader_num_workers",
            f"is {p.workers} in {where}; legacy migration requires 0 (one reader per rank)",
        )
    if p.world is not None and p.sp is not None and p.world % p.sp:
        col.refuse(
            "training.distributed.sp_size",
            f"{p.sp} does not divide training.distributed.num_gpus {p.world} in {where}",
        )
    return p


@dataclass
class _CheckpointFacts:
    path: str
    dir_step: int | None = None
    metadata_step: int | None = None
    metadata_sha256: str | None = None
    embedded: dict | None = None


def _inspect_source(ckpt: str, col: _Collector) -> _CheckpointFacts:
    """Directory name, dcp/, metadata.json and its embedded config; kind and completeness."""
    from fvconsole.core.checkpoints import checkpoint_step, inspect_checkpoint, read_metadata

    facts = _CheckpointFacts(ckpt, dir_step=checkpoint_step(ckpt))
    if not os.path.isdir(ckpt):
        col.refuse("checkpoint", f"{ckpt} is not a directory")
        return facts
    if facts.dir_step is None:
        col.refuse(
            "checkpoint",
            f"directory name {os.path.basename(ckpt)!r} does not match checkpoint-<step>; FastVideo checks "
            "sidecars against the step in that name",
        )
    if not os.path.isdir(os.path.join(ckpt, "dcp")):
        col.refuse("checkpoint.dcp", f"missing DCP directory {os.path.join(ckpt, 'dcp')}")
    elif not os.path.lexists(os.path.join(ckpt, "dcp", ".metadata")):
        # dcp.save writes .metadata last: without it the save was interrupted and FastVideo
        # cannot load this checkpoint at all, so sidecars for it could never be used.
        col.refuse(
            "checkpoint.dcp",
            f"{os.path.join(ckpt, 'dcp', '.metadata')} is missing (interrupted save); FastVideo cannot resume "
            "from this checkpoint",
        )
    meta_path = os.path.join(ckpt, "metadata.json")
    try:
        meta = read_metadata(ckpt)
        facts.metadata_step = meta["step"]
        facts.metadata_sha256 = sha256_file(meta_path)
        if isinstance(meta.get("config"), dict):
            facts.embedded = meta["config"]
        else:
            col.refuse("metadata.config", f"{meta_path} has no embedded run config (field 'config')")
    except FvError as exc:
        col.refuse("metadata.json", str(exc))
    except OSError as exc:
        col.refuse("metadata.json", f"{meta_path}: cannot read ({exc.strerror or exc})")
    if facts.dir_step is not None:
        try:
            info = inspect_checkpoint(ckpt)
        except FvError as exc:
            col.warn(f"checkpoint could not be inspected: {exc}")
            return facts
        if not info.complete:
            col.warn(
                f"checkpoint {ckpt} is incomplete (interrupted save?): "
                + "; ".join(p for p in info.problems if "missing" in p or "interrupted" in p)
            )
        if info.kind == "rank-local":
            col.refuse(
                "checkpoint.kind",
                f"{ckpt} already holds {info.rank_sidecars} rank-local dataloader_state_rank<r>.pt sidecars "
                "(kind 'rank-local', expected 'legacy'); FastVideo uses them and would ignore migrated ones: "
                "migration is unnecessary",
            )
        elif info.kind == "none":
            col.warn(
                f"checkpoint {ckpt} has no 'dataloader' state in DCP (kind 'none', expected 'legacy'); the "
                "sidecars are reconstructed from the step alone"
            )
        elif info.kind == "unknown":
            why = "DCP metadata unreadable" if info.has_dcp_metadata else "no dcp/.metadata to read"
            col.warn(f"checkpoint {ckpt} kind is unknown ({why}); expected 'legacy'")
        for problem in info.problems:
            if "unreadable DCP metadata" in problem:
                col.warn(problem)
    return facts


def _check_steps(req: MigrationRequest, facts: _CheckpointFacts, col: _Collector) -> int | None:
    """expected_step vs metadata.json step AND vs the directory-name step; returns the step."""
    if facts.metadata_step is not None and req.expected_step != facts.metadata_step:
        col.refuse(
            "expected_step",
            f"--expected-step is {req.expected_step} but metadata.json step is {facts.metadata_step} "
            f"({facts.path})",
        )
    if facts.dir_step is not None and req.expected_step != facts.dir_step:
        col.refuse(
            "expected_step",
            f"--expected-step is {req.expected_step} but the directory name says step {facts.dir_step} "
            f"({os.path.basename(facts.path)}; FastVideo checks sidecars against this one)",
        )
    if facts.dir_step is not None:
        return facts.dir_step
    return facts.metadata_step


def _check_output_dir(req: MigrationRequest, ckpt: str, col: _Collector) -> str:
    """Output must be outside the checkpoint (symlinks resolved) and free of sidecars unless overwrite."""
    given = os.path.abspath(os.path.expanduser(req.output_dir))
    out = real(req.output_dir)
    if is_within(out, ckpt):
        via = f" (resolves to {out})" if out != given else ""
        col.refuse("output_dir", f"{given}{via} is the checkpoint or inside it ({ckpt}); it must be outside")
        return given
    if os.path.lexists(given) and not os.path.isdir(given):
        col.refuse("output_dir", f"{given} exists and is not a directory")
        return given
    if os.path.isdir(out):
        try:
            with os.scandir(out) as it:
                existing = sorted(e.name for e in it if e.name.startswith("dataloader_state_rank") and e.name.endswith(".pt"))
        except OSError as exc:
            col.refuse("output_dir", f"{given}: cannot list ({exc.strerror or exc})")
            return given
        if existing and not req.overwrite:
            col.refuse(
                "output_dir",
                f"{given} already contains {len(existing)} dataloader_state_rank<r>.pt sidecars "
                f"(e.g. {existing[0]}); use --overwrite to replace them",
            )
    return given


def _check_config(
    req: MigrationRequest, facts: _CheckpointFacts, col: _Collector
) -> tuple[RunConfig | None, tuple[Mismatch, ...]]:
    try:
        cfg = load_run_config(req.config_path, req.overrides)
    except FvError as exc:
        col.refuse("config", str(exc))
        return None, ()
    if facts.embedded is None:
        return cfg, ()
    mismatches = compare_configs(facts.embedded, cfg.data)
    critical = [m for m in mismatches if m.critical]
    if critical:
        col.refuse(
            "config",
            f"run config {cfg.path} differs from the checkpoint's embedded config on {len(critical)} critical "
            "key(s): " + "; ".join(m.describe() for m in critical),
        )
    others = len(mismatches) - len(critical)
    if others:
        col.warn(f"{others} non-critical config key(s) differ from the checkpoint's embedded config")
    return cfg, mismatches


def _request_paths(req: MigrationRequest) -> tuple[tuple[str, str], ...]:
    return (("config", os.fspath(req.config_path)), ("checkpoint", os.fspath(req.checkpoint)),
            ("output_dir", os.fspath(req.output_dir)))


def preview_migration(req: MigrationRequest, progress: Progress | None = None) -> MigrationPreview:
    """Dry run: all refusals that apply, warnings, the mismatch report, and the plan iff none refuse.

    Writes nothing. Reads metadata.json, dcp/.metadata, the run config, the manifest and (unless
    skipped) stats each dataset file once.
    """
    from fvconsole.core.manifest import check_manifest, load_manifest

    progress = progress or no_progress
    col = _Collector()
    nul = [(name, value) for name, value in _request_paths(req) if "\x00" in value]
    if nul:  # every os call would raise ValueError on these: refuse before touching anything
        for name, value in nul:
            col.refuse(name, f"path contains a NUL byte ({value!r})")
        return MigrationPreview(req, (), tuple(col.refusals), (), None)
    total = 5
    progress(0, total, "reading checkpoint")
    ckpt = real(req.checkpoint)
    facts = _inspect_source(ckpt, col)
    step = _check_steps(req, facts, col)
    progress(1, total, "reading run config")
    cfg, mismatches = _check_config(req, facts, col)
    params = _read_params(cfg.data, cfg.path or req.config_path, col) if cfg is not None else _Params()
    if params.world is not None and req.expected_world_size != params.world:
        col.refuse(
            "expected_world_size",
            f"--expected-world-size is {req.expected_world_size} but training.distributed.num_gpus is {params.world}",
        )
    if step is not None and params.accum is not None:
        expected = step * params.accum
        if req.consumed_batches_per_rank != expected:
            col.refuse(
                "consumed_batches_per_rank",
                f"--consumed-batches-per-rank is {req.consumed_batches_per_rank} but step {step} x "
                f"training.loop.gradient_accumulation_steps {params.accum} is {expected}",
            )
    output_dir = _check_output_dir(req, ckpt, col)
    if params.data_path is not None and is_within(real(req.output_dir), real(params.data_path)):
        col.refuse(
            "output_dir",
            f"{output_dir} is inside the dataset root {real(params.data_path)} "
            "(training.data.data_path), which must stay read-only",
        )

    progress(2, total, "loading manifest")
    manifest = None
    if params.manifest_path is not None:
        try:
            manifest = load_manifest(params.manifest_path)
        except FvError as exc:
            col.refuse("training.data.streaming_manifest_path", str(exc))
    if manifest is not None:
        progress(3, total, "checking manifest")
        check = check_manifest(manifest, params.data_path, source=True)
        for problem in check.problems:
            col.refuse("manifest", problem)
        for problem in check.source_problems:
            if req.skip_source_check:
                col.warn(f"source check skipped: {problem}")
            else:
                col.refuse("manifest.source", f"{problem} (--skip-source-check to proceed anyway)")
        col.warnings.extend(check.warnings)

    progress(4, total, "computing cursors")
    plan = None
    batch, world, sp = params.batch, params.world, params.sp
    layout_ok = manifest is not None and None not in (batch, world, sp, params.seed, params.shuffle) and world % sp == 0
    if layout_ok and world // sp > manifest.num_row_groups:
        # Some shard would be empty: samples_per_worker is 0. Refuse without building one
        # (possibly empty) shard per group, which for a typo like 1e11 GPUs exhausts memory.
        col.refuse(
            "samples_per_worker",
            f"dataset too small: {manifest.num_row_groups} row groups cannot feed {world // sp} data-parallel "
            f"groups (training.distributed.num_gpus {world} / sp_size {sp}; samples_per_worker 0)",
        )
        layout_ok = False
    if layout_ok:
        topo = Topology(world, sp, batch, params.seed, params.shuffle)
        shards, spw = shard_layout(manifest.rows, topo)
        yielded = req.consumed_batches_per_rank * batch
        if spw == 0:
            col.refuse(
                "samples_per_worker",
                f"dataset too small: the smallest of {world // sp} shards has fewer than "
                f"training.data.train_batch_size {batch} rows (samples_per_worker 0)",
            )
        elif req.consumed_batches_per_rank < 0:
            col.refuse("consumed_batches_per_rank", f"must be >= 0 (got {req.consumed_batches_per_rank})")
        elif yielded >= spw:
            col.refuse(
                "consumed_batches_per_rank",
                f"{req.consumed_batches_per_rank} batches x {batch} = {yielded} samples per rank reaches the "
                f"epoch boundary (samples_per_worker {spw}); only first-epoch cursors can be reconstructed",
            )
        if not col.refusals:
            if world == 1:
                col.warn("world size 1: FastVideo can resume this legacy checkpoint without sidecars")
            plan = MigrationPlan(
                request=req,
                checkpoint=ckpt,
                checkpoint_metadata_sha256=facts.metadata_sha256 or "",
                config_path=cfg.path or req.config_path,
                config_sha256=cfg.sha256 or "",
                manifest_path=manifest.path,
                manifest_fingerprint=manifest.fingerprint,
                dataset_root=manifest.dataset_root,
                output_dir=output_dir,
                step=step,
                world_size=world,
                sp_world_size=sp,
                batch_size=batch,
                read_batch_size=params.read_batch,
                seed=params.seed,
                shuffle_row_groups=params.shuffle,
                gradient_accumulation_steps=params.accum,
                consumed_batches_per_rank=req.consumed_batches_per_rank,
                yielded_samples_per_rank=yielded,
                samples_per_worker=spw,
                num_row_groups=manifest.num_row_groups,
                total_rows=manifest.total_rows,
                ranks=compute_cursors(manifest.rows, manifest.sample_starts, shards, topo, yielded),
                mismatches=mismatches,
                warnings=tuple(col.warnings),
            )
    progress(5, total, "done")
    return MigrationPreview(req, mismatches, tuple(col.refusals), tuple(col.warnings), plan)
