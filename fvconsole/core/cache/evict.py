"""Execute an eviction plan: re-check, hide by rename, remove without following symlinks.

Each entry is re-checked right before deletion (same manifest mtime and size as planned),
then renamed to ``<root>/.evicting-<key>-<pid>``: a launch racing with us sees a clean
miss, and a second evictor's rename fails with ENOENT ("already evicted") instead of
deleting the same files twice. The hidden tree is removed by ``remove.remove_tree``
through directory file descriptors opened with O_NOFOLLOW, so a symlink inside an entry
is unlinked, never followed, and nothing outside the root is ever reached. An entry (or
leftover) with a mount point inside is never renamed or emptied: the re-check looks for
mount points again, and the remover refuses to cross one that appears even later.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.files import list_dir
from fvconsole.core.cache.plan import (
    EvictionPlan,
    PlannedEviction,
    SkippedEntry,
    eviction_text,
    mount_reason,
    process_skip,
    removal_skip,
)
from fvconsole.core.cache.scan import (
    KEY_RE,
    LEFTOVER_PREFIX,
    LEFTOVER_RE,
    Child,
    entry_holders,
    entry_size,
    fs_free_bytes,
    manifest_mtime_ns,
    mounts_inside,
)
from fvconsole.core.journal.log import JournalWrite
from fvconsole.core.shared import interrupts
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.host import node_names
from fvconsole.core.shared.humanize import human_age, human_bytes, plural
from fvconsole.core.shared.mounts import mount_points, mounts_by_child
from fvconsole.core.shared.operation import Stop
from fvconsole.core.shared.process_use import ProcessUse, scan_processes
from fvconsole.core.shared.progress import Progress, no_progress
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.removal import PartialRemoval, remove_tree

__all__ = ["EvictedEntry", "EvictionResult", "PartialRemoval", "execute_eviction", "remove_tree"]

_ALREADY = "already evicted (by another evictor)"

#: How old (seconds) the pass over /proc that re-checks an entry may be. One pass reads every
#: process's fds and maps (milliseconds idle, far more on a login node of thousands of processes);
#: a pass per entry made an eviction of 300 entries take seconds to minutes. A cold load holds its
#: files open for minutes, so a pass this recent still sees it; the mtime and manifest re-checks
#: stay per entry and fresh.
PROCESS_PASS_MAX_AGE = 0.5


class _ProcessPass:
    """The latest pass over /proc, taken again once it is older than PROCESS_PASS_MAX_AGE."""

    def __init__(self) -> None:
        self._use: ProcessUse | None = None
        self._taken = 0.0

    def current(self) -> ProcessUse:
        now = time.monotonic()
        if self._use is None or now - self._taken > PROCESS_PASS_MAX_AGE:
            self._use = scan_processes()
            self._taken = time.monotonic()
        return self._use


@dataclass(frozen=True)
class EvictedEntry:
    """An entry that this process removed, with the bytes it actually unlinked."""

    key: str
    path: str
    bytes: int
    planned_bytes: int
    #: The plan's reasons (``PlannedEviction.why``); ``reason`` is their command-line wording.
    why: tuple[Reason, ...]
    leftover: bool = False
    is_symlink: bool = False

    @property
    def reason(self) -> str:
        return eviction_text(self.why, self.is_symlink)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, omit=("why", "is_symlink"), reason=self.reason)


def evicted_from(count: int, root: str) -> str:
    """``1 entry evicted from ROOT`` / ``3 entries evicted from ROOT``."""
    return f"{plural(count, 'entry', 'entries')} evicted from {root}"


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
    #: The plan's free-space target in bytes (None without one); judged on the measured free space.
    free_target_bytes: int | None = None

    @property
    def freed_bytes(self) -> int:
        return sum(e.bytes for e in self.evicted) + self.partial_bytes

    @property
    def target_reached(self) -> bool | None:
        """Whether the filesystem now has the free space the target asked for (None: no target or unknown)."""
        if self.free_target_bytes is None or self.fs_free_after is None:
            return None
        return self.fs_free_after >= self.free_target_bytes

    @property
    def target_outcome(self) -> str:
        """``reached`` / ``NOT reached`` / ``unknown``: one wording for the CLI and the console."""
        return {True: "reached", False: "NOT reached", None: "unknown"}[self.target_reached]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def title(self) -> str:
        """``evicted 3 entries from ROOT on HOST``: the result's first line, for the command line and the console."""
        return f"evicted {plural(len(self.evicted), 'entry', 'entries')} from {self.root} on {self.hostname}"

    @property
    def summary(self) -> str:
        """``evicted 3 entries, freed 1.2 GiB``: the result in a few words (the console's report and notice)."""
        return f"evicted {plural(len(self.evicted), 'entry', 'entries')}, freed {human_bytes(self.freed_bytes)}"

    @property
    def fs_free_text(self) -> str:
        """``filesystem free 10.0 GiB -> 11.2 GiB`` (``?`` for a side not measured)."""
        before, after = (human_bytes(v) if v is not None else "?" for v in (self.fs_free_before, self.fs_free_after))
        return f"filesystem free {before} -> {after}"

    @property
    def freed_line(self) -> str:
        """``freed 1.2 GiB (measured); filesystem free 10.0 GiB -> 11.2 GiB``."""
        return f"freed {human_bytes(self.freed_bytes)} (measured); {self.fs_free_text}"

    @property
    def evicted_text(self) -> str:
        """``3 entries evicted from ROOT``: what was done, in one wording for the command line and an interruption's report."""
        return evicted_from(len(self.evicted), self.root)

    def to_json(self) -> dict[str, Any]:
        return fields_json(
            self, omit=("free_target_bytes",),
            rename={"evicted": "evict", "fs_free_before": "fs_free_bytes_before", "fs_free_after": "fs_free_bytes_after"},
            executed=True, freed_bytes=self.freed_bytes, free_target=None if self.free_target_bytes is None else {
                "target_bytes": self.free_target_bytes, "reached": self.target_reached})


