"""The storage files a checkpoint's ``dcp/.metadata`` references, and whether each is there and long enough.

``dcp.load`` reads every item of the state dict from ``storage_data``: a ``_StorageInfo``
(``relative_path``, ``offset``, ``length``) per ``MetadataIndex``. A ``.distcp`` shard that is
missing, not a regular file, or shorter than the furthest byte any item reads (a save cut off
when the quota filled) fails the load on the ranks that read it, after the allocation started.
The pickle is read inertly under the listing's caps (``core.checkpoints.listing``); the files
are only ``stat``ed, never opened.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

from fvconsole.core.checkpoints.dcp_keys import DCP_LIMITS, MAX_DCP_METADATA_BYTES, _dcp_errors, _dcp_global
from fvconsole.core.checkpoints.tensors import _state_dict
from fvconsole.core.formats.inert_pickle import InertObject
from fvconsole.core.formats.inert_pickle import load as load_pickle
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.safe_read import read_regular_file
from fvconsole.core.shared.untrusted import INT64_MAX


@dataclass(frozen=True)
class StorageFile:
    """One storage file: its name inside ``dcp/``, the bytes items read from it, and what is on disk."""

    name: str
    needed_bytes: int
    #: None: fine; else why ``dcp.load`` cannot read it (missing, not a regular file, too short).
    problem: str | None = None


@dataclass(frozen=True)
class DcpStorage:
    """The state keys and the storage files of one ``dcp/.metadata``."""

    keys: tuple[str, ...]
    files: tuple[StorageFile, ...]

    @property
    def problems(self) -> tuple[StorageFile, ...]:
        return tuple(f for f in self.files if f.problem is not None)


def _needed(table: Any) -> dict[str, int]:
    """relative_path → the furthest byte (offset + length) any item reads from it."""
    if not isinstance(table, dict):
        raise ValueError("Metadata has no storage_data mapping")
    needed: dict[str, int] = {}
    for info in table.values():
        state = _state_dict(info) if isinstance(info, InertObject) else {}
        name, offset, length = state.get("relative_path"), state.get("offset"), state.get("length")
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise ValueError(f"a storage item names the file {str(name)[:80]!r}, not a file inside dcp/")
        if not all(type(n) is int and 0 <= n <= INT64_MAX for n in (offset, length)):
            raise ValueError(f"a storage item of {name!r} has no whole offset and length")
        needed[name] = max(needed.get(name, 0), offset + length)
    return needed


def _on_disk(dcp_dir: str, name: str, need: int) -> str | None:
    try:
        st = os.stat(os.path.join(dcp_dir, name))  # dcp.load opens it by path: symlinks followed
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size < need:
        return f"{st.st_size} bytes, shorter than the {need} its items read (truncated)"
    return None


def dcp_storage(checkpoint_dir: str | os.PathLike[str]) -> DcpStorage:
    """Keys and storage files of ``<checkpoint_dir>/dcp/.metadata``; FvError naming the file when unreadable."""
    dcp_dir = os.path.join(os.fspath(checkpoint_dir), "dcp")
    meta = os.path.join(dcp_dir, ".metadata")
    with _dcp_errors(meta):
        try:
            data = read_regular_file(meta, "DCP metadata", MAX_DCP_METADATA_BYTES)
        except FileNotFoundError:
            raise FvError(f"{meta}: missing (an interrupted save: dcp.save writes it last)") from None
        except OSError as exc:
            raise FvError(f"{meta}: cannot read DCP metadata ({exc.strerror or exc})") from None
        obj = load_pickle(data, _dcp_global, DCP_LIMITS)
        if not isinstance(obj, InertObject) or obj.cls.name != "Metadata":
            raise ValueError("top-level object is not a DCP Metadata")
        state = _state_dict(obj)
        table = state.get("state_dict_metadata")
        if not isinstance(table, dict) or not all(isinstance(k, str) for k in table):
            raise ValueError("Metadata has no state_dict_metadata mapping of string keys")
        needed = _needed(state.get("storage_data"))
    files = tuple(StorageFile(name, need, _on_disk(dcp_dir, name, need)) for name, need in sorted(needed.items()))
    return DcpStorage(tuple(sorted(table)), files)
