"""Execute an eviction plan: re-check, hide by rename, remove without following symlinks.

Each entry is re-checked right before deletion (same manifest mtime and size as planned),
then renamed to ``<root>/.evicting-<key>-<pid>``: a launch racing with us sees a clean
miss, and a second evictor's rename fails with ENOENT ("already evicted") instead of
deleting the same files twice. The hidden tree is removed through directory file
descriptors opened with O_NOFOLLOW, so a symlink inside an entry is unlinked, never
followed, and nothing outside the root is ever reached.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.durations import format_duration
from fvconsole.core.cache.plan import EvictionPlan, PlannedEviction, SkippedEntry
from fvconsole.core.cache.scan import (
    KEY_RE,
    LEFTOVER_PREFIX,
    LEFTOVER_RE,
    entry_size,
    fs_free_bytes,
    list_entry_files,
    manifest_mtime_ns,
)
from fvconsole.core.progress import Progress, no_progress

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class EvictedEntry:
    """An entry that this process removed, with the bytes it actually unlinked."""

    key: str
    path: str
    bytes: int
    planned_bytes: int
    reason: str
    leftover: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "path": self.path, "bytes": self.bytes, "planned_bytes": self.planned_bytes,
                "reason": self.reason, "leftover": self.leftover}


@dataclass(frozen=True)
class EvictionResult:
    """What happened; ``errors`` non-empty means it failed part-way (exit 3)."""

    root: str
    evicted: tuple[EvictedEntry, ...]
    skipped: tuple[SkippedEntry, ...]
    errors: tuple[str, ...]
    planned_bytes: int
    fs_free_before: int | None
    fs_free_after: int | None
    hostname: str
    #: Bytes unlinked from entries whose removal then failed part-way (counted in freed_bytes).
    partial_bytes: int = 0

    @property
    def freed_bytes(self) -> int:
        return sum(e.bytes for e in self.evicted) + self.partial_bytes

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "executed": True,
            "root": self.root,
            "evict": [e.to_json() for e in self.evicted],
            "skipped": [s.to_json() for s in self.skipped],
            "freed_bytes": self.freed_bytes,
            "errors": list(self.errors),
            "partial_bytes": self.partial_bytes,
            "planned_bytes": self.planned_bytes,
            "fs_free_bytes_before": self.fs_free_before,
            "fs_free_bytes_after": self.fs_free_after,
            "hostname": self.hostname,
        }


class _Skip(Exception):
    """This item is not removed, for the reason given (not an error)."""


class PartialRemoval(OSError):
    """Some files of a tree could not be removed; the rest were, ``freed`` bytes of them.

    Removal goes on past a failing file (the entry is already hidden, so what can be freed
    should be); the first failure is kept as the error.
    """

    def __init__(self, first: OSError, freed: int, failures: int) -> None:
        super().__init__(first.errno, first.strerror, first.filename)
        self.freed = freed
        self.failures = failures


def execute_eviction(plan: EvictionPlan, progress: Progress | None = None) -> EvictionResult:
    """Remove exactly the plan's items, continuing past per-item failures."""
    progress = progress or no_progress
    free_before = fs_free_bytes(plan.root)
    evicted: list[EvictedEntry] = []
    skipped: list[SkippedEntry] = list(plan.skipped)
    errors: list[str] = []
    partial = 0
    total = len(plan.evict)
    for done, item in enumerate(plan.evict):
        progress(done, total, f"evicting {item.key}")
        try:
            freed = _evict_item(plan, item)
        except _Skip as skip:
            skipped.append(SkippedEntry(item.key, str(skip)))
            continue
        except OSError as exc:
            message = f"{item.path}: {exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
            if isinstance(exc, PartialRemoval):
                partial += exc.freed
                hidden = _hidden_path(plan, item)
                message += f"; {exc.failures} file(s) left in {hidden}, {exc.freed} bytes freed"
            errors.append(message)
            continue
        evicted.append(EvictedEntry(key=item.key, path=item.path, bytes=freed, planned_bytes=item.bytes,
                                    reason=item.reason, leftover=item.leftover))
    progress(total, total, "done")
    return EvictionResult(root=plan.root, evicted=tuple(evicted), skipped=tuple(skipped), errors=tuple(errors),
                          planned_bytes=plan.freed_bytes, fs_free_before=free_before,
                          fs_free_after=fs_free_bytes(plan.root), hostname=plan.hostname, partial_bytes=partial)


def _check_inside_root(plan: EvictionPlan, item: PlannedEviction) -> None:
    """The item must be a direct child of the root with a name we may touch."""
    name = os.path.basename(item.path)
    pattern = LEFTOVER_RE if item.leftover else KEY_RE
    if os.path.dirname(item.path) != plan.root or not pattern.fullmatch(name):
        raise _Skip(f"{item.path} is not an entry directly inside {plan.root}; never touched")