class _Skip(Exception):
    """This item is not removed, for the reason given (not an error); ``skipped``: as data, when it has a code."""

    def __init__(self, text: str, skipped: SkippedEntry | None = None) -> None:
        super().__init__(text)
        self.skipped = skipped


@dataclass(frozen=True)
class StoppedEviction:
    """What an interrupted eviction did: its result so far, the entry it stopped at and what is left of it.

    ``stopped_at`` None: it stopped after the last entry (while unlocking).
    """

    result: EvictionResult
    stopped_at: str | None = None
    leftover: str | None = None

    def where(self) -> dict[str, Any]:
        """Where it stopped, as data (``{}`` when it had finished)."""
        return {} if self.stopped_at is None else {"stopped_at": self.stopped_at, "leftover": self.leftover}

    def envelope(self, journal: JournalWrite | None) -> dict[str, Any]:
        """The interrupted ``cache evict --yes --json``'s document: the result so far, the node, where it
        stopped and the journal line (None: none asked for, or nothing changed)."""
        return {**self.result.to_json(), **node_names(), "interrupted": self.where(),
                "journal": journal.to_json() if journal is not None else None}


class _Refused(Exception):
    """This item is not removed, and that is an error (it changed in a way eviction must not cross)."""


def execute_eviction(plan: EvictionPlan, progress: Progress | None = None,
                     on_stop: Callable[[Stop], None] | None = None) -> EvictionResult:
    """Remove exactly the plan's items, continuing past per-item failures.

    Stopped by a signal, it tells ``on_stop`` what was done (a :class:`StoppedEviction`) and lets the signal go on.
    """
    progress = progress or no_progress
    free_before = fs_free_bytes(plan.root)
    evicted: list[EvictedEntry] = []
    skipped: list[SkippedEntry] = list(plan.skipped)
    errors: list[str] = []
    partial = 0
    total = len(plan.evict)
    processes = _ProcessPass()

    def result(extra_errors: tuple[str, ...] = ()) -> EvictionResult:
        return EvictionResult(
            root=plan.root, evicted=tuple(evicted), skipped=tuple(skipped), errors=(*errors, *extra_errors),
            planned_bytes=plan.freed_bytes, fs_free_before=free_before, fs_free_after=fs_free_bytes(plan.root),
            hostname=plan.hostname, partial_bytes=partial,
            free_target_bytes=plan.free_space.target_bytes if plan.free_space else None)

    for done, item in enumerate(plan.evict):
        try:
            progress(done, total, f"evicting {item.key}")  # a signal while it reports: the item is untouched
            freed = _evict_item(plan, item, processes)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: stop here, say what was done
            stop = _interrupted(exc, plan, item, evicted, result)
            if on_stop is not None:
                on_stop(stop)
            raise interrupts.as_interrupted(exc) from None
        except _Skip as skip:
            skipped.append(skip.skipped or SkippedEntry.of(item.key, "skip.changed", text=str(skip)))
            continue
        except _Refused as refusal:
            errors.append(f"{item.path}: {refusal}")
            continue
        except OSError as exc:
            message = f"{item.path}: {exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
            if isinstance(exc, PartialRemoval):
                partial += exc.freed
                hidden = _hidden_path(plan, item)
                message += f"; {exc.left_in(hidden)}"
            errors.append(message)
            continue
        evicted.append(EvictedEntry(key=item.key, path=item.path, bytes=freed, planned_bytes=item.bytes,
                                    why=item.why, leftover=item.leftover, is_symlink=item.is_symlink))
    progress(total, total, "done")
    return result()


