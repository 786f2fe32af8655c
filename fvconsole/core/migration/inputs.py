"""What the planner reads from the run config and the checkpoint, each problem as a refusal.

The planner collects *all* refusals rather than stopping at the first, so one dry run tells
an operator everything that is wrong: every check here records into a :class:`Collector`
and returns what it could read (None where a value is missing or invalid, already refused).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fvconsole.core.formats.parquet_columns import COLUMNS, DEFAULT_TYPE, TYPE_PATH, DataType, data_type
from fvconsole.core.formats.runconfig import (
    MISSING,
    Mismatch,
    RunConfig,
    TrainingKeys,
    compare_configs,
    load_run_config,
)
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.safe_read import sha256_regular_file

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration.request import Collector, MigrationRequest


@dataclass
class Params:
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
    #: The projection FastVideo's loader will use (None: a value FastVideo refuses, already refused).
    data_type: DataType | None = None


def _int_param(keys: TrainingKeys, name: str, where: str, col: Collector, minimum: int | None) -> int | None:
    value, dotted = getattr(keys, name), keys.path(name)
    missing, where = _missing(keys, name, where), keys.where(name, where)  # the value's source: file or override
    if value is MISSING:
        col.refuse(dotted, missing)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        col.refuse(dotted, f"must be an integer in {where} (got {value!r})")
        return None
    if minimum is not None and value < minimum:
        col.refuse(dotted, f"must be >= {minimum} in {where} (got {value})")
        return None
    return value


def _str_param(keys: TrainingKeys, name: str, where: str, col: Collector) -> str | None:
    value, dotted = getattr(keys, name), keys.path(name)
    missing, where = _missing(keys, name, where), keys.where(name, where)  # the value's source: file or override
    if value is MISSING or value is None:
        col.refuse(dotted, missing)
        return None
    if not isinstance(value, str) or not value.strip():
        col.refuse(dotted, f"must be a non-empty string in {where} (got {value!r})")
        return None
    if "\x00" in value:
        col.refuse(dotted, f"contains a NUL byte in {where} (got {value!r})")
        return None
    return value


def _bool_param(keys: TrainingKeys, name: str, where: str, col: Collector) -> bool | None:
    value = getattr(keys, name)
    if isinstance(value, bool):
        return value
    at = keys.where(name, f"the run config {where}")
    col.refuse(keys.path(name), _missing(keys, name, where) if value is MISSING else
               f"must be true or false (got {value!r}) in {at}")
    return None


def _missing(keys: TrainingKeys, name: str, where: str) -> str:
    """A key absent from the run config ``where``, or from the mapping an override put above it."""
    override = keys.override(name)
    return f"missing from the run config {where}" if override is None else f"missing after the override {override}"


def read_params(keys: TrainingKeys, where: str, col: Collector, max_workers: int = 0) -> Params:
    """The run config's values, each checked; ``max_workers``: the most ``dataloader_num_workers`` allowed (1: a native reshard)."""
    p = Params(
        world=_int_param(keys, "num_gpus", where, col, 1),
        sp=_int_param(keys, "sp_size", where, col, 1),
        batch=_int_param(keys, "train_batch_size", where, col, 1),
        read_batch=_int_param(keys, "streaming_read_batch_size", where, col, 1),
        accum=_int_param(keys, "gradient_accumulation_steps", where, col, 1),
        seed=_int_param(keys, "seed", where, col, None),
        workers=_int_param(keys, "dataloader_num_workers", where, col, 0),
        shuffle=_bool_param(keys, "streaming_shuffle_row_groups", where, col),
        loader_type=_str_param(keys, "dataloader_type", where, col),
        manifest_path=_str_param(keys, "streaming_manifest_path", where, col),
        data_path=_str_param(keys, "data_path", where, col),
        data_type=_data_type(keys.preprocessed_data_type, keys.where("preprocessed_data_type", where), col),
    )
    _check_together(p, keys, where, col, max_workers)
    return p


