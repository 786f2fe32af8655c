"""What the reading stage (:mod:`.sources`) reads from the run config and the checkpoint, each problem as a refusal.

The preview reports *all* refusals rather than stopping at the first, so one dry run tells
an operator everything that is wrong: every reader here returns what it could read (None
where a value is missing or invalid) with its refusals and warnings as values, in the order
the preview reports them.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace
from typing import Any

from fvconsole.core.formats.parquet_columns import COLUMNS, DEFAULT_TYPE, TYPE_PATH, DataType, data_type
from fvconsole.core.formats.runconfig import (
    MISSING,
    Mismatch,
    RunConfig,
    TrainingKeys,
    compare_configs,
    load_run_config,
)
from fvconsole.core.migration.request import Finding, Found
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.reasons import Reason, invalid
from fvconsole.core.shared.safe_read import sha256_regular_file


@dataclass(frozen=True)
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


#: What a check of one value returns: the value (None: missing or invalid) and its refusal (None: none).
Checked = tuple[Any, Reason | None]


def _int_param(keys: TrainingKeys, name: str, where: str, minimum: int | None) -> Checked:
    value, dotted = getattr(keys, name), keys.path(name)
    missing, where = _missing(keys, name, where), keys.where(name, where)  # the value's source: file or override
    if value is MISSING:
        return None, invalid(dotted, missing)
    if isinstance(value, bool) or not isinstance(value, int):
        return None, invalid(dotted, f"must be an integer in {where} (got {value!r})")
    if minimum is not None and value < minimum:
        return None, invalid(dotted, f"must be >= {minimum} in {where} (got {value})")
    return value, None


def _str_param(keys: TrainingKeys, name: str, where: str) -> Checked:
    value, dotted = getattr(keys, name), keys.path(name)
    missing, where = _missing(keys, name, where), keys.where(name, where)  # the value's source: file or override
    if value is MISSING or value is None:
        return None, invalid(dotted, missing)
    if not isinstance(value, str) or not value.strip():
        return None, invalid(dotted, f"must be a non-empty string in {where} (got {value!r})")
    if "\x00" in value:
        return None, invalid(dotted, f"contains a NUL byte in {where} (got {value!r})")
    return value, None


def _bool_param(keys: TrainingKeys, name: str, where: str) -> Checked:
    value = getattr(keys, name)
    if isinstance(value, bool):
        return value, None
    at = keys.where(name, f"the run config {where}")
    return None, invalid(keys.path(name), _missing(keys, name, where) if value is MISSING else
                         f"must be true or false (got {value!r}) in {at}")


def _missing(keys: TrainingKeys, name: str, where: str) -> str:
    """A key absent from the run config ``where``, or from the mapping an override put above it."""
    override = keys.override(name)
    return f"missing from the run config {where}" if override is None else f"missing after the override {override}"


def read_params(keys: TrainingKeys, where: str, max_workers: int = 0) -> tuple[Params, tuple[Reason, ...]]:
    """The run config's values, each checked, and every refusal in the keys' order; ``max_workers``:
    the most ``dataloader_num_workers`` allowed (1: a native reshard)."""
    checked = {
        "world": _int_param(keys, "num_gpus", where, 1),
        "sp": _int_param(keys, "sp_size", where, 1),
        "batch": _int_param(keys, "train_batch_size", where, 1),
        "read_batch": _int_param(keys, "streaming_read_batch_size", where, 1),
        "accum": _int_param(keys, "gradient_accumulation_steps", where, 1),
        "seed": _int_param(keys, "seed", where, None),
        "workers": _int_param(keys, "dataloader_num_workers", where, 0),
        "shuffle": _bool_param(keys, "streaming_shuffle_row_groups", where),
        "loader_type": _str_param(keys, "dataloader_type", where),
        "manifest_path": _str_param(keys, "streaming_manifest_path", where),
        "data_path": _str_param(keys, "data_path", where),
        "data_type": _data_type(keys.preprocessed_data_type, keys.where("preprocessed_data_type", where)),
    }
    p = Params(**{name: value for name, (value, _) in checked.items()})
    refused = tuple(why for _, why in checked.values() if why is not None)
    return p, refused + _together(p, keys, where, max_workers)


def _together(p: Params, keys: TrainingKeys, where: str, max_workers: int) -> tuple[Reason, ...]:
    """What the values refuse in each other's light: the loader, its workers, sp_size against num_gpus
    (each named in the source of the value refused: the override that set it, else ``where``)."""
    found = []
    if p.loader_type is not None and "".join(p.loader_type.split()).lower() != "streaming":
        found.append(invalid(
            "training.data.dataloader_type",
            f"is {p.loader_type!r} in {keys.where('dataloader_type', where)}; "
            "only the 'streaming' dataloader can be migrated",
        ))
    if p.workers is not None and p.workers > max_workers:
        at = keys.where("dataloader_num_workers", where)
        found.append(invalid(
            "training.data.dataloader_num_workers",
            f"is {p.workers} in {at}; legacy migration requires 0 (one reader per rank)" if max_workers == 0 else
            f"is {p.workers} in {at}; a reshard requires 0 or 1: FastVideo's dataset state is one worker's cursor",
        ))
    if p.world is not None and p.sp is not None and p.world % p.sp:
        found.append(invalid(
            "training.distributed.sp_size",
            f"{p.sp} does not divide training.distributed.num_gpus {p.world} in "
            f"{keys.where('sp_size', keys.where('num_gpus', where))}",
        ))
    return tuple(found)


def _data_type(value: Any, where: str) -> Checked:
    """``training.data.preprocessed_data_type`` as FastVideo reads it (absent: ``t2v``); refused if it refuses it."""
    found = data_type(None if value is MISSING else value)
    if found is None:
        accepted = ", ".join(repr(name) for name in COLUMNS)
        return None, invalid(TYPE_PATH, f"is {value!r} in {where}; FastVideo accepts {accepted} (not set: "
                             f"{DEFAULT_TYPE!r}) and will not start with another value")
    return found, None


#: The two critical keys a reshard may change (docs/formats.md §2).
TOPOLOGY_PATHS = ("training.distributed.num_gpus", "training.distributed.sp_size")


@dataclass(frozen=True)
class CheckpointFacts:
    path: str
    dir_step: int | None = None
    metadata_step: int | None = None
    metadata_sha256: str | None = None
    embedded: dict | None = None
    #: The checkpoint's kind (docs/formats.md §1), None when it could not be inspected.
    kind: str | None = None
    #: A rank-local checkpoint's sidecar count (refused unless the plan reshards: :func:`rank_local_refusal`).
    rank_sidecars: int = 0

    #: The embedded config's values fvconsole reads (read once, with ``embedded``).
    keys: TrainingKeys = TrainingKeys()

    @property
    def step(self) -> int | None:
        """The step the sidecars are for: the directory name's, else metadata.json's."""
        return self.dir_step if self.dir_step is not None else self.metadata_step

    @property
    def topology(self) -> tuple[int, int] | None:
        """(world size, sp size) of the embedded config, when both are valid."""
        if self.embedded is None:
            return None
        world, sp = self.keys.num_gpus, self.keys.sp_size
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in (world, sp)) or world % sp:
            return None
        return world, sp


@dataclass(frozen=True)
class Inspected:
    """The checkpoint's facts and what reading them refused and warned of (words without flags)."""

    facts: CheckpointFacts
    refusals: tuple[Reason, ...]
    warnings: tuple[Reason, ...]