def _interrupted(exc: KeyboardInterrupt, plan: EvictionPlan, item: PlannedEviction, evicted: list[EvictedEntry],
                 result: Callable[[tuple[str, ...]], EvictionResult]) -> Stop:
    """Stopped by a signal while evicting ``item``: the result so far, and what is left behind.

    The item is either untouched under its key (stopped before the hiding rename) or a
    ``.evicting-*`` leftover (after it), exactly as after a crash: the next eviction
    removes the leftover.
    """
    stop = interrupts.as_interrupted(exc)
    hidden = _hidden_path(plan, item)
    left = os.path.lexists(hidden) and item.path != hidden
    gone = not left and not os.path.lexists(item.path) and not os.path.lexists(hidden)
    if gone:  # the signal came as its last directory went: it was evicted (we hold the root's lock)
        evicted.append(EvictedEntry(key=item.key, path=item.path, bytes=item.bytes, planned_bytes=item.bytes,
                                    why=item.why, leftover=item.leftover, is_symlink=item.is_symlink))
        error = f"interrupted by {stop.name} after {item.path} was removed"
    elif left:
        error = (f"{item.path}: interrupted by {stop.name} while removing it; the rest is left in {hidden} "
                 "(the next `cache evict` removes it)")
    else:
        error = f"{item.path}: interrupted by {stop.name} before it was removed; left as it was"
    partial = result((error,))
    what = evicted_from(len(evicted), plan.root)
    if left:
        what += f"; {os.path.basename(hidden)} left for the next `cache evict`"
    changed = bool(evicted) or left
    return Stop(stop.signum, StoppedEviction(partial, item.path, hidden if left else None),
                           done=what if changed else None, note=None if changed else "nothing was evicted")


def _check_inside_root(plan: EvictionPlan, item: PlannedEviction) -> None:
    """The item must be a direct child of the root with a name we may touch."""
    name = os.path.basename(item.path)
    pattern = LEFTOVER_RE if item.leftover else KEY_RE
    if os.path.dirname(item.path) != plan.root or not pattern.fullmatch(name):
        raise _Skip(f"{item.path} is not an entry directly inside {plan.root}; never touched")


def _hidden_path(plan: EvictionPlan, item: PlannedEviction) -> str:
    """Where this process moves an entry before deleting it (a leftover if it fails)."""
    return os.path.join(plan.root, f"{LEFTOVER_PREFIX}{item.key}-{os.getpid()}")


