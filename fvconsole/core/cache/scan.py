"""Scan a weight shard cache root into immutable records (FORMATS.md §6).

Cost per entry: one ``scandir`` of the entry (one lstat per file, dirs opened O_NOATIME), one
manifest read and one bounded header read per shard. Nothing is followed through a
symlink, no shard data is read, and no mtime/atime the cache relies on is changed.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from fvconsole.core.cache.files import CacheFileError, list_dir, read_manifest, read_safetensors_header
from fvconsole.core.errors import FvError

FORMAT_VERSION = 1
DEFAULT_GRACE_SECONDS = 600.0
KEY_RE = re.compile(r"[0-9a-f]{16}")
SHARD_RE = re.compile(r"shard(\d+)-of-(\d+)\.safetensors")
LEFTOVER_PREFIX = ".evicting-"
LEFTOVER_RE = re.compile(r"\.evicting-([0-9a-f]{16})-(\d+)")
STATUSES = ("complete", "partial", "incomplete", "invalid")

PER_NODE_NOTE = (
    "on a multi-node run with a per-node cache (FASTVIDEO_WEIGHT_SHARD_CACHE_PER_NODE=1) only "
    "global rank 0's node writes manifest.json, so this node never gets a cache hit"
)


@dataclass(frozen=True)
class ManifestSummary:
    """A small digest of the manifest's params table for detail panes (not the table itself)."""

    params: int
    numel: int
    dtypes: tuple[tuple[str, int], ...]
    kinds: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {"params": self.params, "numel": self.numel, "dtypes": dict(self.dtypes), "kinds": dict(self.kinds)}


@dataclass(frozen=True)
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

    def to_json(self) -> dict[str, Any]:
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
        }