def _hidden_path(plan: EvictionPlan, item: PlannedEviction) -> str:
    """Where this process moves an entry before deleting it (a leftover if it fails)."""
    return os.path.join(plan.root, f"{LEFTOVER_PREFIX}{item.key}-{os.getpid()}")


def _evict_item(plan: EvictionPlan, item: PlannedEviction) -> int:
    _check_inside_root(plan, item)
    if not item.leftover:
        _recheck(plan, item)
    hidden = _hidden_path(plan, item)
    if item.path != hidden:
        try:
            os.rename(item.path, hidden)
        except FileNotFoundError:
            raise _Skip("already evicted (by another evictor)") from None
    return remove_tree(hidden)


def _recheck(plan: EvictionPlan, item: PlannedEviction) -> None:
    """Skip an entry that is gone or no longer what the plan saw."""
    try:
        st = os.lstat(item.path)
    except FileNotFoundError:
        raise _Skip("already evicted (by another evictor)") from None
    if stat.S_ISLNK(st.st_mode) != item.is_symlink:
        raise _Skip("changed since plan (symlink vs directory)")
    if item.is_symlink:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise _Skip("changed since plan (no longer a directory)")
    try:
        listing = list_entry_files(item.path)
    except FileNotFoundError:
        raise _Skip("already evicted (by another evictor)") from None
    if manifest_mtime_ns(listing) != item.manifest_mtime_ns:
        _changed(item, st, "changed since plan (manifest mtime differs: used or rewritten)")
    if entry_size(listing) != item.bytes:
        _changed(item, st, f"changed since plan (size {entry_size(listing)} != planned {item.bytes})")
    if not plan.force:
        _recheck_not_writing(listing, plan.grace_seconds)


def _changed(item: PlannedEviction, st: os.stat_result, reason: str) -> None:
    """Skip with ``reason``, unless the difference is another evictor taking the entry away.

    A concurrent evictor renames the directory and then empties it, so what we listed may
    be a directory in the middle of being removed: if ``item.path`` is now gone or another
    inode, say so instead of claiming the entry was used.
    """
    try:
        now = os.lstat(item.path)
    except FileNotFoundError:
        raise _Skip("already evicted (by another evictor)") from None
    if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
        raise _Skip("already evicted (by another evictor)")
    raise _Skip(reason)


def _recheck_not_writing(listing: list[tuple[str, os.stat_result]], grace: float) -> None:
    now = time.time()
    for name, st in listing:
        if name.endswith(".tmp") and now - st.st_mtime < grace:
            raise _Skip(f"changed since plan ({name} modified {format_duration(max(now - st.st_mtime, 0))} ago)")


def remove_tree(path: str) -> int:
    """Remove ``path`` (a directory or a symlink) without following any symlink.

    Returns the bytes of regular files this call unlinked; files that vanish under us
    (a concurrent evictor) are not counted and are not errors. A file or directory that
    cannot be removed does not stop the rest: PartialRemoval is raised at the end.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(st.st_mode):
        _unlink_quietly(path)
        return st.st_size if stat.S_ISREG(st.st_mode) else 0
    # The parent is the cache root as the user named it (it may itself be a symlink).
    parent_fd = os.open(os.path.dirname(path) or ".", _DIR_FLAGS & ~os.O_NOFOLLOW)
    failures: list[OSError] = []
    try:
        freed = _remove_subdir(os.path.basename(path), parent_fd, failures)
    finally:
        os.close(parent_fd)
    if failures:
        raise PartialRemoval(failures[0], freed, len(failures))
    return freed


def _unlink_quietly(name: str, dir_fd: int | None = None) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def _remove_contents(dir_fd: int, failures: list[OSError]) -> int:
    """Empty the directory open at ``dir_fd``, depth first, by names relative to fds.

    Per-file failures are appended to ``failures`` and the walk goes on.
    """
    freed = 0
    with os.scandir(dir_fd) as it:
        items = [(item.name, item) for item in it]
    for name, item in items:
        try:
            st = item.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            freed += _remove_subdir(name, dir_fd, failures)
            continue
        try:
            if _unlink_quietly(name, dir_fd) and stat.S_ISREG(st.st_mode):
                freed += st.st_size
        except OSError as exc:
            failures.append(exc if exc.filename else OSError(exc.errno, exc.strerror, name))
    return freed


def _remove_subdir(name: str, parent_fd: int, failures: list[OSError]) -> int:
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        failures.append(OSError(exc.errno, exc.strerror, name))
        return 0
    try:
        freed = _remove_contents(fd, failures)
    except OSError as exc:  # the listing itself failed
        failures.append(OSError(exc.errno, exc.strerror, name))
        freed = 0
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if not failures:  # a non-empty dir after a failure below is already explained
            failures.append(OSError(exc.errno, exc.strerror, name))
    return freed
