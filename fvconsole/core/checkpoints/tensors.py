"""Every tensor of a checkpoint's ``dcp/.metadata``: key, dtype, shape, bytes; totals per top-level key.

What an operator budgets disk with ("the optimizer is twice the model"). The file is read and
decoded by ``core/checkpoints/dcp_metadata.py`` (the one reader); this walks only the fixed shape
of torch's dataclasses in what it decoded (``TensorStorageMetadata.properties`` / ``.size``),
so a hostile graph is never walked recursively, and one damaged entry is that tensor's problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.formats.inert_pickle import InertGlobal, InertObject
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.untrusted import INT64_MAX, byte_count, element_count, int64_dims

#: Bytes per element of torch's dtypes (``torch.<name>.itemsize``); a dtype not here has
#: ``bytes: None`` (shown as "?"), never a guess.
ELEMENT_SIZE: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "complex128": 16, "complex64": 8, "complex32": 4,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1, "qint8": 1, "quint8": 1, "qint32": 4,
}
#: A tensor has at most this many dimensions (torch's own limit is 64).
MAX_DIMS = 64


@dataclass(frozen=True)
class DcpTensor:
    """One tensor of the checkpoint (its global shape: all ranks' shards together)."""

    key: str
    dtype: str  # torch's name without "torch.", e.g. "bfloat16"; "?" when the file's is not one
    shape: tuple[int, ...]
    bytes: int | None  # numel x element size; None for a dtype of unknown size, or a problem
    #: Why this tensor's entry cannot be used (a size beyond 64 bits, no torch dtype): the
    #: tensor's problem, never the whole listing's.
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class DcpTensors:
    """The tensors of ``dcp/.metadata``, sorted by key, and bytes per first key component."""

    tensors: tuple[DcpTensor, ...]
    totals: tuple[tuple[str, int], ...]  # (first component of the key, bytes), sorted
    total_bytes: int
    unknown_size: int  # tensors whose dtype has no known element size (not in the totals)
    damaged: int = 0  # tensors with a problem (not in the totals either)

    def totals_json(self) -> dict[str, int]:
        return dict(self.totals)


def dataclass_state(obj: Any) -> dict:
    """A dataclass's pickled state as one dict (with slots it is a (dict, slots) pair)."""
    state = obj.state if isinstance(obj, InertObject) else None
    if isinstance(state, tuple):
        merged: dict = {}
        for part in state:
            if isinstance(part, dict):
                merged.update(part)
        return merged
    return state if isinstance(state, dict) else {}


def _dtype(props: Any) -> str:
    """``TensorProperties``'s dtype: its ``__getstate__`` tuple starts with it (or a ``dtype`` field)."""
    state = props.state if isinstance(props, InertObject) else None
    value = state[0] if isinstance(state, tuple) and state else dataclass_state(props).get("dtype")
    if isinstance(value, InertGlobal) and value.module == "torch":
        return value.name
    raise ValueError("TensorProperties has no torch dtype")


def _shape(size: Any) -> tuple[int, ...]:
    """``torch.Size(dims)`` pickles as a call with one tuple of ints (each a 64-bit size, as torch's)."""
    if isinstance(size, InertObject) and size.args and isinstance(size.args[0], tuple | list):
        dims = size.args[0]
    elif isinstance(size, tuple | list):
        dims = size
    else:
        raise ValueError("size is not a torch.Size")
    shape = int64_dims(dims, MAX_DIMS)
    if shape is None:
        raise ValueError(f"size is not a tuple of at most {MAX_DIMS} sizes in 0..{INT64_MAX}")
    return shape


def _tensor(key: str, meta: Any) -> DcpTensor | None:
    """A ``TensorStorageMetadata`` entry as a DcpTensor; None for bytes (pickled objects).

    A damaged entry is a DcpTensor with its ``problem``: the other tensors still count.
    """
    if not isinstance(meta, InertObject) or meta.cls.name != "TensorStorageMetadata":
        return None
    state = dataclass_state(meta)
    try:
        dtype = _dtype(state.get("properties"))
    except ValueError as exc:
        return DcpTensor(key=key, dtype="?", shape=(), bytes=None, problem=str(exc))
    try:
        shape = _shape(state.get("size"))
    except ValueError as exc:
        return DcpTensor(key=key, dtype=dtype, shape=(), bytes=None, problem=str(exc))
    numel = element_count(shape)
    if numel is None:
        return DcpTensor(key=key, dtype=dtype, shape=shape, bytes=None,
                         problem=f"size has more than {INT64_MAX} elements")
    size = ELEMENT_SIZE.get(dtype)
    nbytes = None if size is None else byte_count(numel, size)
    if size is not None and nbytes is None:
        return DcpTensor(key=key, dtype=dtype, shape=shape, bytes=None,
                         problem=f"size holds more than {INT64_MAX} bytes of {dtype}")
    return DcpTensor(key=key, dtype=dtype, shape=shape, bytes=nbytes)


def tensors_of(table: Mapping[str, Any], keys: Sequence[str]) -> DcpTensors:
    """The tensors of ``Metadata.state_dict_metadata`` (``keys``: its keys, sorted); bytes (pickled
    objects) are left out, a damaged entry is that tensor's problem."""
    tensors = tuple(t for key in keys if (t := _tensor(key, table[key])) is not None)
    totals: dict[str, int] = {}
    for t in tensors:
        if t.bytes is not None and t.problem is None:
            top = t.key.split(".", 1)[0]
            totals[top] = totals.get(top, 0) + t.bytes
    return DcpTensors(
        tensors=tensors,
        totals=tuple(sorted(totals.items())),
        total_bytes=sum(totals.values()),
        unknown_size=sum(1 for t in tensors if t.bytes is None and t.problem is None),
        damaged=sum(1 for t in tensors if t.problem is not None),
    )
