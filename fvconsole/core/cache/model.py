"""Immutable records of a weight shard cache scan (what `cache ls` prints and plans consume)."""

from __future__ import annotations

import json
import math
import socket
from dataclasses import dataclass, field
from functools import cached_property
from json.encoder import encode_basestring_ascii as _esc
from typing import Any

from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.host import node_names
from fvconsole.core.shared.process_use import Holder
from fvconsole.core.shared.untrusted import INT64_MAX, INT64_MIN, MAX_EPOCH, Fields

#: What ``json.dumps(obj, sort_keys=True, default=str)`` builds anew for every call (the CLI's JSON).
_SORTED_ENCODER = json.JSONEncoder(sort_keys=True, default=str)
#: The first second a time can be shown as a date (0001-01-01T00:00:00Z): a file time's lower bound.
MIN_EPOCH = -62_135_596_800
#: The largest uid_t: an owner's uid as a node reports it.
MAX_UID = 2**32 - 1


def _count_table(f: Fields, key: str) -> tuple[tuple[str, int], ...]:
    """A ``{name: count}`` object as (name, count) pairs sorted by name, as the scan makes them."""
    table = f.object(key)
    if not all(type(n) is int and 0 <= n <= INT64_MAX for n in table.values()):
        f.fail(key, "must map names to non-negative integers")
    return tuple(sorted(table.items()))


def _indices(f: Fields, key: str) -> tuple[int, ...]:
    """A list of non-negative integers (shard indices), as a tuple; () when absent."""
    values = f.list(key, [])
    if not all(type(n) is int and 0 <= n <= INT64_MAX for n in values):
        f.fail(key, "must be a list of non-negative integers")
    return tuple(values)


@dataclass(frozen=True, slots=True)
class ManifestSummary:
    """A small digest of the manifest's params table for detail panes (not the table itself)."""

    params: int
    numel: int
    dtypes: tuple[tuple[str, int], ...]  # (name, count), sorted by name
    kinds: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, dtypes=dict(self.dtypes), kinds=dict(self.kinds))

    @classmethod
    def from_json(cls, doc: Any, shown: str, what: str) -> ManifestSummary:
        """The digest as :meth:`to_json` wrote it: UntrustedError naming the field."""
        f = Fields(doc, shown, what)
        return cls(f.int("params"), f.int("numel"), _count_table(f, "dtypes"), _count_table(f, "kinds"))


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
    #: Live processes on this node holding one of its files open or mapped (core/shared/process_use.py).
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

    @classmethod
    def from_json(cls, doc: Any, shown: str = "cache ls JSON", what: str = "entry") -> CacheEntry:
        """An entry as :meth:`to_json` wrote it, read back from another node's ``cache ls --json``.

        Untrusted (another fvconsole version, a broken install, a hostile node): every field is
        read by type and range (``core/shared/untrusted.py: Fields``), one UntrustedError naming
        ``shown``, ``what`` and the field. ``key``, ``status`` and ``bytes`` are required (read
        first, so a bad size is named before the rest); a field a node leaves out (an older
        version) or sends as null reads as unknown: None, empty, False. A status is any string:
        a newer node's status is shown as it came, counted, and neither reclaimable nor complete.
        """
        f = Fields(doc, shown, what)
        key, status, size = f.str("key"), f.str("status"), f.int("bytes")
        summary = f.object("summary", None)
        holders = f.list("in_use_by", [])
        return cls(
            key=key, path=f.str("path", ""), bytes=size,
            last_used=f.number("last_used", None, min=MIN_EPOCH, max=MAX_EPOCH),
            num_shards=f.int("num_shards", None), shards_present=_indices(f, "shards_present"), status=status,
            writing=f.bool("writing", False), explanation=f.str("explanation", ""),
            manifest_mtime_ns=f.int("manifest_mtime_ns", None, min=INT64_MIN),
            newest_mtime=f.number("newest_mtime", None, min=MIN_EPOCH, max=MAX_EPOCH),
            shard_files=f.strings("shard_files", ()), tmp_files=f.strings("tmp_files", ()),
            problems=f.strings("problems", ()),
            summary=None if summary is None else ManifestSummary.from_json(summary, shown, f"{what} summary"),
            is_symlink=f.bool("is_symlink", False), symlink_target=f.str("symlink_target", None),
            mounts=f.strings("mounts", ()), disk_bytes=f.int("disk_bytes", None),
            in_use_by=tuple(Holder.from_json(h, shown, f"{what} in_use_by[{i}]") for i, h in enumerate(holders)),
            owner_uid=f.int("owner_uid", None, max=MAX_UID),
        )

    def json_text(self) -> str:
        """``json.dumps(self.to_json(), sort_keys=True)``, byte for byte, written without the dict.

        `cache ls --json` writes 200,000 of these; an entry of the common shape (finite times,
        no holders, plain ints and strings) is formatted field by field (strings through the
        C escaper ``json.dumps`` uses); anything else is encoded from :meth:`to_json`.
        """
        global _FAST_KEYS_CHECKED
        if _FAST_KEYS_CHECKED is None:  # a key added to to_json but not to _entry_text turns the fast path off
            _FAST_KEYS_CHECKED = tuple(sorted(self.to_json())) == _FAST_KEYS
        text = _entry_text(self) if _FAST_KEYS_CHECKED else None
        return _SORTED_ENCODER.encode(self.to_json()) if text is None else text


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

    def envelope(self, entries: list[CacheEntry], *, cap: int | None, cap_error: str | None,
                 with_entries: bool = True) -> dict[str, Any]:
        """``cache ls --json``'s document: the scan, the node, the cap FastVideo's GC applies there
        (``cap_error``: why it is unknown) and ``entries`` in the listing's order (left out with
        ``with_entries=False``, for a caller streaming them)."""
        doc = self.to_json(with_entries=False)
        if with_entries:
            doc["entries"] = [e.to_json() for e in entries]
        doc.update(node_names(), cap_bytes=cap, entry_count=len(entries))
        if cap_error:
            doc["cap_error"] = cap_error
        return doc

    def to_json(self, *, with_entries: bool = True) -> dict[str, Any]:
        """The scan as data; ``with_entries=False`` leaves ``entries`` out (a caller streaming them)."""
        doc = fields_json(self, omit=("entries",), rename={"fs_total": "fs_total_bytes", "fs_free": "fs_free_bytes"},
                          total_bytes=self.total_bytes)
        if with_entries:
            doc["entries"] = [e.to_json() for e in self.entries]
        return doc