def _evict_item(plan: EvictionPlan, item: PlannedEviction, processes: _ProcessPass) -> int:
    _check_inside_root(plan, item)
    st = _lstat(item)
    if not item.leftover:
        _recheck_kind(item, st)
    if not stat.S_ISLNK(st.st_mode):
        listing = _listing(item)
        # Mounts first: a mount over the entry also changes what the content re-check sees.
        _recheck_mounts(plan, item, st, listing)
        if not item.leftover:
            _recheck_content(plan, item, st, listing)
            if not plan.force:
                _recheck_processes(plan, item, listing, processes.current())
    blocked = removal_skip(item.key, item.path)  # last, right before the rename: nothing is touched
    if blocked is not None:
        raise _Skip(blocked.reason, blocked)
    hidden = _hidden_path(plan, item)
    if item.path != hidden:
        try:
            os.rename(item.path, hidden)
        except FileNotFoundError:
            raise _Skip(_ALREADY) from None
    return remove_tree(hidden)


def _lstat(item: PlannedEviction) -> os.stat_result:
    try:
        return os.lstat(item.path)
    except FileNotFoundError:
        raise _Skip(_ALREADY) from None


def _listing(item: PlannedEviction) -> list[tuple[str, os.stat_result]]:
    try:
        return list_dir(item.path)
    except FileNotFoundError:
        raise _Skip(_ALREADY) from None


def _recheck_kind(item: PlannedEviction, st: os.stat_result) -> None:
    """Skip an entry that is no longer the kind of thing the plan saw."""
    if stat.S_ISLNK(st.st_mode) != item.is_symlink:
        raise _Skip("changed since plan (symlink vs directory)")
    if not item.is_symlink and not stat.S_ISDIR(st.st_mode):
        raise _Skip("changed since plan (no longer a directory)")


def _recheck_mounts(plan: EvictionPlan, item: PlannedEviction, st: os.stat_result,
                    listing: list[tuple[str, os.stat_result]]) -> None:
    """Refuse an item that has a mount point inside now (the plan skipped those it saw)."""
    name = os.path.basename(item.path)
    known = mounts_by_child(mount_points() or (), plan.real_root).get(name, ())
    try:
        root_dev = os.stat(plan.root).st_dev
    except OSError:
        root_dev = None
    found = mounts_inside(Child(name, item.path, st), listing, known, root_dev)
    if found:
        raise _Refused(f"{mount_reason(found)}; mounted since the plan")


def _recheck_content(plan: EvictionPlan, item: PlannedEviction, st: os.stat_result,
                     listing: list[tuple[str, os.stat_result]]) -> None:
    """Skip an entry that is no longer what the plan saw (used, rewritten, being written)."""
    if manifest_mtime_ns(listing) != item.manifest_mtime_ns:
        _changed(item, st, "changed since plan (manifest mtime differs: used or rewritten)")
    if entry_size(listing) != item.bytes:
        _changed(item, st, f"changed since plan (size {entry_size(listing)} != planned {item.bytes})")
    if not plan.force:
        _recheck_not_writing(listing, plan.grace_seconds)


def _recheck_processes(plan: EvictionPlan, item: PlannedEviction,
                       listing: list[tuple[str, os.stat_result]], use: ProcessUse) -> None:
    """Skip an entry a live process on this node opened or mapped since the plan (a cold load starting)."""
    real = os.path.join(plan.real_root, os.path.basename(item.path))
    holders = entry_holders(use, real, listing)
    if holders:
        skip = process_skip(item.key, holders)
        raise _Skip(skip.reason, skip)


def _changed(item: PlannedEviction, st: os.stat_result, reason: str) -> None:
    """Skip with ``reason``, unless the difference is another evictor taking the entry away.

    A concurrent evictor renames the directory and then empties it, so what we listed may
    be a directory in the middle of being removed: if ``item.path`` is now gone or another
    inode, say so instead of claiming the entry was used.
    """
    try:
        now = os.lstat(item.path)
    except FileNotFoundError:
        raise _Skip(_ALREADY) from None
    if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
        raise _Skip(_ALREADY)
    raise _Skip(reason)


def _recheck_not_writing(listing: list[tuple[str, os.stat_result]], grace: float) -> None:
    now = time.time()
    for name, st in listing:
        if name.endswith(".tmp") and now - st.st_mtime < grace:
            raise _Skip(f"changed since plan ({name} modified {human_age(now - st.st_mtime)} ago)")