def _check_together(p: Params, keys: TrainingKeys, where: str, col: Collector, max_workers: int) -> None:
    """What the values refuse in each other's light: the loader, its workers, sp_size against num_gpus
    (each named in the source of the value refused: the override that set it, else ``where``)."""
    if p.loader_type is not None and "".join(p.loader_type.split()).lower() != "streaming":
        col.refuse(
            "training.data.dataloader_type",
            f"is {p.loader_type!r} in {keys.where('dataloader_type', where)}; "
            "only the 'streaming' dataloader can be migrated",
        )
    if p.workers is not None and p.workers > max_workers:
        at = keys.where("dataloader_num_workers", where)
        col.refuse(
            "training.data.dataloader_num_workers",
            f"is {p.workers} in {at}; legacy migration requires 0 (one reader per rank)" if max_workers == 0 else
            f"is {p.workers} in {at}; a reshard requires 0 or 1: FastVideo's dataset state is one worker's cursor",
        )
    if p.world is not None and p.sp is not None and p.world % p.sp:
        col.refuse(
            "training.distributed.sp_size",
            f"{p.sp} does not divide training.distributed.num_gpus {p.world} in "
            f"{keys.where('sp_size', keys.where('num_gpus', where))}",
        )


def _data_type(value: Any, where: str, col: Collector) -> DataType | None:
    """``training.data.preprocessed_data_type`` as FastVideo reads it (absent: ``t2v``); refused if it refuses it."""
    found = data_type(None if value is MISSING else value)
    if found is None:
        accepted = ", ".join(repr(name) for name in COLUMNS)
        col.refuse(TYPE_PATH, f"is {value!r} in {where}; FastVideo accepts {accepted} (not set: {DEFAULT_TYPE!r}) "
                   "and will not start with another value")
    return found


#: The two critical keys a reshard may change (docs/formats.md §2).
TOPOLOGY_PATHS = ("training.distributed.num_gpus", "training.distributed.sp_size")


@dataclass
class CheckpointFacts:
    path: str
    dir_step: int | None = None
    metadata_step: int | None = None
    metadata_sha256: str | None = None
    embedded: dict | None = None
    #: The checkpoint's kind (docs/formats.md §1), None when it could not be inspected.
    kind: str | None = None
    #: A rank-local checkpoint: its sidecar count, and where its refusal goes among the others
    #: (refused unless the plan reshards: :func:`refuse_rank_local`).
    rank_sidecars: int = 0
    rank_local_at: int | None = None

    #: The embedded config's values fvconsole reads (read once, with ``embedded``).
    keys: TrainingKeys = TrainingKeys()

    @property
    def topology(self) -> tuple[int, int] | None:
        """(world size, sp size) of the embedded config, when both are valid."""
        if self.embedded is None:
            return None
        world, sp = self.keys.num_gpus, self.keys.sp_size
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in (world, sp)) or world % sp:
            return None
        return world, sp


def refuse_rank_local(facts: CheckpointFacts, col: Collector) -> None:
    """A rank-local checkpoint on its own topology: FastVideo resumes it as it is (refused where it was found)."""
    if facts.rank_local_at is None:
        return
    col.refuse(
        "checkpoint.kind",
        f"{facts.path} already holds {plural(facts.rank_sidecars, 'rank-local dataloader_state_rank<r>.pt sidecar')} "
        f"(kind 'rank-local', expected 'legacy'); FastVideo uses {'it' if facts.rank_sidecars == 1 else 'them'} and "
        "would ignore migrated ones: migration is unnecessary",
        at=facts.rank_local_at,
    )