#: The keys :func:`_entry_text` writes, in order; checked once against ``CacheEntry.to_json``.
_FAST_KEYS = ("bytes", "disk_bytes", "explanation", "in_use_by", "is_symlink", "key", "last_used", "manifest_mtime_ns",
              "mounts", "newest_mtime", "num_shards", "owner_uid", "path", "problems", "shard_files", "shards_present",
              "status", "summary", "symlink_target", "tmp_files", "writing")
_FAST_KEYS_CHECKED: bool | None = None


def _number(value: Any) -> str | None:
    """A JSON number or null as ``json.dumps`` writes it; None for anything else (NaN, ±inf, a bool, a subclass)."""
    kind = type(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return None


def _strings(values: tuple[Any, ...]) -> str | None:
    if not values:
        return "[]"
    if not all(type(v) is str for v in values):
        return None
    return "[" + ", ".join(map(_esc, values)) + "]"


def _counts(pairs: tuple[Any, ...]) -> str | None:
    """A ``dtypes``/``kinds`` table as a sorted JSON object; None unless its keys are distinct, sorted strings."""
    parts = []
    previous = None
    for pair in pairs:
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not int:
            return None
        if previous is not None and not previous < pair[0]:
            return None
        previous = pair[0]
        parts.append(f"{_esc(pair[0])}: {int.__repr__(pair[1])}")
    return "{" + ", ".join(parts) + "}"


#: Texts of the values entries share (``core/cache/entry._shared``: an explanation, a tuple of shard
#: names, a dtype table), by object identity: the value is kept alongside, so its id cannot be reused.
#: Identity, not equality: ``(0,) == (False,)`` but their JSON differs. One table per way of
#: rendering (the one empty tuple is both a list of names and a dtype table). Bounded like the values.
_TEXTS: dict[Any, dict[int, tuple[Any, str | None]]] = {}
_TEXTS_MAX = 8192


def _memo(value: Any, render: Any) -> str | None:
    """``render(value)``, remembered for this very object (immutable: a str or a tuple of str/int)."""
    table = _TEXTS.get(render)
    if table is None:
        table = _TEXTS[render] = {}
    kept = table.get(id(value))
    if kept is not None and kept[0] is value:
        return kept[1]
    text = render(value)
    if len(table) < _TEXTS_MAX:
        table[id(value)] = (value, text)
    return text


def _esc_str(value: Any) -> str | None:
    return _esc(value) if type(value) is str else None


def _entry_text(e: CacheEntry) -> str | None:
    """The fields of ``CacheEntry.to_json`` in sorted key order, or None when one is not of the common shape."""
    if e.in_use_by or type(e.bytes) is not int or type(e.writing) is not bool or type(e.is_symlink) is not bool:
        return None
    if type(e.key) is not str or type(e.path) is not str or type(e.status) is not str:
        return None
    if not all(type(i) is int for i in e.shards_present):
        return None
    if e.symlink_target is not None and type(e.symlink_target) is not str:
        return None
    explanation = _memo(e.explanation, _esc_str)
    numbers = [_number(v) for v in (e.disk_bytes, e.last_used, e.manifest_mtime_ns, e.newest_mtime, e.num_shards,
                                    e.owner_uid)]
    lists = [_strings(e.mounts), _strings(e.problems), _memo(e.shard_files, _strings), _strings(e.tmp_files)]
    if explanation is None or None in numbers or None in lists:
        return None
    disk, last_used, mtime_ns, newest, num_shards, owner_uid = numbers
    mounts, problems, shard_files, tmp_files = lists
    summary = "null"
    if e.summary is not None:
        sm = e.summary
        dtypes, kinds = _memo(sm.dtypes, _counts), _memo(sm.kinds, _counts)
        if dtypes is None or kinds is None or type(sm.numel) is not int or type(sm.params) is not int:
            return None
        summary = f'{{"dtypes": {dtypes}, "kinds": {kinds}, "numel": {int.__repr__(sm.numel)}, "params": {int.__repr__(sm.params)}}}'
    target = "null" if e.symlink_target is None else _esc(e.symlink_target)
    present = "[" + ", ".join(map(int.__repr__, e.shards_present)) + "]"
    return (f'{{"bytes": {int.__repr__(e.bytes)}, "disk_bytes": {disk}, "explanation": {explanation}, '
            f'"in_use_by": [], "is_symlink": {"true" if e.is_symlink else "false"}, "key": {_esc(e.key)}, '
            f'"last_used": {last_used}, "manifest_mtime_ns": {mtime_ns}, "mounts": {mounts}, '
            f'"newest_mtime": {newest}, "num_shards": {num_shards}, "owner_uid": {owner_uid}, "path": {_esc(e.path)}, '
            f'"problems": {problems}, "shard_files": {shard_files}, "shards_present": {present}, '
            f'"status": {_esc(e.status)}, "summary": {summary}, "symlink_target": {target}, '
            f'"tmp_files": {tmp_files}, "writing": {"true" if e.writing else "false"}}}')