def rank_local_refusal(facts: CheckpointFacts) -> Reason | None:
    """A rank-local checkpoint on its own topology: FastVideo resumes it as it is (None: not rank-local)."""
    if facts.kind != "rank-local":
        return None
    return invalid(
        "checkpoint.kind",
        f"{facts.path} already holds {plural(facts.rank_sidecars, 'rank-local dataloader_state_rank<r>.pt sidecar')} "
        f"(kind 'rank-local', expected 'legacy'); FastVideo uses {'it' if facts.rank_sidecars == 1 else 'them'} and "
        "would ignore migrated ones: migration is unnecessary",
    )


def inspect_source(ckpt: str) -> Inspected:
    """Directory name, dcp/, metadata.json and its embedded config; kind and completeness."""
    from fvconsole.core.checkpoints.dcp_metadata import dcp_metadata_refusal
    from fvconsole.core.checkpoints.listing import checkpoint_step

    dir_step = checkpoint_step(ckpt)
    if not os.path.isdir(ckpt):
        return Inspected(CheckpointFacts(ckpt, dir_step), (invalid("checkpoint", f"{ckpt} is not a directory"),), ())
    refused = []
    if dir_step is None:
        refused.append(invalid(
            "checkpoint",
            f"directory name {os.path.basename(ckpt)!r} does not match checkpoint-<step>; FastVideo checks "
            "sidecars against the step in that name",
        ))
    dcp = os.path.join(ckpt, "dcp")
    if not os.path.isdir(dcp):
        refused.append(invalid("checkpoint.dcp", f"missing DCP directory {dcp}"))
    elif (no_metadata := dcp_metadata_refusal(ckpt)) is not None:
        # dcp.save writes .metadata last: without it (or with a FIFO or a directory in its place)
        # FastVideo cannot load this checkpoint at all, so sidecars for it could never be used.
        refused.append(invalid("checkpoint.dcp", f"{no_metadata}; FastVideo cannot resume from this checkpoint"))
    facts, why = _read_metadata(CheckpointFacts(ckpt, dir_step))
    refused += [why] if why is not None else []
    if dir_step is None:
        return Inspected(facts, tuple(refused), ())
    kind, sidecars, warnings = _inspect_kind(ckpt)
    return Inspected(replace(facts, kind=kind, rank_sidecars=sidecars), tuple(refused), warnings)


