"""The storage files a checkpoint's ``dcp/.metadata`` references, and whether each is there and long enough.

``dcp.load`` reads every item of the state dict from ``storage_data``: a ``_StorageInfo``
(``relative_path``, ``offset``, ``length``) per ``MetadataIndex``. A ``.distcp`` shard that is
missing, not a regular file, or shorter than the furthest byte any item reads (a save cut off
when the quota filled) fails the load on the ranks that read it, after the allocation started.
The metadata comes from the one reader (``core/checkpoints/dcp_metadata.py``); the storage files
are only ``stat``ed, never opened.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from fvconsole.core.checkpoints.dcp_metadata import read_dcp_metadata


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
    meta = read_dcp_metadata(checkpoint_dir)
    dcp_dir = os.path.dirname(meta.path)
    files = tuple(StorageFile(name, need, _on_disk(dcp_dir, name, need)) for name, need in meta.needed_storage())
    return DcpStorage(meta.keys, files)
