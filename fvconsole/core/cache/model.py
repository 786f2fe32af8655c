"""Immutable records of a weight shard cache scan (what `cache ls` prints and plans consume)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from fvconsole.core.fields_json import fields_json
from fvconsole.core.process_use import Holder


@dataclass(frozen=True, slots=True)
class ManifestSummary:
    """A small digest of the manifest's params table for detail panes (not the table itself)."""

    params: int
    numel: int
    dtypes: tuple[tuple[str, int], ...]
    kinds: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, dtypes=dict(self.dtypes), kinds=dict(self.kinds))


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One ``<root>/<key>`` directory as found on disk."""

    key: str
    path: str
    bytes: int
    last_used: float | None  # manifest mtime (epoch seconds); None without a valid-looking manifest file
    num_shards: int | None
    shards_present: tuple[int, ...]
    status: str  # one of STATUSES
    writing: bool
    explanation: str
    manifest_mtime_ns: int | None
    newest_mtime: float | None  # newest mtime of the entry dir or any regular file in it
    shard_files: tuple[str, ...] = ()
    tmp_files: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    summary: ManifestSummary | None = None
    is_symlink: bool = False
    symlink_target: str | None = None
    #: Mount points at or inside the entry, relative to it ("." = the entry itself): never evicted.
    mounts: tuple[str, ...] = ()
    #: What removing it gives back to the filesystem (see ``scan.disk_size``); None: unknown.
    disk_bytes: int | None = None
    #: Live processes on this node holding one of its files open or mapped (core/process_use.py).
    in_use_by: tuple[Holder, ...] = ()
    #: Who owns the entry directory on this node (its lstat's uid): a job of that user on the
    #: node may be loading from it (the fleet's "node busy", core/fleet/slurm_state.py).
    owner_uid: int | None = None

    def to_json(self) -> dict[str, Any]:
        # Hand-written: `cache ls --json` encodes 200,000 of these; a dict literal is ~3x faster than fields_json.
        return {
            "key": self.key,
            "path": self.path,
            "bytes": int(self.bytes),
            "last_used": self.last_used,
            "num_shards": self.num_shards,
            "shards_present": list(self.shards_present),
            "status": self.status,
            "writing": self.writing,
            "explanation": self.explanation,
            "manifest_mtime_ns": self.manifest_mtime_ns,
            "newest_mtime": self.newest_mtime,
            "shard_files": list(self.shard_files),
            "tmp_files": list(self.tmp_files),
            "problems": list(self.problems),
            "summary": self.summary.to_json() if self.summary else None,
            "is_symlink": self.is_symlink,
            "symlink_target": self.symlink_target,
            "mounts": list(self.mounts),
            "disk_bytes": self.disk_bytes,
            "in_use_by": [h.to_json() for h in self.in_use_by],
            "owner_uid": self.owner_uid,
        }


@dataclass(frozen=True, slots=True)
class Leftover:
    """A ``.evicting-<key>-<pid>`` directory left behind by an eviction that did not finish."""

    name: str
    path: str
    key: str
    pid: int
    bytes: int
    mtime: float
    mounts: tuple[str, ...] = ()  # as CacheEntry.mounts: such a leftover is never removed
    disk_bytes: int | None = None  # as CacheEntry.disk_bytes

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class CacheScan:
    """Everything ``cache ls`` shows; the input of ``plan_eviction``."""

    root: str
    real_root: str
    entries: tuple[CacheEntry, ...]
    foreign: tuple[str, ...]
    leftovers: tuple[Leftover, ...]
    errors: tuple[str, ...]
    fs_total: int | None
    fs_free: int | None
    scanned_at: float
    grace_seconds: float
    hostname: str = field(default_factory=socket.gethostname)
    #: Scan-level warnings (a partial process check); per-entry trouble is in ``errors``.
    warnings: tuple[str, ...] = ()
    #: Foreign children FastVideo's own GC counts as entries (directories, also through a
    #: symlink) and may delete: fvconsole never touches them, FastVideo's ``_gc_cache_root`` may.
    foreign_gc_counted: tuple[str, ...] = ()
    #: Who owns the root directory on this node (the cache's owner when an entry's is unknown).
    root_uid: int | None = None

    @property
    def total_bytes(self) -> int:
        return sum(e.bytes for e in self.entries)

    @cached_property
    def _by_key(self) -> dict[str, CacheEntry]:
        return {e.key: e for e in self.entries}

    def get(self, key: str) -> CacheEntry | None:
        """The entry named ``key`` (O(1): plans look up thousands of keys)."""
        return self._by_key.get(key)

    def to_json(self, *, with_entries: bool = True) -> dict[str, Any]:
        """The scan as data; ``with_entries=False`` leaves ``entries`` out (a caller streaming them)."""
        doc = fields_json(self, omit=("entries",), rename={"fs_total": "fs_total_bytes", "fs_free": "fs_free_bytes"},
                          total_bytes=self.total_bytes)
        if with_entries:
            doc["entries"] = [e.to_json() for e in self.entries]
        return doc