def inspect_source(ckpt: str, col: Collector) -> CheckpointFacts:
    """Directory name, dcp/, metadata.json and its embedded config; kind and completeness."""
    from fvconsole.core.checkpoints.dcp_metadata import dcp_metadata_path, missing_text
    from fvconsole.core.checkpoints.listing import checkpoint_step, inspect_checkpoint, read_metadata

    facts = CheckpointFacts(ckpt, dir_step=checkpoint_step(ckpt))
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
    elif not os.path.lexists(dcp_metadata_path(ckpt)):
        # dcp.save writes .metadata last: without it the save was interrupted and FastVideo
        # cannot load this checkpoint at all, so sidecars for it could never be used.
        col.refuse("checkpoint.dcp", f"{missing_text(ckpt)}; FastVideo cannot resume from this checkpoint")
    meta_path = os.path.join(ckpt, "metadata.json")
    try:
        meta = read_metadata(ckpt)
        facts.metadata_step = meta["step"]
        facts.metadata_sha256 = sha256_regular_file(meta_path)
        if isinstance(meta.get("config"), dict):
            facts.embedded, facts.keys = meta["config"], TrainingKeys.of(meta["config"])
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
        facts.kind = info.kind
        if info.kind == "rank-local":
            facts.rank_sidecars, facts.rank_local_at = info.rank_sidecars, col.count
        elif info.kind == "none":
            col.warn(
                f"checkpoint {ckpt} has no 'dataloader' state in DCP (kind 'none', expected 'legacy'); the "
                "sidecars are reconstructed from the step alone"
            )
        elif info.kind == "unknown":
            why = "DCP metadata unreadable" if info.has_dcp_metadata else "no dcp/.metadata to read"
            col.warn(f"checkpoint {ckpt} kind is unknown ({why}); expected 'legacy'")
        if info.dcp_error is not None:
            col.warn(info.dcp_error)
    return facts


def check_steps(req: MigrationRequest, facts: CheckpointFacts, col: Collector) -> int | None:
    """expected_step vs metadata.json step AND vs the directory-name step; returns the step."""
    if facts.metadata_step is not None and req.expected_step != facts.metadata_step:
        col.refused("expected_step.metadata", "expected_step", given=req.expected_step,
                    actual=facts.metadata_step, path=facts.path)
    if facts.dir_step is not None and req.expected_step != facts.dir_step:
        col.refused("expected_step.directory", "expected_step", given=req.expected_step, actual=facts.dir_step,
                    name=os.path.basename(facts.path))
    if facts.dir_step is not None:
        return facts.dir_step
    return facts.metadata_step


def topology_change(mismatches: tuple[Mismatch, ...]) -> tuple[Mismatch, ...]:
    """The world-size and sp-size rows a reshard carries over (both sides valid numbers; any other row refuses)."""
    return tuple(m for m in mismatches if m.critical and m.path in TOPOLOGY_PATHS
                 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (m.checkpoint, m.config)))


def check_config(
    req: MigrationRequest, facts: CheckpointFacts, col: Collector
) -> tuple[RunConfig | None, tuple[Mismatch, ...]]:
    """The run config and its mismatch report; a world/sp change refuses here only as part of another mismatch.

    A topology change alone is the reshard's (the planner refuses it without a mode); with
    a mode chosen its rows are reported as non-critical.
    """
    try:
        cfg = load_run_config(req.config_path, req.overrides)
    except FvError as exc:
        col.refuse("config", str(exc))
        return None, ()
    if facts.embedded is None:
        return cfg, ()
    mismatches = compare_configs(facts.embedded, cfg.data)
    carried = topology_change(mismatches)
    if carried and req.reshard is not None:
        mismatches = tuple(Mismatch(m.path, m.checkpoint, m.config, False) if m in carried else m
                           for m in mismatches)
    critical = [m for m in mismatches if m.critical and m not in carried]
    if critical:
        differs = (f"run config {cfg.path} differs from the checkpoint's embedded config on "
                   f"{plural(len(critical), 'critical key')}: " + "; ".join(m.describe() for m in critical))
        fixes = [m.override for m in critical]
        # each is a launch override the form or --set can repeat; not for a value of another type than the
        # checkpoint's (num_gpus: eight): that value is refused as such, repeating the checkpoint's is no fix
        if all(fixes) and all(type(m.checkpoint) is type(m.config) for m in critical):
            col.refused("config.critical_override", "config", differs=differs,
                        overrides=" ".join(shlex.quote(f) for f in fixes if f))
        else:
            col.refuse("config", differs)
    others = sum(1 for m in mismatches if not m.critical and m.path not in TOPOLOGY_PATHS)
    if others:
        col.warn("the run config differs from the checkpoint's embedded config on "
                 f"{plural(others, 'non-critical key')}")
    return cfg, mismatches
