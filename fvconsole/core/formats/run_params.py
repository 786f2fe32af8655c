"""The run config's values as FastVideo's streaming loader reads them: typed, range-checked, each refusal a value.

:class:`~.runconfig.TrainingKeys` holds the values as found (MISSING where absent);
:func:`read_params` checks each one's type and range (an integer, >= 1 for a size and >= 0 for the
workers; true or false; a non-empty string without a NUL byte, a ``preprocessed_data_type``
FastVideo accepts) and the values against each other (the loader's kind, its workers, sp_size
dividing num_gpus), and returns the checked values (:class:`Params`, None where missing or invalid)
with every refusal in the keys' order. Each refusal names the value's source: the override
``KEY=VALUE`` that set it, else the run config file. The migration's reading stage and preflight
read a run config through it; the reading stage also asks :func:`topology_change` which rows of a
mismatch report change the topology with valid values on both sides (what a reshard carries over)
before it checks the values. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fvconsole.core.formats.parquet_columns import COLUMNS, DEFAULT_TYPE, TYPE_PATH, DataType, data_type
from fvconsole.core.formats.runconfig import MISSING, Mismatch, TrainingKeys
from fvconsole.core.shared.reasons import Reason, invalid


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


def topology_change(mismatches: tuple[Mismatch, ...]) -> tuple[Mismatch, ...]:
    """The world-size and sp-size rows of a mismatch report whose both values are valid (an integer >= 1):
    what a reshard carries over (any other row of theirs refuses)."""
    return tuple(m for m in mismatches if m.critical and m.path in TOPOLOGY_PATHS
                 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (m.checkpoint, m.config)))
