"""FastVideo's RNG snapshot files, read inertly: which one a rank restores from and what it lacks.

FastVideo's ``CheckpointManager._save_rng_snapshot`` writes ``rng_state_rank<r>.pt`` per rank
(``torch.save`` of ``{"torch_rng", "python_rng", "numpy_rng", "cuda_rng", "gen_cuda"}``: torch's
CPU and CUDA states as uint8 tensors, ``random.getstate()``, ``np.random.get_state()`` and the
method's CUDA generator's state). ``load_rng_snapshot`` reads ``rng_state_rank<r>.pt``, else the
older single ``rng_state.pt``, else skips the restore with a warning; it sets the first three
only when present, but indexes ``cuda_rng`` and ``gen_cuda`` unconditionally, so a file without
them dies with a KeyError after the whole load. The file is a pickle that names torch's tensor
rebuild and numpy's array reconstruction: read by the inert reader (nothing imported or run),
each value's shape checked as the setter it goes to would take it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fvconsole.core.formats import torch_zip
from fvconsole.core.formats.inert_pickle import (
    AS_DICT,
    AS_GLOBAL,
    NUMPY_ARRAY_NAMES,
    InertObject,
    InertPersistent,
    Limits,
    PickleRefused,
    numpy_array,
)
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.safe_read import read_regular_file

#: ``rng_state_rank<r>.pt`` as FastVideo names it: ``r`` in decimal, no leading zero (``rank01`` is no rank's).
_RNG_NAME = re.compile(r"rng_state_rank(0|[1-9][0-9]*)\.pt")
#: The older single snapshot ``load_rng_snapshot`` falls back to.
LEGACY_RNG_NAME = "rng_state.pt"
#: Keys ``load_rng_snapshot`` indexes unconditionally, and those it restores only when present.
REQUIRED_KEYS = ("cuda_rng", "gen_cuda")
OPTIONAL_KEYS = ("torch_rng", "python_rng", "numpy_rng")
#: A snapshot is ~25 KB (numpy's 624-word state, Python's 625 ints, a few small tensors).
MAX_RNG_BYTES = 16 * 2**20
RNG_LIMITS = Limits(max_ops=torch_zip.MAX_PICKLE_BYTES, max_memo=1_000_000, max_globals=16, max_work=2_000_000)
_MT_WORDS = 624


def rng_name(rank: int) -> str:
    """``rng_state_rank<r>.pt``: the file FastVideo restores ``rank`` from."""
    return f"rng_state_rank{rank}.pt"


def rng_rank(name: str) -> int | None:
    """The rank whose snapshot the file ``name`` is (:func:`rng_name`'s inverse); None for any other name."""
    found = _RNG_NAME.fullmatch(name)
    return int(found[1]) if found else None


def _rng_global(module: str, name: str) -> str:
    """torch's tensor rebuild and storages, numpy's array reconstruction: inert stand-ins; nothing else."""
    if (module, name) == ("collections", "OrderedDict"):
        return AS_DICT
    if (module, name) in NUMPY_ARRAY_NAMES or (module == "torch._utils" and name.startswith("_rebuild_tensor")):
        return AS_GLOBAL
    if module == "torch" and name.endswith("Storage"):
        return AS_GLOBAL
    raise PickleRefused(f"names {module}.{name}, which an RNG snapshot never does")


@dataclass(frozen=True)
class RngSnapshot:
    """What one snapshot holds: its keys, and why ``load_rng_snapshot`` would fail on it (None: it would not)."""

    keys: tuple[str, ...]
    problem: str | None


def _is_tensor(value: Any) -> bool:
    """A tensor as torch.save pickles it: ``_rebuild_tensor_v2((storage pid, ...), offset, size, ...)``."""
    return (type(value) is InertObject and value.cls.module == "torch._utils" and bool(value.args)
            and type(value.args[0]) is InertPersistent)


def _value_problem(key: str, value: Any) -> str | None:
    """Why the setter ``key`` goes to would refuse ``value`` (None: it takes it)."""
    if key in ("torch_rng", "cuda_rng", "gen_cuda"):
        return None if _is_tensor(value) else f"'{key}' is not a tensor"
    if key == "python_rng":
        ok = (type(value) is tuple and len(value) == 3 and type(value[1]) is tuple
              and len(value[1]) == _MT_WORDS + 1 and all(type(n) is int for n in value[1]))
        return None if ok else "'python_rng' is not random.getstate()'s (version, 625 ints, gauss)"
    if key == "numpy_rng":
        array = numpy_array(value[1]) if type(value) is tuple and len(value) == 5 else None
        ok = (array is not None and value[0] == "MT19937" and array.shape == (_MT_WORDS,)
              and array.dtype in ("u4", "i4", "u8", "i8"))
        return None if ok else "'numpy_rng' is not np.random.get_state()'s ('MT19937', 624 words, pos, gauss)"
    return None


def judge_snapshot(payload: Any) -> RngSnapshot:
    """What ``load_rng_snapshot`` does with a loaded snapshot: the keys it finds, and where it fails."""
    if not isinstance(payload, Mapping):
        return RngSnapshot((), f"holds a {type(payload).__name__}, not the dict load_rng_snapshot indexes")
    keys = tuple(sorted(k for k in payload if isinstance(k, str)))
    for key in OPTIONAL_KEYS:
        if key in payload and (problem := _value_problem(key, payload[key])) is not None:
            return RngSnapshot(keys, problem)
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        named = " and ".join(f"'{k}'" for k in missing)
        return RngSnapshot(keys, f"has no {named}, which load_rng_snapshot indexes unconditionally (KeyError)")
    for key in REQUIRED_KEYS:
        if (problem := _value_problem(key, payload[key])) is not None:
            return RngSnapshot(keys, problem)
    return RngSnapshot(keys, None)


def read_snapshot(path: str) -> RngSnapshot:
    """The snapshot at ``path`` read inertly and judged; FvError when it cannot be read at all."""
    try:
        data = read_regular_file(path, "RNG snapshot", MAX_RNG_BYTES)
    except OSError as exc:
        raise FvError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        payload = torch_zip.loads_inert(data, _rng_global, limits=RNG_LIMITS)
    except torch_zip.TorchFileError as exc:
        return RngSnapshot((), f"is not readable as torch.save's format ({exc})")
    return judge_snapshot(payload)
