"""Scan a weight shard cache root into immutable records (docs/formats.md §6).

Cost per entry: one ``scandir`` of the entry (dirs opened O_NOATIME; one lstat per file, but
the manifest and shards, which are read anyway, are opened as listed and fstat'ed instead),
one manifest read and one bounded header read per shard (a single pread when it is small). Nothing is followed through a
symlink, no shard data is read, and no mtime/atime the cache relies on is changed.
Entries are flat: only what is directly inside counts, a subdirectory is foreign content
that is noted but never walked (so any depth of tree scans in one listing). Mount points
inside an entry come from one read of /proc/self/mountinfo per scan.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import time
from typing import NamedTuple

from fvconsole.core.cache.entry import SHARD_RE, STATUSES, classify_entry, compact_indices
from fvconsole.core.cache.files import close_opened, iter_fd, list_dir, list_fd_opening
from fvconsole.core.cache.model import CacheEntry, CacheScan, Leftover, ManifestSummary
from fvconsole.core.cache.roots import EVICTOR
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.mounts import mount_points, mounts_by_child
from fvconsole.core.shared.process_use import ProcessUse, scan_processes
from fvconsole.core.shared.safe_read import open_input

DEFAULT_GRACE_SECONDS = 600.0
KEY_RE = re.compile(r"[0-9a-f]{16}")
LEFTOVER_PREFIX = ".evicting-"
LEFTOVER_RE = re.compile(r"\.evicting-([0-9a-f]{16})-(\d+)")

__all__ = [
    "DEFAULT_GRACE_SECONDS", "KEY_RE", "LEFTOVER_PREFIX", "LEFTOVER_RE", "STATUSES",
    "CacheEntry", "CacheScan", "Child", "Leftover", "ManifestSummary",
    "classify_child", "compact_indices", "counted_by_fastvideo_gc", "disk_size", "entry_holders", "entry_size", "fs_free_bytes",
    "manifest_mtime_ns", "mounts_inside", "scan_cache", "scan_entry",
]


class Child(NamedTuple):
    """A child of the root as listed: its name, full path and lstat."""

    name: str
    path: str
    st: os.stat_result


def scan_cache(root: str | os.PathLike[str], grace_seconds: float = DEFAULT_GRACE_SECONDS, *,
               now: float | None = None, check_headers: bool = True,
               processes: ProcessUse | None = None) -> CacheScan:
    """Classify every child of ``root``; per-entry trouble is reported, never raised.

    ``processes``: who holds which file open or mapped (one pass over /proc, made here
    when not given). Raises FvError only when the root itself is missing, not a directory
    or unlistable.
    """
    root_path = os.path.abspath(os.path.expanduser(os.fspath(root)))
    root_st = _require_directory(root_path)
    real_root = os.path.realpath(root_path)
    now = time.time() if now is None else now
    entries: list[CacheEntry] = []
    foreign: list[str] = []
    gc_counted: list[str] = []
    leftovers: list[Leftover] = []
    errors: list[str] = []
    try:
        # The root may itself be a symlink the user chose; open its real path.
        root_fd = open_input(real_root, directory=True)
    except OSError as exc:
        raise FvError(f"{root_path}: cannot list cache root ({exc.strerror})") from None
    try:
        mounts = mounts_by_child(mount_points() or (), real_root)
        use = (scan_processes() if processes is None else processes).under(real_root)
        _scan_children(root_fd, root_path, real_root, root_st, now, grace_seconds, check_headers, mounts, use,
                       entries, leftovers, foreign, gc_counted, errors)
    finally:
        os.close(root_fd)
    fs_total, fs_free = _fs_space(root_path)
    return CacheScan(
        root=root_path,
        real_root=real_root,
        entries=tuple(sorted(entries, key=lambda e: e.key)),
        foreign=tuple(sorted(foreign)),
        leftovers=tuple(sorted(leftovers, key=lambda x: x.name)),
        errors=tuple(errors),
        fs_total=fs_total,
        fs_free=fs_free,
        scanned_at=now,
        grace_seconds=float(grace_seconds),
        warnings=(use.partial,) if use.partial else (),
        foreign_gc_counted=tuple(sorted(gc_counted)),
        root_uid=root_st.st_uid,
    )


def _scan_children(root_fd: int, root_path: str, real_root: str, root_st: os.stat_result, now: float,
                   grace_seconds: float, check_headers: bool, mounts: dict[str, tuple[str, ...]], use: ProcessUse,
                   entries: list[CacheEntry], leftovers: list[Leftover], foreign: list[str],
                   gc_counted: list[str], errors: list[str]) -> None:
    """Every child of the root open as ``root_fd``, read as listed (a large root is never one list)."""
    root_dev = root_st.st_dev
    try:
        for name, st in iter_fd(root_fd):
            child = Child(name, _join(root_path, name), st)
            kind = classify_child(name, st)
            if kind == "entry":
                entry = scan_entry(child, now, grace_seconds, check_headers, errors,
                                   mounts=mounts.get(name, ()), root_dev=root_dev, processes=use,
                                   real_path=_join(real_root, name), parent_fd=root_fd)
                if entry is not None:
                    entries.append(entry)
            elif kind == "leftover":
                leftover = _scan_leftover(child, errors, mounts.get(name, ()), root_dev)
                if leftover is not None:
                    leftovers.append(leftover)
            elif kind == "foreign":
                foreign.append(name)
                if counted_by_fastvideo_gc(child):
                    gc_counted.append(name)
    except OSError as exc:  # the root's getdents failing part-way: what was read stands
        errors.append(f"{root_path}: listing the root stopped part-way ({exc.strerror}); "
                      "entries after that are missing")


def _join(directory: str, name: str) -> str:
    """``os.path.join`` for a name without a slash (the scan's hot path: 200,000 entries)."""
    return f"{directory}/{name}" if directory != "/" else f"/{name}"


def _require_directory(root_path: str) -> os.stat_result:
    try:
        st = os.stat(root_path)
    except FileNotFoundError:
        raise FvError(f"{root_path}: cache root does not exist") from None
    except OSError as exc:
        raise FvError(f"{root_path}: cannot stat cache root ({exc.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise FvError(f"{root_path}: cache root is not a directory")
    return st


def classify_child(name: str, st: os.stat_result) -> str:
    """'entry' (16 lowercase hex: a directory or a symlink), 'leftover', 'lock' (the evictor's lock file) or 'foreign'."""
    is_dir, is_link = stat.S_ISDIR(st.st_mode), stat.S_ISLNK(st.st_mode)
    if KEY_RE.fullmatch(name) and (is_dir or is_link):
        return "entry"
    if LEFTOVER_RE.fullmatch(name) and is_dir:
        return "leftover"
    if name == EVICTOR.lock_name and stat.S_ISREG(st.st_mode):
        return "lock"
    return "foreign"


def counted_by_fastvideo_gc(child: Child) -> bool:
    """Whether FastVideo's ``_gc_cache_root`` takes this child for an entry: ``Path.is_dir()``,
    which follows a symlink (docs/formats.md §6). A symlink's target is only stat'ed, never opened."""
    if stat.S_ISDIR(child.st.st_mode):
        return True
    if not stat.S_ISLNK(child.st.st_mode):
        return False
    try:
        return stat.S_ISDIR(os.stat(child.path).st_mode)
    except (OSError, ValueError):
        return False


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
               errors: list[str], *, mounts: tuple[str, ...] = (), root_dev: int | None = None,
               processes: ProcessUse | None = None, real_path: str | None = None,
               parent_fd: int | None = None) -> CacheEntry | None:
    """One entry; None (with a note in ``errors``) when it vanished while we looked.

    ``mounts``: mount points known (from mountinfo) to be inside it; more are found by
    comparing the ``st_dev`` of the entry with ``root_dev`` and of its subdirectories with its own.
    ``processes``: the scan's one pass over /proc; the entry's holders are looked up in it.
    ``parent_fd``: the root, open; the entry is opened relative to it, and its files relative
    to the entry (one open directory per entry, no path walk per file).
    """
    if stat.S_ISLNK(child.st.st_mode):
        return _symlink_entry(child)
    fd = None
    opened: dict = {}
    try:
        fd = open_input(child.path if parent_fd is None else child.name, directory=True, dir_fd=parent_fd)
        listing, opened = list_fd_opening(fd, _read_by_scan if check_headers else _is_manifest)
    except FileNotFoundError:
        if fd is not None:
            os.close(fd)
        errors.append(f"{child.path}: vanished during the scan")
        return None
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        entry = _unreadable_entry(child, exc)
        listing = []
    else:
        try:
            entry = classify_entry(child.name, child.path, listing, child.st.st_mtime, now, grace, check_headers,
                                   owner_uid=child.st.st_uid, dir_fd=fd, opened=opened)
        finally:
            close_opened(opened)
            os.close(fd)
    holders = entry_holders(processes, real_path or child.path, listing) if processes is not None else ()
    if not mounts and (root_dev is None or child.st.st_dev == root_dev) and not any(
            st.st_mode & 0o170000 == stat.S_IFDIR for _, st in listing):
        # The usual entry: no subdirectory and no mount (mounts_inside would find none).
        return dataclasses.replace(entry, in_use_by=holders) if holders else entry
    found = mounts_inside(child, listing, mounts, root_dev)
    notes = [f"subdirectory {name}/ is not cache content (not counted, not scanned; removed with the entry)"
             for name, st in listing if stat.S_ISDIR(st.st_mode) and name not in found]
    notes += [f"{'the entry itself' if m == '.' else m} is a mount point: eviction never crosses it, "
              "so this entry is never evicted" for m in found]
    if not notes and not holders:
        return entry
    return dataclasses.replace(entry, mounts=found, problems=entry.problems + tuple(notes), in_use_by=holders)


def _is_manifest(name: str) -> bool:
    return name == "manifest.json"


def _read_by_scan(name: str) -> bool:
    """The files a scan with header checks reads: opened as listed (their fstat is their lstat)."""
    return name == "manifest.json" or SHARD_RE.fullmatch(name) is not None


def entry_holders(processes: ProcessUse, real_path: str, listing: list[tuple[str, os.stat_result]]) -> tuple:
    """Live processes holding one of the entry's files open or mapped (see core/shared/process_use.py)."""
    if not processes.by_inode and not processes.by_path:
        return ()
    return processes.holders(real_path, listing)


def mounts_inside(child: Child, listing: list[tuple[str, os.stat_result]], known: tuple[str, ...],
                  root_dev: int | None) -> tuple[str, ...]:
    """Mount points at or inside a child of the root, relative to it ("." = the child itself).

    ``known`` comes from mountinfo (bind mounts of the same filesystem included); a
    different ``st_dev`` in what was already listed is the evidence that needs no /proc.
    """
    found = set(known)
    if root_dev is not None and child.st.st_dev != root_dev:
        found.add(".")
    found.update(name for name, st in listing if stat.S_ISDIR(st.st_mode) and st.st_dev != child.st.st_dev)
    return tuple(sorted(found))


def entry_size(listing: list[tuple[str, os.stat_result]]) -> int:
    """Bytes of the regular files directly inside (the cache's own size measure)."""
    return sum(st.st_size for _, st in listing if stat.S_ISREG(st.st_mode))


def disk_size(listing: list[tuple[str, os.stat_result]]) -> int:
    """Bytes that unlinking the regular files directly inside gives back to the filesystem.

    Free-space targets need this rather than ``entry_size``: a file occupies whole pages or
    blocks (``st_blocks``; more than its size), a sparse file fewer, and a file with another
    hard link elsewhere frees nothing at all, so those are not counted.
    """
    return sum(st.st_blocks * 512 for _, st in listing if stat.S_ISREG(st.st_mode) and st.st_nlink == 1)


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
        manifest_mtime_ns=None, newest_mtime=None, is_symlink=True, symlink_target=target, disk_bytes=0,
        owner_uid=child.st.st_uid,
    )


def _unreadable_entry(child: Child, exc: OSError) -> CacheEntry:
    return CacheEntry(
        key=child.name, path=child.path, bytes=0, last_used=None, num_shards=None, shards_present=(),
        status="invalid", writing=False, explanation=f"unreadable entry directory: {exc.strerror}",
        manifest_mtime_ns=None, newest_mtime=child.st.st_mtime, problems=(f"{child.path}: {exc.strerror}",),
        owner_uid=child.st.st_uid,
    )


def _scan_leftover(child: Child, errors: list[str], mounts: tuple[str, ...] = (),
                   root_dev: int | None = None) -> Leftover | None:
    match = LEFTOVER_RE.fullmatch(child.name)
    assert match is not None
    listing: list[tuple[str, os.stat_result]] = []
    try:
        listing = list_dir(child.path)
    except FileNotFoundError:
        return None  # finished by its evictor while we looked
    except OSError as exc:
        errors.append(f"{child.path}: {exc.strerror}")
    return Leftover(name=child.name, path=child.path, key=match.group(1), pid=int(match.group(2)),
                    bytes=entry_size(listing), mtime=child.st.st_mtime, disk_bytes=disk_size(listing),
                    mounts=mounts_inside(child, listing, mounts, root_dev))
