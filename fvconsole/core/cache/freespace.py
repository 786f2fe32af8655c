"""Planning to a free-space target (``--min-free-gb N``, ``--min-free-percent P``: ``selectors.FreeTarget``).

Why: node-local caches usually live on tmpfs (``/dev/shm``), which competes with RAM, so
operators evict "until the node has X free" rather than "until the cache is below X"
(LLVM's cache pruning ``cache_size=X%`` of free space is the closest precedent). The target
is measured on the filesystem that holds the root, with ``statvfs``: free means
``f_bavail x f_frsize``, the space an unprivileged writer (FastVideo) can still use; the
size is ``f_blocks x f_frsize``. On tmpfs the two free counts are the same.

Victims are taken in FastVideo's GC order (``gc_order.gc_sort_key``), like ``--max-gb``, and
each is credited with what unlinking it gives back (``CacheEntry.disk_bytes``: allocated
blocks of files with no other hard link), not its apparent size. Space freed by the other
selectors of the same plan and by leftover cleanup counts toward the target first, so the
union never evicts more than the target needs.

A target that cannot be reached (everything that may be evicted is not enough: other files
fill the tmpfs, or the rest is kept or in use) evicts nothing *for the target* unless it is
``best_effort`` (``--best-effort``): emptying the cache would cost the next job on the node
its warm entries (minutes of cold loading) and still miss the target. Entries the other
selectors chose still go. The plan says so (``reached`` false, the shortfall, and how far
evicting everything would get: ``possible``), and the command still exits 0 (a Slurm
epilog that exits non-zero drains the node).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.model import CacheEntry
from fvconsole.core.cache.selectors import FreeTarget
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import human_bytes
from fvconsole.core.shared.reasons import Reason, reason


@dataclass(frozen=True)
class FreeSpacePlan:
    """The free-space side of a plan: before, expected after, and whether that meets the target."""

    target: FreeTarget
    target_bytes: int
    fs_total: int
    free_before: int
    #: ``free_before`` plus what every planned item gives back (an estimate: see the module docstring).
    free_after: int
    #: Entries this target added to the plan, in GC order.
    victims: tuple[str, ...]
    #: Free space once every entry that may be evicted for the target is gone (its best;
    #: None: ``free_after``, the plan took them all).
    possible: int | None = None

    @property
    def best(self) -> int:
        """Free space once every entry that may be evicted for the target is gone."""
        return self.free_after if self.possible is None else self.possible

    @property
    def held_back(self) -> bool:
        """The target cannot be reached and is not best effort: nothing was added for it."""
        return not self.target.best_effort and self.best < self.target_bytes

    @property
    def reached(self) -> bool:
        return self.free_after >= self.target_bytes

    @property
    def shortfall(self) -> int:
        return max(0, self.target_bytes - self.free_after)

    @property
    def why(self) -> Reason:
        """The plan's free-space line as data: the target, before, after, and honestly whether it can be met."""
        values = {"need": human_bytes(self.target_bytes), "before": human_bytes(self.free_before),
                  "after": human_bytes(self.free_after), **self.target.values()}
        if self.free_before >= self.target_bytes:
            return reason("free.already", "free_target", **values)
        if self.reached:
            return reason("free.reached", "free_target", **values)
        code = "free.unreachable_held" if self.held_back else "free.unreachable"
        return reason(code, "free_target", short=human_bytes(self.shortfall),
                      possible=human_bytes(self.best), **values)

    def summary(self) -> str:
        """The command line's line for the plan (``why`` worded with its flags)."""
        return self.why.cli

    def to_json(self) -> dict[str, Any]:
        return {**self.target.to_json(), **fields_json(
            self, omit=("target",), rename={"fs_total": "fs_total_bytes", "free_before": "free_bytes_before",
                                            "free_after": "free_bytes_after_estimate",
                                            "possible": "free_bytes_possible"},
            reached=self.reached, shortfall_bytes=self.shortfall, evicted_for_target=not self.held_back,
            summary=self.summary())}


def freed_by(entry: CacheEntry) -> int:
    """What evicting ``entry`` gives back to the filesystem (0 when unknown: never over-promised)."""
    return entry.disk_bytes or 0


def free_space_walk(ordered: Sequence[CacheEntry], free: int, target: int, skip: Iterable[str] = (),
                    already: Iterable[str] = ()) -> tuple[list[CacheEntry], list[CacheEntry], int]:
    """(victims, passed over, free after): walk ``ordered`` (GC order) until ``free >= target``.

    ``free`` already includes what the rest of the plan frees; ``already`` are entries the rest
    of the plan evicts (counted there, so walked past); ``skip`` are entries that may not be
    evicted (kept, in use, mounted), passed over like FastVideo's GC passes over its own key.
    """
    skip, already = set(skip), set(already)
    victims, passed = [], []
    for entry in ordered:
        if free >= target:
            break
        if entry.key in already:
            continue
        if entry.key in skip:
            passed.append(entry)
            continue
        victims.append(entry)
        free += freed_by(entry)
    return victims, passed, free
