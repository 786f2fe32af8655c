"""The one reader of a checkpoint's ``dcp/.metadata``: read bounded, decoded inertly, worded once.

``dcp/.metadata`` is a pickle of torch's dataclasses that whoever can write the output dir may
have replaced. torch's own ``FileSystemReader.read_metadata`` is a plain ``pickle.load`` (it runs
whatever the file asks for) and costs a ~2 s torch import. Here the bytes come through the
bounded-read door (``core/shared/safe_read.py``) and the pickle through the inert VM
(``core/formats/inert_pickle.py``, under ``DCP_LIMITS``), which imports and runs nothing. Every
way that fails is one line naming the file, worded here only: missing, cannot be read, too
large or not a regular file (the read door's words), not a DCP metadata pickle.

Its callers (the listing's loader keys, ``checkpoints show`` and its ``--tensors``, the console's
detail pane, preflight's storage check, the migration's inputs) ask :func:`read_dcp_metadata`
for one :class:`DcpMetadata`, or the listing :func:`dataloader_key_count` (remembered verdicts);
whether a regular file is there at all, :func:`dcp_metadata_gap` (typed: the listing's ``gaps``)
or :func:`dcp_metadata_refusal` (a migration's refusal), in the same words; nothing else in ``fvconsole/`` decodes the file (``tests/architecture/test_doors.py``, row
``dcp-metadata``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fvconsole.core.checkpoints.gaps import INTERRUPTED, Gap, GapKind
from fvconsole.core.checkpoints.tensors import DcpTensors, dataclass_state, tensors_of
from fvconsole.core.checkpoints.verdicts import VerdictCache, identity
from fvconsole.core.formats.inert_pickle import (
    AS_DICT,
    AS_GLOBAL,
    InertObject,
    Limits,
    PickleRefused,
    load,
    load_recorded,
)
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.safe_read import not_regular_text, read_regular_file
from fvconsole.core.shared.untrusted import INT64_MAX

DATALOADER_KEY = "dataloader"
MAX_DCP_METADATA_BYTES = 2**30
#: What the read door calls the file in its refusals (too large, not a regular file).
WHAT = "DCP metadata"
_INERT_MODULES = ("torch", "pathlib", "collections", "copyreg")
#: DCP metadata of a 64-rank run with 4,000 sharded tensors is ~36 MB and 17.5M opcodes;
#: these caps leave room for several times that and stop a hostile file within seconds.
DCP_LIMITS = Limits(max_ops=100_000_000, max_memo=100_000_000, max_globals=256, max_work=10_000_000)
#: Names outside torch a DCP metadata pickle holds: some Python releases (Debian 12's 3.11.2
#: among them) pickle an enum member as ``getattr(EnumClass, "NAME")``, as torch's
#: ``TensorProperties`` memory format. Inert like every other global: recorded, never called.
_INERT_NAMES = {("builtins", "getattr")}


def dcp_global(module: str, name: str) -> str:
    """Resolver for the DCP pickle: torch/pathlib names (and an enum member's ``getattr``) become
    inert stand-ins, nothing else."""
    if module == "collections" and name == "OrderedDict":
        return AS_DICT
    if module in _INERT_MODULES or module.startswith(("torch.", "pathlib.")) or (module, name) in _INERT_NAMES:
        return AS_GLOBAL
    raise PickleRefused(f"names {module}.{name}, which a DCP metadata pickle never does")


@dataclass(frozen=True)
class DcpMetadata:
    """What one ``dcp/.metadata`` says, decoded once: its state keys, tensors and storage files.

    The decoded graph itself is not kept: every caller's question is answered from these fields.
    """

    path: str  # the file, as every message names it
    keys: tuple[str, ...]  # Metadata.state_dict_metadata's keys, sorted
    tensors: DcpTensors
    #: (storage file inside ``dcp/``, the furthest byte any item reads from it), sorted; None when
    #: ``storage_data`` cannot be used (``storage_problem`` says why): only ``dcp.load`` needs it.
    storage: tuple[tuple[str, int], ...] | None
    storage_problem: str | None = None

    @property
    def key_groups(self) -> tuple[tuple[str, int], ...]:
        """(top-level key, number of state keys under it), sorted."""
        groups: dict[str, int] = {}
        for key in self.keys:
            top = key.split(".", 1)[0]
            groups[top] = groups.get(top, 0) + 1
        return tuple(sorted(groups.items()))

    @property
    def dataloader_keys(self) -> int:
        """State keys under ``dataloader`` (what tells a legacy checkpoint from one with none)."""
        return _loader_keys(self.keys)

    def needed_storage(self) -> tuple[tuple[str, int], ...]:
        """:attr:`storage`, or the one FvError naming the file when its ``storage_data`` is unusable."""
        if self.storage is None:
            raise _not_dcp(self.path, self.storage_problem or "Metadata has no storage_data")
        return self.storage


def dcp_metadata_path(checkpoint_dir: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(checkpoint_dir), "dcp", ".metadata")


def dcp_metadata_gap(checkpoint_dir: str | os.PathLike[str]) -> Gap | None:
    """None when ``dcp/.metadata`` is a regular file (through links, as ``dcp.load`` opens it); else why
    not, typed (missing, or something else there: a FIFO, a directory) and in the reader's one line.

    Only ``stat``s the file. PermissionError when ``dcp/`` cannot be searched: unreadable, not absent.
    """
    meta = dcp_metadata_path(checkpoint_dir)
    try:
        st = os.stat(meta)
    except PermissionError:
        raise
    except FileNotFoundError:
        return Gap(GapKind.DCP_METADATA_MISSING, _missing(meta))
    except OSError as exc:
        return Gap(GapKind.DCP_METADATA_UNREADABLE, _cannot_read(meta, exc))
    if stat.S_ISREG(st.st_mode):
        return None
    return Gap(GapKind.DCP_METADATA_UNREADABLE, not_regular_text(meta, WHAT, st.st_mode))


def dcp_metadata_refusal(checkpoint_dir: str | os.PathLike[str]) -> str | None:
    """Why ``dcp.load`` cannot even open ``dcp/.metadata`` (the reader's one line), None when it is a regular
    file: missing, not a regular file, or ``dcp/`` not searchable. For a caller that refuses on it (a migration)."""
    try:
        gap = dcp_metadata_gap(checkpoint_dir)
    except PermissionError as exc:
        return _cannot_read(dcp_metadata_path(checkpoint_dir), exc)
    return gap.text if gap is not None else None


#: Records by file identity (a DCP metadata file is written once by its save): ``checkpoints
#: show`` asks for the listing's and then its own; the console's detail pane for a row again.
_RECORDS: dict[str, DcpMetadata] = {}
_RECORDS_MAX = 64


def read_dcp_metadata(checkpoint_dir: str | os.PathLike[str]) -> DcpMetadata:
    """``<checkpoint_dir>/dcp/.metadata`` decoded (CPU, no torch); FvError naming the file when it cannot be."""
    meta = dcp_metadata_path(checkpoint_dir)
    key = _identity(meta)
    cached = _RECORDS.get(key) if key is not None else None
    if cached is not None:
        return cached
    record = decode_dcp_metadata(_read(meta), meta)
    if key is not None and _identity(meta) == key:  # kept only if the file did not change while read
        if len(_RECORDS) >= _RECORDS_MAX:
            _RECORDS.clear()
        _RECORDS[key] = record
    return record


def decode_dcp_metadata(data: bytes, meta: str) -> DcpMetadata:
    """The bytes of the file ``meta`` decoded; FvError naming it when they are not a DCP metadata pickle."""
    with _worded(meta):
        state = _metadata_state(load(data, dcp_global, DCP_LIMITS))
        table = _state_table(state)
        keys = tuple(sorted(table))
        try:
            storage, problem = _storage_needs(state.get("storage_data")), None
        except ValueError as exc:
            storage, problem = None, str(exc)
        return DcpMetadata(meta, keys, tensors_of(table, keys), storage, problem)


def dataloader_key_count(checkpoint_dir: str, verdicts: VerdictCache | None = None) -> int:
    """State keys under ``dataloader`` in ``dcp/.metadata`` (what tells legacy from none).

    With ``verdicts``, a file whose identity was decoded cleanly before is not decoded again,
    nor one of the shape of a file this listing decoded (``core/formats/pickle_shape.py``: the same
    bytes but for opaque strings and integers, as every save of one run writes); a new verdict
    is kept only if the file's identity did not change while it was read.
    FvError as :func:`read_dcp_metadata`.
    """
    if verdicts is None:
        return read_dcp_metadata(checkpoint_dir).dataloader_keys
    meta = dcp_metadata_path(checkpoint_dir)
    key = _identity(meta)
    if key is not None:
        hit = verdicts.get(key)
        if hit is not None:
            return hit
    data = _read(meta)
    with _worded(meta):
        count = verdicts.shapes.verdict(data)
        if count is None:
            obj, spans = load_recorded(data, dcp_global, DCP_LIMITS)
            count = _loader_keys(_state_table(_metadata_state(obj)))
            verdicts.shapes.keep(data, spans, count)
    if key is not None and _identity(meta) == key:
        verdicts.put(key, count)
    return count


def _read(meta: str) -> bytes:
    """The file's bytes through the read door (its refusals: too large, not a regular file)."""
    try:
        return read_regular_file(meta, WHAT, MAX_DCP_METADATA_BYTES)
    except FileNotFoundError:
        raise FvError(_missing(meta)) from None
    except OSError as exc:
        raise FvError(_cannot_read(meta, exc)) from None


def _cannot_read(meta: str, exc: OSError) -> str:
    return f"{meta}: cannot read DCP metadata ({exc.strerror or exc})"


def _missing(meta: str) -> str:
    """The one wording of an absent file: ``dcp.save`` writes it last, so without it the save was cut off."""
    return f"{meta}: missing{INTERRUPTED}"


def _not_dcp(meta: str, why: str) -> FvError:
    return FvError(f"{meta}: unreadable DCP metadata: {why}")


@contextmanager
def _worded(meta: str) -> Iterator[None]:
    """Every way decoding ``meta`` fails, as the one FvError naming it (the pickle's reason kept)."""
    try:
        yield
    except FvError:
        raise
    except PickleRefused as exc:
        raise _not_dcp(meta, f"the pickle {exc}") from None
    except ValueError as exc:  # this module's own checks of the decoded graph
        raise _not_dcp(meta, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a damaged pickle can raise anything
        raise _not_dcp(meta, " ".join(f"{type(exc).__name__}: {exc}".split())[:200]) from None


def _metadata_state(obj: Any) -> dict:
    """A decoded DCP ``Metadata``'s fields (ValueError when it is not one)."""
    if not isinstance(obj, InertObject) or obj.cls.name != "Metadata":
        name = obj.cls.name if isinstance(obj, InertObject) else type(obj).__name__
        raise ValueError(f"top-level object is {name[:80]}, not a DCP Metadata")
    return dataclass_state(obj)


def _state_table(state: dict) -> dict:
    table = state.get("state_dict_metadata")
    if not isinstance(table, dict) or not all(isinstance(k, str) for k in table):
        raise ValueError("Metadata has no state_dict_metadata mapping of string keys")
    return table


def _storage_needs(table: Any) -> tuple[tuple[str, int], ...]:
    """``storage_data``'s ``_StorageInfo`` items as (relative_path, the furthest byte any item reads)."""
    if not isinstance(table, dict):
        raise ValueError("Metadata has no storage_data mapping")
    needed: dict[str, int] = {}
    for info in table.values():
        state = dataclass_state(info)
        name, offset, length = state.get("relative_path"), state.get("offset"), state.get("length")
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise ValueError(f"a storage item names the file {str(name)[:80]!r}, not a file inside dcp/")
        if not all(type(n) is int and 0 <= n <= INT64_MAX for n in (offset, length)):
            raise ValueError(f"a storage item of {name!r} has no whole offset and length")
        needed[name] = max(needed.get(name, 0), offset + length)
    return tuple(sorted(needed.items()))


def _loader_keys(keys: Iterable[str] | Mapping[str, Any]) -> int:
    return sum(1 for k in keys if k == DATALOADER_KEY or k.startswith(DATALOADER_KEY + "."))


def _identity(meta: str) -> str | None:
    try:
        st = os.lstat(meta)
    except OSError:
        return None
    return identity(meta, st) if stat.S_ISREG(st.st_mode) else None