@dataclass(frozen=True)
class Leftover:
    """A ``.evicting-<key>-<pid>`` directory left behind by an eviction that did not finish."""

    name: str
    path: str
    key: str
    pid: int
    bytes: int
    mtime: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "key": self.key, "pid": self.pid,
                "bytes": self.bytes, "mtime": self.mtime}


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

    @property
    def total_bytes(self) -> int:
        return sum(e.bytes for e in self.entries)

    def get(self, key: str) -> CacheEntry | None:
        return next((e for e in self.entries if e.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "real_root": self.real_root,
            "total_bytes": self.total_bytes,
            "entries": [e.to_json() for e in self.entries],
            "foreign": list(self.foreign),
            "leftovers": [x.to_json() for x in self.leftovers],
            "errors": list(self.errors),
            "fs_total_bytes": self.fs_total,
            "fs_free_bytes": self.fs_free,
            "scanned_at": self.scanned_at,
            "grace_seconds": self.grace_seconds,
            "hostname": self.hostname,
        }


class Child(NamedTuple):
    """A child of the root as listed: its name, full path and lstat."""

    name: str
    path: str
    st: os.stat_result


def scan_cache(root: str | os.PathLike[str], grace_seconds: float = DEFAULT_GRACE_SECONDS, *,
               now: float | None = None, check_headers: bool = True) -> CacheScan:
    """Classify every child of ``root``; per-entry trouble is reported, never raised.

    Raises FvError only when the root itself is missing, not a directory or unlistable.
    """
    root_path = os.path.abspath(os.path.expanduser(os.fspath(root)))
    _require_directory(root_path)
    now = time.time() if now is None else now
    entries: list[CacheEntry] = []
    foreign: list[str] = []
    leftovers: list[Leftover] = []
    errors: list[str] = []
    try:
        # The root may itself be a symlink the user chose; open its real path.
        listing = list_dir(os.path.realpath(root_path))
    except OSError as exc:
        raise FvError(f"{root_path}: cannot list cache root ({exc.strerror})") from None
    for name, st in listing:
        child = Child(name, os.path.join(root_path, name), st)
        kind = classify_child(name, st)
        if kind == "entry":
            entry = scan_entry(child, now, grace_seconds, check_headers, errors)
            if entry is not None:
                entries.append(entry)
        elif kind == "leftover":
            leftover = _scan_leftover(child, errors)
            if leftover is not None:
                leftovers.append(leftover)
        else:
            foreign.append(name)
    fs_total, fs_free = _fs_space(root_path)
    return CacheScan(
        root=root_path,
        real_root=os.path.realpath(root_path),
        entries=tuple(sorted(entries, key=lambda e: e.key)),
        foreign=tuple(sorted(foreign)),
        leftovers=tuple(sorted(leftovers, key=lambda x: x.name)),
        errors=tuple(errors),
        fs_total=fs_total,
        fs_free=fs_free,
        scanned_at=now,
        grace_seconds=float(grace_seconds),
    )


def _require_directory(root_path: str) -> None:
    try:
        st = os.stat(root_path)
    except FileNotFoundError:
        raise FvError(f"{root_path}: cache root does not exist") from None
    except OSError as exc:
        raise FvError(f"{root_path}: cannot stat cache root ({exc.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise FvError(f"{root_path}: cache root is not a directory")


def classify_child(name: str, st: os.stat_result) -> str:
    """'entry' (16 lowercase hex: a directory or a symlink), 'leftover' or 'foreign'."""
    is_dir, is_link = stat.S_ISDIR(st.st_mode), stat.S_ISLNK(st.st_mode)
    if KEY_RE.fullmatch(name) and (is_dir or is_link):
        return "entry"
    if LEFTOVER_RE.fullmatch(name) and is_dir:
        return "leftover"
    return "foreign"


def _fs_space(path: str) -> tuple[int | None, int | None]:
    try:
        st = os.statvfs(path)
    except OSError:
        return None, None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def fs_free_bytes(path: str) -> int | None:
    """Free bytes for unprivileged users on the filesystem holding ``path``."""
    return _fs_space(path)[1]


def scan_entry(child: Child, now: float, grace: float, check_headers: bool,
               errors: list[str]) -> CacheEntry | None:
    """One entry; None (with a note in ``errors``) when it vanished while we looked."""
    if stat.S_ISLNK(child.st.st_mode):
        return _symlink_entry(child)
    try:
        listing = list_dir(child.path)
    except FileNotFoundError:
        errors.append(f"{child.path}: vanished during the scan")
        return None
    except OSError as exc:
        return _unreadable_entry(child, exc)
    return classify_entry(child.name, child.path, listing, child.st.st_mtime, now, grace, check_headers)


#: (name, lstat) of every child of an entry directory: one scandir, one lstat each.
list_entry_files = list_dir


def entry_size(listing: list[tuple[str, os.stat_result]]) -> int:
    """Bytes of the regular files directly inside (the cache's own size measure)."""
    return sum(st.st_size for _, st in listing if stat.S_ISREG(st.st_mode))


def manifest_mtime_ns(listing: list[tuple[str, os.stat_result]]) -> int | None:
    """mtime_ns of a regular manifest.json in the listing (None when absent)."""
    for name, st in listing:
        if name == "manifest.json" and stat.S_ISREG(st.st_mode):
            return st.st_mtime_ns
    return None


def _symlink_entry(child: Child) -> CacheEntry:
    try:
        target = os.readlink(child.path)
    except OSError:
        target = "?"
    return CacheEntry(
        key=child.name, path=child.path, bytes=0, last_used=None, num_shards=None, shards_present=(),
        status="invalid", writing=False,
        explanation=f"entry is a symlink to {target}; not followed (evicting it removes only the link)",
        manifest_mtime_ns=None, newest_mtime=None, is_symlink=True, symlink_target=target,
    )


def _unreadable_entry(child: Child, exc: OSError) -> CacheEntry:
    return CacheEntry(
        key=child.name, path=child.path, bytes=0, last_used=None, num_shards=None, shards_present=(),
        status="invalid", writing=False, explanation=f"unreadable entry directory: {exc.strerror}",
        manifest_mtime_ns=None, newest_mtime=child.st.st_mtime, problems=(f"{child.path}: {exc.strerror}",),
    )


def _scan_leftover(child: Child, errors: list[str]) -> Leftover | None:
    match = LEFTOVER_RE.fullmatch(child.name)
    assert match is not None
    try:
        size = entry_size(list_dir(child.path))
    except FileNotFoundError:
        return None  # finished by its evictor while we looked
    except OSError as exc:
        errors.append(f"{child.path}: {exc.strerror}")
        size = 0
    return Leftover(name=child.name, path=child.path, key=match.group(1), pid=int(match.group(2)),
                    bytes=size, mtime=child.st.st_mtime)


@dataclass
class _Files:
    """The entry's files sorted by role (mutable scratch, local to one classification)."""

    size: int = 0
    newest: float | None = None
    manifest: os.stat_result | None = None
    manifest_problem: str | None = None
    shards: list[tuple[int, int, str]] = field(default_factory=list)
    tmp: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _sort_files(listing: list[tuple[str, os.stat_result]], dir_mtime: float) -> _Files:
    files = _Files(newest=dir_mtime)
    for name, st in listing:
        regular = stat.S_ISREG(st.st_mode)
        if regular:
            files.size += st.st_size
            files.newest = max(files.newest or st.st_mtime, st.st_mtime)
        elif stat.S_ISLNK(st.st_mode):
            files.notes.append(f"{name} is a symlink (not followed, not counted)")
        if name == "manifest.json":
            if regular:
                files.manifest = st
            else:
                files.manifest_problem = "manifest.json is not a regular file"
            continue
        if not regular:
            continue
        match = SHARD_RE.fullmatch(name)
        if match:
            files.shards.append((int(match.group(1)), int(match.group(2)), name))
        elif name.endswith(".tmp"):
            files.tmp.append((name, st.st_mtime))
    return files


def classify_entry(key: str, path: str, listing: list[tuple[str, os.stat_result]], dir_mtime: float,
                   now: float, grace: float, check_headers: bool = True) -> CacheEntry:
    """Turn one entry's listing into a CacheEntry with a status and a human explanation."""
    files = _sort_files(listing, dir_mtime)
    manifest, error = _load_manifest(path, key, files)
    num_shards = manifest["num_shards"] if manifest else _inferred_num_shards(files.shards)
    present, shard_files = _present_shards(files.shards, num_shards, files.notes)
    if error is None and check_headers:
        error = _first_bad_header(path, shard_files)
    writing_age = _writing_age(files.tmp, now, grace)
    status, explanation = _status(files, manifest, error, num_shards, present, writing_age)
    return CacheEntry(
        key=key, path=path, bytes=files.size,
        last_used=files.manifest.st_mtime if files.manifest else None,
        num_shards=num_shards, shards_present=present, status=status,
        writing=writing_age is not None, explanation=explanation,
        manifest_mtime_ns=files.manifest.st_mtime_ns if files.manifest else None,
        newest_mtime=files.newest, shard_files=shard_files,
        tmp_files=tuple(sorted(name for name, _ in files.tmp)),
        problems=tuple(files.notes), summary=_summary(manifest),
    )


def _load_manifest(path: str, key: str, files: _Files) -> tuple[dict[str, Any] | None, str | None]:
    """(valid manifest, None) or (None, what is wrong); (None, None) when there is none."""
    if files.manifest_problem:
        return None, files.manifest_problem
    if files.manifest is None:
        return None, None
    try:
        data = read_manifest(os.path.join(path, "manifest.json"))
    except CacheFileError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"manifest.json unreadable ({exc.strerror})"
    return _validate_manifest(data, key)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_manifest(data: dict[str, Any], key: str) -> tuple[dict[str, Any] | None, str | None]:
    version = data.get("format_version")
    if not _is_int(version) or version != FORMAT_VERSION:
        return None, f"manifest.json: field 'format_version' is {version!r}, expected {FORMAT_VERSION}"
    if data.get("key") != key:
        return None, f"manifest.json: field 'key' is {data.get('key')!r}, but the directory is {key!r}"
    shards = data.get("num_shards")
    if not _is_int(shards) or shards < 1:
        return None, f"manifest.json: field 'num_shards' is {shards!r}, expected a positive integer"
    if not isinstance(data.get("params"), dict):
        return None, "manifest.json: field 'params' is missing or not an object"
    return data, None


def _inferred_num_shards(shards: list[tuple[int, int, str]]) -> int | None:
    counts = {n for _, n, _ in shards}
    return counts.pop() if len(counts) == 1 else None


def _present_shards(shards: list[tuple[int, int, str]], num_shards: int | None,
                    notes: list[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    present: dict[int, str] = {}
    for index, n, name in shards:
        if num_shards is not None and n == num_shards and 0 <= index < n:
            present[index] = name
        else:
            notes.append(f"stray shard file {name} (not one of {num_shards} shards)")
    order = sorted(present)
    return tuple(order), tuple(present[i] for i in order)


def _first_bad_header(path: str, shard_files: tuple[str, ...]) -> str | None:
    for name in shard_files:
        try:
            read_safetensors_header(os.path.join(path, name))
        except CacheFileError as exc:
            return f"{name}: {exc}"
        except FileNotFoundError:
            continue  # removed since the listing; it no longer counts either way
        except OSError as exc:
            return f"{name}: unreadable ({exc.strerror})"
    return None


def _writing_age(tmp: list[tuple[str, float]], now: float, grace: float) -> float | None:
    """Age of the newest .tmp file when it is younger than the grace period."""
    if not tmp:
        return None
    age = now - max(mtime for _, mtime in tmp)
    return max(age, 0.0) if age < grace else None


def compact_indices(indices: tuple[int, ...]) -> str:
    """``0-3,6,8-9``: readable even for thousands of shards."""
    runs: list[str] = []
    start = prev = None
    for i in indices:
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = i
    if start is not None:
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(runs) or "none"


def _status(files: _Files, manifest: dict[str, Any] | None, error: str | None, num_shards: int | None,
            present: tuple[int, ...], writing_age: float | None) -> tuple[str, str]:
    if error is not None:
        return "invalid", error
    if manifest is None:
        return "incomplete", _incomplete_explanation(len(files.shards), writing_age)
    if len(present) == num_shards:
        return "complete", f"all {num_shards} shards present"
    return "partial", (
        f"{len(present)} of {num_shards} shards present ({compact_indices(present)}): normal for a "
        "node-local cache on a multi-node run, where each node holds only its own shards"
    )


def _incomplete_explanation(shard_count: int, writing_age: float | None) -> str:
    if writing_age is not None:
        return f"no manifest.json yet and a .tmp file was modified {int(writing_age)}s ago: a write in progress"
    if shard_count:
        return (f"{shard_count} shard file(s) but no manifest.json: a write in progress or a crashed one; "
                + PER_NODE_NOTE)
    return "no manifest.json and no shards: a write that crashed before finishing (or never started)"


def _summary(manifest: dict[str, Any] | None) -> ManifestSummary | None:
    if manifest is None:
        return None
    dtypes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    numel = 0
    for info in manifest["params"].values():
        if not isinstance(info, dict):
            continue
        dtypes[str(info.get("dtype"))] += 1
        kinds[str(info.get("kind"))] += 1
        numel += _numel(info.get("global_shape"))
    return ManifestSummary(params=len(manifest["params"]), numel=numel,
                           dtypes=tuple(sorted(dtypes.items())), kinds=tuple(sorted(kinds.items())))


def _numel(shape: Any) -> int:
    if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
        return 0
    total = 1
    for d in shape:
        total *= d
    return total
