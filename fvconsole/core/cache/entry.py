"""Classify one cache entry from its directory listing (docs/formats.md §6 usability rules).

Reads only manifest.json and each shard's safetensors header (bounded), nothing else.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

from fvconsole.core.cache.files import CacheFileError, Opened, read_manifest, read_safetensors_header
from fvconsole.core.cache.model import CacheEntry, ManifestSummary
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.safe_read import short_repr
from fvconsole.core.shared.untrusted import element_count, int64_dims

FORMAT_VERSION = 1
SHARD_RE = re.compile(r"shard(\d+)-of-(\d+)\.safetensors")
STATUSES = ("complete", "partial", "incomplete", "empty", "invalid")

EMPTY_EXPLANATION = (
    "empty entry directory: FastVideo creates it before checking free space, so a write it skipped "
    "(less free than the write plus its 5 GiB margin) leaves it empty; FastVideo's GC counts it "
    "first (no manifest.json) but frees nothing by it"
)

PER_NODE_NOTE = (
    "on a multi-node run with a per-node cache (FASTVIDEO_WEIGHT_SHARD_CACHE_PER_NODE=1) only "
    "global rank 0's node writes manifest.json, so this node never gets a cache hit"
)


#: Equal values many entries repeat (shard names, "all 4 shards present", dtype tables), kept once:
#: a listing of 200,000 entries then holds each only once (bounded: past the cap, values are kept as they are).
_SHARED: dict[Any, Any] = {}
_SHARED_MAX = 8192


def _shared(value: Any) -> Any:
    """``value``, or the equal one already kept (hashable values only)."""
    kept = _SHARED.get(value)
    if kept is not None:
        return kept
    if len(_SHARED) < _SHARED_MAX:
        _SHARED[value] = value
    return value


class _Files:
    """The entry's files sorted by role (mutable scratch, local to one classification)."""

    __slots__ = ("size", "disk", "newest", "manifest", "manifest_problem", "shards", "tmp", "notes")

    def __init__(self, newest: float | None) -> None:
        self.size = 0
        self.disk = 0
        self.newest = newest
        self.manifest: os.stat_result | None = None
        self.manifest_problem: str | None = None
        self.shards: list[tuple[int, int, str]] = []
        self.tmp: list[tuple[str, float]] = []
        self.notes: list[str] = []


def _sort_files(listing: list[tuple[str, os.stat_result]], dir_mtime: float) -> _Files:
    files = _Files(dir_mtime)
    size = disk = 0
    newest = dir_mtime
    for name, st in listing:
        mode = st.st_mode & 0o170000
        regular = mode == stat.S_IFREG
        if regular:
            size += st.st_size
            disk += st.st_blocks * 512 if st.st_nlink == 1 else 0  # as scan.disk_size
            mtime = st.st_mtime
            newest = max(newest or mtime, mtime)
        elif mode == stat.S_IFLNK:
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
    files.size, files.disk, files.newest = size, disk, newest
    return files


def classify_entry(key: str, path: str, listing: list[tuple[str, os.stat_result]], dir_mtime: float,
                   now: float, grace: float, check_headers: bool = True, owner_uid: int | None = None, *,
                   dir_fd: int | None = None, opened: dict[str, Opened] | None = None) -> CacheEntry:
    """Turn one entry's listing into a CacheEntry with a status and a human explanation.

    ``dir_fd``: the entry directory as listed, open; its files are read relative to it.
    ``opened``: files the listing already opened (``files.list_fd_opening``), read through
    their fds; the caller closes them.
    """
    opened = {} if opened is None else opened
    files = _sort_files(listing, dir_mtime)
    manifest, error = _load_manifest(path, key, files, dir_fd, opened.get("manifest.json"))
    num_shards = manifest["num_shards"] if manifest else _inferred_num_shards(files.shards)
    present, shard_files = _present_shards(files.shards, num_shards, files.notes)
    if error is None and check_headers:
        error = _first_bad_header(path, shard_files, dir_fd, opened)
    writing_age = _writing_age(files.tmp, now, grace)
    status, explanation = _status(files, manifest, error, num_shards, present, writing_age)
    if not listing:
        status, explanation = "empty", EMPTY_EXPLANATION
    return CacheEntry(
        key=key, path=path, bytes=files.size,
        last_used=files.manifest.st_mtime if files.manifest else None,
        num_shards=num_shards, shards_present=present, status=status,
        writing=writing_age is not None, explanation=explanation,
        manifest_mtime_ns=files.manifest.st_mtime_ns if files.manifest else None,
        newest_mtime=files.newest, shard_files=shard_files,
        tmp_files=tuple(sorted(name for name, _ in files.tmp)),
        problems=tuple(files.notes), summary=_summary(manifest), disk_bytes=files.disk, owner_uid=owner_uid,
    )