def _read_metadata(facts: CheckpointFacts) -> tuple[CheckpointFacts, Reason | None]:
    """metadata.json's step, its sha256 and its embedded config (read once, as ``TrainingKeys``)."""
    from fvconsole.core.checkpoints.listing import read_metadata

    meta_path = os.path.join(facts.path, "metadata.json")
    try:
        meta = read_metadata(facts.path)
        facts = replace(facts, metadata_step=meta["step"])
        facts = replace(facts, metadata_sha256=sha256_regular_file(meta_path))
        if not isinstance(meta.get("config"), dict):
            return facts, invalid("metadata.config", f"{meta_path} has no embedded run config (field 'config')")
        return replace(facts, embedded=meta["config"], keys=TrainingKeys.of(meta["config"])), None
    except FvError as exc:
        return facts, invalid("metadata.json", str(exc))
    except OSError as exc:
        return facts, invalid("metadata.json", f"{meta_path}: cannot read ({exc.strerror or exc})")


def _inspect_kind(ckpt: str) -> tuple[str | None, int, tuple[Reason, ...]]:
    """The checkpoint's kind, its rank-local sidecar count, and the warnings its inspection gives."""
    from fvconsole.core.checkpoints.gaps import GapKind
    from fvconsole.core.checkpoints.listing import inspect_checkpoint

    try:
        info = inspect_checkpoint(ckpt)
    except FvError as exc:
        return None, 0, (invalid("warning", f"checkpoint could not be inspected: {exc}"),)
    warned = []
    if not info.complete:
        warned.append(invalid("warning", (
            f"checkpoint {ckpt} is incomplete (interrupted save?): " + "; ".join(g.text for g in info.gaps))))
    if info.kind == "none":
        warned.append(invalid("warning", (
            f"checkpoint {ckpt} has no 'dataloader' state in DCP (kind 'none', expected 'legacy'); the "
            "sidecars are reconstructed from the step alone")))
    elif info.kind == "unknown":
        unreadable = info.has_dcp_metadata or any(g.kind is GapKind.DCP_METADATA_UNREADABLE for g in info.gaps)
        why = "DCP metadata unreadable" if unreadable else "no dcp/.metadata to read"
        warned.append(invalid("warning", f"checkpoint {ckpt} kind is unknown ({why}); expected 'legacy'"))
    if info.dcp_error is not None:
        warned.append(invalid("warning", info.dcp_error))
    return info.kind, info.rank_sidecars if info.kind == "rank-local" else 0, tuple(warned)


def topology_change(mismatches: tuple[Mismatch, ...]) -> tuple[Mismatch, ...]:
    """The world-size and sp-size rows a reshard carries over (both sides valid numbers; any other row refuses)."""
    return tuple(m for m in mismatches if m.critical and m.path in TOPOLOGY_PATHS
                 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (m.checkpoint, m.config)))


@dataclass(frozen=True)
class ConfigRead:
    """The run config (None: refused), its mismatch report against the checkpoint's, what they refuse and warn of."""

    config: RunConfig | None
    mismatches: tuple[Mismatch, ...]
    refusals: tuple[Found, ...]
    warnings: tuple[Reason, ...]


def read_config(config_path: str, overrides: tuple[str, ...], embedded: dict | None,
                reshard: str | None) -> ConfigRead:
    """The run config and its mismatch report; a world/sp change refuses here only as part of another mismatch.

    A topology change alone is the reshard's (the planner refuses it without a mode); with
    a mode chosen (``reshard``) its rows are reported as non-critical.
    """
    try:
        cfg = load_run_config(config_path, overrides)
    except FvError as exc:
        return ConfigRead(None, (), (invalid("config", str(exc)),), ())
    if embedded is None:
        return ConfigRead(cfg, (), (), ())
    mismatches = compare_configs(embedded, cfg.data, cfg.overrides)
    carried = topology_change(mismatches)
    if carried and reshard is not None:
        mismatches = tuple(replace(m, critical=False) if m in carried else m for m in mismatches)
    critical = [m for m in mismatches if m.critical and m not in carried]
    refused: tuple[Found, ...] = ()
    if critical:
        # each key names where its value came from: a --set override, else the file (not the file for all)
        differs = ("the run config differs from the checkpoint's embedded config on "
                   f"{plural(len(critical), 'critical key')}: " + "; ".join(m.describe(cfg.path) for m in critical))
        fixes = [m.override for m in critical]
        # each is a launch override the form or --set can repeat; not for a value of another type than the
        # checkpoint's (num_gpus: eight): that value is refused as such, repeating the checkpoint's is no fix
        if all(fixes) and all(type(m.checkpoint) is type(m.config) for m in critical):
            refused = (Finding("config.critical_override", "config",
                               (("differs", differs), ("overrides", " ".join(shlex.quote(f) for f in fixes if f)))),)
        else:
            refused = (invalid("config", differs),)
    others = sum(1 for m in mismatches if not m.critical and m.path not in TOPOLOGY_PATHS)
    warned = (invalid("warning", "the run config differs from the checkpoint's embedded config on "
                      f"{plural(others, 'non-critical key')}"),) if others else ()
    return ConfigRead(cfg, mismatches, refused, warned)
