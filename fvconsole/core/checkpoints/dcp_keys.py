"""The DCP state keys of ``dcp/.metadata``, read without running the pickle (nor importing torch).

Why apart from the listing: decoding the metadata is its own hazard (a pickle of torch classes)
with its own caps and caches; the listing asks it one question (how many ``dataloader`` keys),
``checkpoints show --tensors`` another (``core/checkpoints/tensors.py``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from fvconsole.core.checkpoints.verdicts import VerdictCache, identity
from fvconsole.core.formats.inert_pickle import (
    AS_DICT,
    AS_GLOBAL,
    InertObject,
    Limits,
    PickleRefused,
    load_recorded,
)
from fvconsole.core.formats.inert_pickle import load as load_pickle
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.safe_read import read_regular_file

DATALOADER_KEY = "dataloader"
MAX_DCP_METADATA_BYTES = 2**30
_INERT_MODULES = ("torch", "pathlib", "collections", "copyreg")
#: DCP metadata of a 64-rank run with 4,000 sharded tensors is ~36 MB and 17.5M opcodes;
#: these caps leave room for several times that and stop a hostile file within seconds.
DCP_LIMITS = Limits(max_ops=100_000_000, max_memo=100_000_000, max_globals=256, max_work=10_000_000)


#: Names outside torch a DCP metadata pickle holds: some Python releases (Debian 12's 3.11.2
#: among them) pickle an enum member as ``getattr(EnumClass, "NAME")``, as torch's
#: ``TensorProperties`` memory format. Inert like every other global: recorded, never called.
_INERT_NAMES = {("builtins", "getattr")}


def _dcp_global(module: str, name: str) -> str:
    """Resolver for the DCP pickle: torch/pathlib names (and an enum member's ``getattr``) become
    inert stand-ins, nothing else."""
    if module == "collections" and name == "OrderedDict":
        return AS_DICT
    if module in _INERT_MODULES or module.startswith(("torch.", "pathlib.")) or (module, name) in _INERT_NAMES:
        return AS_GLOBAL
    raise PickleRefused(f"names {module}.{name}, which a DCP metadata pickle never does")


def _read_dcp_keys(meta: str) -> tuple[str, ...]:
    """State-dict keys of ``dcp/.metadata`` without running the pickle's code (nor importing torch).

    torch's ``FileSystemReader.read_metadata`` is a plain ``pickle.load``: listing a checkpoint
    with it would execute whatever a planted ``.metadata`` asks for. The file is a pickle of a
    few torch dataclasses; only ``Metadata.state_dict_metadata``'s keys are needed. The inert
    reader (``core.formats.inert_pickle``) imports and runs nothing and bounds time and memory; it also
    saves the ~2 s torch import.
    """
    return _dcp_keys_in(load_pickle(read_regular_file(meta, "DCP metadata", MAX_DCP_METADATA_BYTES),
                                    _dcp_global, DCP_LIMITS))


def _dcp_keys_in(obj: Any) -> tuple[str, ...]:
    """The state-dict keys of a decoded DCP ``Metadata`` (ValueError when it is not one)."""
    if not isinstance(obj, InertObject) or obj.cls.name != "Metadata":
        raise ValueError(f"top-level object is {getattr(getattr(obj, 'cls', None), 'name', type(obj).__name__)}, "
                         "not a DCP Metadata")
    state = obj.state
    if isinstance(state, tuple):  # (dict state, slot state) of a dataclass with slots
        merged: dict = {}
        for part in state:
            if isinstance(part, dict):
                merged.update(part)
        state = merged
    table = state.get("state_dict_metadata") if isinstance(state, dict) else None
    if not isinstance(table, dict) or not all(isinstance(k, str) for k in table):
        raise ValueError("Metadata has no state_dict_metadata mapping of string keys")
    return tuple(sorted(table))


# DCP metadata is immutable once written; cache key includes identity, mtime and ctime (a
# rewrite in place that restores size and mtime still changes ctime).
_DCP_CACHE: dict[tuple[str, int, int, int, int], tuple[str, ...]] = {}
_DCP_CACHE_MAX = 4096


def dcp_state_keys(checkpoint_dir: str | os.PathLike[str]) -> list[str]:
    """Sorted DCP state-dict keys from ``dcp/.metadata`` (CPU, no process group, no torch).

    FvError naming the file when it is missing or unreadable (the unpickling error is kept).
    """
    dcp_dir = os.path.join(os.fspath(checkpoint_dir), "dcp")
    meta = os.path.join(dcp_dir, ".metadata")
    try:
        st = os.stat(meta)
    except OSError as exc:
        raise FvError(f"{meta}: cannot read DCP metadata ({exc.strerror or exc})") from None
    key = (os.path.realpath(meta), st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    cached = _DCP_CACHE.get(key)
    if cached is not None:
        return list(cached)
    with _dcp_errors(meta):
        keys = _read_dcp_keys(meta)
    if len(_DCP_CACHE) >= _DCP_CACHE_MAX:
        _DCP_CACHE.clear()
    _DCP_CACHE[key] = keys
    return list(keys)


@contextmanager
def _dcp_errors(meta: str) -> Iterator[None]:
    """Every way decoding ``meta`` fails, as the one FvError naming it (the pickle's reason kept)."""
    try:
        yield
    except FvError:
        raise
    except PickleRefused as exc:
        raise FvError(f"{meta}: unreadable DCP metadata: the pickle {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged pickle can raise anything
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise FvError(f"{meta}: unreadable DCP metadata ({reason})") from None


def dcp_key_summary(checkpoint_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Top-level DCP key → number of state keys under it (for the TUI detail pane)."""
    summary: dict[str, int] = {}
    for key in dcp_state_keys(checkpoint_dir):
        top = key.split(".", 1)[0]
        summary[top] = summary.get(top, 0) + 1
    return dict(sorted(summary.items()))


def dataloader_key_count(checkpoint_dir: str, verdicts: VerdictCache | None = None) -> int:
    """State keys under ``dataloader`` in ``dcp/.metadata`` (what tells legacy from none).

    With ``verdicts``, a file whose identity was decoded cleanly before is not decoded again,
    nor one of the shape of a file this listing decoded (``core/formats/pickle_shape.py``: the same
    bytes but for opaque strings and integers, as every save of one run writes); a new verdict
    is kept only if the file's identity did not change while it was read.
    FvError as :func:`dcp_state_keys`.
    """
    meta = os.path.join(checkpoint_dir, "dcp", ".metadata")
    if verdicts is None:
        return _loader_keys(dcp_state_keys(checkpoint_dir))
    key = _identity(meta)
    if key is not None:
        hit = verdicts.get(key)
        if hit is not None:
            return hit
    try:
        os.stat(meta)
    except OSError as exc:
        raise FvError(f"{meta}: cannot read DCP metadata ({exc.strerror or exc})") from None
    with _dcp_errors(meta):  # as dcp_state_keys words it: reading is part of decoding
        data = read_regular_file(meta, "DCP metadata", MAX_DCP_METADATA_BYTES)
        count = verdicts.shapes.verdict(data)
        if count is None:
            obj, spans = load_recorded(data, _dcp_global, DCP_LIMITS)
            count = _loader_keys(_dcp_keys_in(obj))
            verdicts.shapes.keep(data, spans, count)
    if key is not None and _identity(meta) == key:
        verdicts.put(key, count)
    return count


def _loader_keys(keys: Iterable[str]) -> int:
    return sum(1 for k in keys if k == DATALOADER_KEY or k.startswith(DATALOADER_KEY + "."))


def _identity(meta: str) -> str | None:
    try:
        st = os.lstat(meta)
    except OSError:
        return None
    return identity(meta, st) if stat.S_ISREG(st.st_mode) else None