def _load_manifest(path: str, key: str, files: _Files, dir_fd: int | None = None,
                   opened: Opened | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(valid manifest, None) or (None, what is wrong); (None, None) when there is none."""
    if files.manifest_problem:
        return None, files.manifest_problem
    if files.manifest is None:
        return None, None
    try:
        data = (read_manifest(f"{path}/manifest.json") if dir_fd is None and opened is None
                else read_manifest("manifest.json", dir_fd=dir_fd, opened=opened))
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
            notes.append(f"stray shard file {name} (not one of {plural(num_shards, 'shard')})")
    order = sorted(present)
    return _shared(tuple(order)), _shared(tuple(_shared(present[i]) for i in order))


def _first_bad_header(path: str, shard_files: tuple[str, ...], dir_fd: int | None = None,
                      opened: dict[str, Opened] | None = None) -> str | None:
    for name in shard_files:
        try:
            file = opened.get(name) if opened else None
            if dir_fd is None and file is None:
                read_safetensors_header(f"{path}/{name}")
            else:
                read_safetensors_header(name, dir_fd=dir_fd, opened=file)
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
        return "complete", _shared(f"all {plural(num_shards, 'shard')} present")
    return "partial", (
        f"{len(present)} of {num_shards} shards present ({compact_indices(present)}): normal for a "
        "node-local cache on a multi-node run, where each node holds only its own shards"
    )


def _incomplete_explanation(shard_count: int, writing_age: float | None) -> str:
    if writing_age is not None:
        return f"no manifest.json yet and a .tmp file was modified {int(writing_age)}s ago: a write in progress"
    if shard_count:
        return (f"{plural(shard_count, 'shard file')} but no manifest.json: a write in progress or a crashed one; "
                + PER_NODE_NOTE)
    return "no manifest.json and no shards: a write that crashed before finishing (or never started)"


def _word(value: Any) -> str:
    """A manifest field counted by its value: a string as it is, anything else as its bounded repr."""
    return value if type(value) is str else short_repr(value)


def _summary(manifest: dict[str, Any] | None) -> ManifestSummary | None:
    if manifest is None:
        return None
    dtypes: dict[str, int] = {}
    kinds: dict[str, int] = {}
    numel = 0
    for info in manifest["params"].values():
        if not isinstance(info, dict):
            continue
        dtype, kind = _word(info.get("dtype")), _word(info.get("kind"))
        dtypes[dtype] = dtypes.get(dtype, 0) + 1
        kinds[kind] = kinds.get(kind, 0) + 1
        numel += _numel(info.get("global_shape"))
    return ManifestSummary(params=len(manifest["params"]), numel=numel,
                           dtypes=_shared(tuple(sorted(dtypes.items()))), kinds=_shared(tuple(sorted(kinds.items()))))


def _numel(shape: Any) -> int:
    """Elements of a ``global_shape``; 0 unless every dim and the product fit in 64 bits.

    A shape of ``[10**300] * 20`` made a 6000-digit count that ``str`` and ``json.dumps`` refuse.
    """
    dims = int64_dims(shape) if type(shape) is list else None
    count = element_count(dims) if dims is not None else None
    return count or 0
