"""Eviction plans: which entries to delete and why, decided without touching the disk."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.cache.freespace import FreeSpacePlan, free_space_walk
from fvconsole.core.cache.gc_order import gc_sort_key, lru_walk
from fvconsole.core.cache.roots import root_refusal
from fvconsole.core.cache.scan import CacheEntry, CacheScan, Leftover
from fvconsole.core.cache.selectors import (
    RECLAIMABLE_STATUSES,
    EvictionSelectors,
    FreeTarget,
    cap_bytes,
    default_max_gb,
)
from fvconsole.core.cache.verify import failed_verification
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.host import pid_alive
from fvconsole.core.shared.humanize import format_duration, human_age, human_bytes, plural
from fvconsole.core.shared.process_use import Holder, holders_text
from fvconsole.core.shared.reasons import Reason, reason
from fvconsole.core.shared.removal import removal_obstacle

#: What a planned symlinked entry's reason says after its selectors (no flag: both front ends use it).
SYMLINK_NOTE = "a symlink: only the link is removed, its target is never touched"


@dataclass(frozen=True)
class PlannedEviction:
    """One directory (or top-level symlink) to remove; re-checked against these fields first.

    ``why``: one reason per selector that chose it (``evict.*`` codes); each front end words
    them (``reason`` is the command line's wording, also in ``--json``).
    """

    key: str
    path: str
    bytes: int
    why: tuple[Reason, ...]
    manifest_mtime_ns: int | None
    is_symlink: bool = False
    leftover: bool = False
    #: What removing it gives back to the filesystem (CacheEntry.disk_bytes); None: unknown.
    disk_bytes: int | None = None
    #: The entry directory's owner (CacheEntry.owner_uid): whose job on this node may be using it.
    owner_uid: int | None = None

    @property
    def reason(self) -> str:
        """The command line's wording: each selector's text, then the symlink note."""
        return eviction_text(self.why, self.is_symlink)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, omit=("why",), reason=self.reason)


def eviction_text(why: Sequence[Reason], is_symlink: bool = False) -> str:
    """Why an entry is (or was) evicted, in the command line's words: each selector's, then the symlink note."""
    text = "; ".join(r.cli for r in why)
    return f"{text} ({SYMLINK_NOTE})" if is_symlink else text


@dataclass(frozen=True)
class SkippedEntry:
    """A selected entry that will not be removed, and why (``reason``: the command line's wording)."""

    key: str
    why: Reason

    @classmethod
    def of(cls, key: str, code: str, **values: Any) -> SkippedEntry:
        """The skip ``code`` (a ``skip.*`` code of :mod:`fvconsole.core.shared.reasons`) of entry ``key``."""
        return cls(key, reason(code, "key", key=key, **values))

    @property
    def reason(self) -> str:
        return self.why.cli

    @property
    def code(self) -> str:
        return self.why.code

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, omit=("why",), reason=self.reason)


@dataclass(frozen=True)
class EvictionPlan:
    """Exactly what ``execute_eviction`` will attempt, in order."""

    root: str
    real_root: str
    evict: tuple[PlannedEviction, ...]
    skipped: tuple[SkippedEntry, ...]
    total_bytes: int
    cap_bytes: int | None
    grace_seconds: float
    force: bool
    hostname: str
    #: The root's filesystem when the plan was made (statvfs: f_bavail x f_frsize, f_blocks x f_frsize).
    fs_free: int | None = None
    fs_total: int | None = None
    #: Set when a free-space target was given (--min-free-gb / --min-free-percent).
    free_space: FreeSpacePlan | None = None
    #: The root's owner (CacheScan.root_uid): the cache's owner where an entry's is unknown.
    root_uid: int | None = None

    @property
    def freed_bytes(self) -> int:
        return sum(p.bytes for p in self.evict)

    @property
    def total_bytes_after(self) -> int:
        """The cache's size once every planned entry is gone (leftovers were never counted in it)."""
        return self.total_bytes - sum(p.bytes for p in self.evict if not p.leftover)

    @property
    def fs_free_after(self) -> int | None:
        """Estimated free space once every planned item is gone (what unlinking gives back)."""
        if self.fs_free is None:
            return None
        return self.fs_free + sum(p.disk_bytes or 0 for p in self.evict)

    # One wording of the plan for both front ends (the command line's dry run, the console's dialog).

    @property
    def title(self) -> str:
        """``eviction plan for ROOT on HOST (dry run)``."""
        return f"eviction plan for {self.root} on {self.hostname} (dry run)"

    @property
    def free_line(self) -> str | None:
        """``filesystem free 10.0 GiB of 50.0 GiB; about 12.0 GiB after this eviction`` (None: not measured)."""
        if self.fs_free is None:
            return None
        return (f"filesystem free {human_bytes(self.fs_free)} of {human_bytes(self.fs_total)}; "
                f"about {human_bytes(self.fs_free_after)} after this eviction")

    @property
    def would_free(self) -> str:
        """``would free 1.2 GiB (3 entries)``."""
        return f"would free {human_bytes(self.freed_bytes)} ({plural(len(self.evict), 'entry', 'entries')})"

    def to_json(self) -> dict[str, Any]:
        # `errors`: a dry run has the execution's shape (docs/cli.md); scripts read it in both.
        return fields_json(
            self, omit=("real_root",),
            rename={"fs_free": "fs_free_bytes_before", "fs_total": "fs_total_bytes", "free_space": "free_target"},
            executed=False, freed_bytes=self.freed_bytes, errors=[], total_bytes_after=self.total_bytes_after,
            fs_free_bytes_after_estimate=self.fs_free_after)


def protection_reason(entry: CacheEntry, now: float, grace: float) -> str | None:
    """Why an entry looks in use right now (skipped unless --force)."""
    window = format_duration(grace)
    if entry.writing:
        return f"being written (a .tmp file changed within the {window} grace period)"
    if entry.last_used is not None and now - entry.last_used < grace:
        return f"used {human_age(now - entry.last_used)} ago (within the {window} grace period)"
    if entry.newest_mtime is not None and now - entry.newest_mtime < grace:
        age = human_age(now - entry.newest_mtime)
        return f"modified {age} ago (within the {window} grace period; a write may be in progress)"
    return None


def removal_skip(key: str, path: str) -> SkippedEntry | None:
    """``not removable by alice: <path> (why)``: what this process could not remove of an entry, checked
    before anything of it is touched (``core.shared.removal.removal_obstacle``); None when all of it can go."""
    found = removal_obstacle(path)
    if found is None:
        return None
    return SkippedEntry.of(key, "skip.not_removable", user=found.user, path=found.path, why=found.why)


def process_skip(key: str, holders: Sequence[Holder]) -> SkippedEntry:
    """``in use: mapped by pid 4242 (python)``: an entry live processes on this node hold (unless --force)."""
    how, pid, command, more = holders_text(tuple(holders))
    return SkippedEntry.of(key, "skip.in_use_process", how=how, pid=pid, command=command, more=more)


def mount_reason(mounts: Sequence[str]) -> str:
    """Why an entry (or leftover) with mount points inside is never removed, not even with --force."""
    if "." in mounts:
        where = "is itself a mount point"
    else:
        more = f" and {len(mounts) - 3} more" if len(mounts) > 3 else ""
        where = f"contains a mount point ({', '.join(mounts[:3])}{more})"
    return f"{where}; nothing of it is removed (eviction never crosses a mount)"


def _leftover_reason(item: Leftover, now: float, grace: float) -> str | None:
    """A leftover whose evictor may still be running on this host is left alone for a while."""
    if now - item.mtime >= grace or not pid_alive(item.pid):
        return None
    return f"eviction by pid {item.pid} may still be running (changed {human_age(now - item.mtime)} ago)"


def _select(scan: CacheScan, sel: EvictionSelectors, max_gb: float | None, skip_lru: set[str],
            now: float, failed: Mapping[str, str]) -> dict[str, list[Reason]]:
    """key -> reasons, the union of all selectors (``max_gb``: ``sel``'s cap, resolved where this runs;
    ``failed``: what ``--verify`` found, key -> first problem)."""
    reasons: dict[str, list[Reason]] = {}

    def add(key: str, code: str, **values: Any) -> None:
        reasons.setdefault(key, []).append(reason(code, "key", **values))

    regular = [e for e in scan.entries if not e.is_symlink]
    for key in sel.keys:
        if scan.get(key) is not None:
            add(key, "evict.key")
    if sel.invalid:
        for e in scan.entries:
            if e.status in RECLAIMABLE_STATUSES:
                add(e.key, "evict.invalid", status=e.status, explanation=e.explanation)
    for key, problem in failed.items():
        add(key, "evict.failed_verify", problem=problem)
    if sel.older_than is not None:
        for e in regular:
            if e.last_used is None:
                add(e.key, "evict.never_used")
            elif now - e.last_used > sel.older_than:
                add(e.key, "evict.older_than", age=human_age(now - e.last_used),
                    limit=format_duration(sel.older_than))
    if max_gb is not None:
        victims, passed = lru_walk(regular, cap_bytes(max_gb), skip_lru)
        for rank, e in enumerate(victims, 1):
            add(e.key, "evict.over_cap", rank=rank, cap=f"{max_gb:g}")
        for e in passed:
            add(e.key, "evict.over_cap_next", cap=f"{max_gb:g}")
    return reasons


def plan_eviction(scan: CacheScan, selectors: EvictionSelectors, *, grace_seconds: float | None = None,
                  force: bool = False, now: float | None = None) -> EvictionPlan:
    """Union of the selectors minus --keep and (unless ``force``) entries in use.

    A free-space target adds entries in GC order until the root's filesystem would have that
    much free, counting what the other selectors and the leftover cleanup free first (see
    :mod:`.freespace`); a target that cannot be met adds nothing (unless best effort) and says
    so in ``plan.free_space``, not an error.
    Raises FvError for a dangerous root (or, with a target, unknown free space) and
    UsageError when nothing is selected. Leftovers of interrupted evictions are always
    planned for cleanup (first).
    """
    selectors.require()
    max_gb = _resolved_cap(selectors)
    _refuse_root(scan, force)
    now = scan.scanned_at if now is None else now
    grace = scan.grace_seconds if grace_seconds is None else float(grace_seconds)
    guards = _Guards.of(scan, selectors, now, grace, force)
    evict, skipped = _leftover_items(scan, now, grace, force)
    # --verify reads every usable-looking entry's shard headers once, on this scan.
    failed = failed_verification(scan) if selectors.verify else {}
    selected, free_space = _select_removable(scan, selectors, max_gb, guards, now, failed, evict)
    skipped += [SkippedEntry.of(k, "skip.missing") for k in dict.fromkeys(selectors.keys) if scan.get(k) is None]
    for e in sorted((e for e in scan.entries if e.key in selected), key=gc_sort_key):
        held = guards.skip_of(e.key)
        if held is not None:
            skipped.append(held)
        else:
            evict.append(_planned(e, selected[e.key]))
    if selectors.sized:
        skipped += _lru_notes(scan, selected)
    return EvictionPlan(
        root=scan.root, real_root=scan.real_root, evict=tuple(evict), skipped=tuple(skipped),
        total_bytes=scan.total_bytes, cap_bytes=int(cap_bytes(max_gb)) if max_gb is not None else None,
        grace_seconds=grace, force=force, hostname=scan.hostname,
        fs_free=scan.fs_free, fs_total=scan.fs_total, free_space=free_space, root_uid=scan.root_uid,
    )


def _resolved_cap(selectors: EvictionSelectors) -> float | None:
    """``--max-gb``'s cap in GiB, a value-less one resolved here ($FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB)."""
    if selectors.max_gb is None and selectors.max_gb_from_env:
        return default_max_gb()
    return selectors.max_gb


def _refuse_root(scan: CacheScan, force: bool) -> None:
    """FvError for a root that must not be evicted from (a system dir, or one holding other things)."""
    # An empty root has nothing to lose and nothing to evict (a fresh node's cache on a
    # fleet run): only a root holding other things but no cache entries is suspicious.
    looks_like_cache = bool(scan.entries or scan.leftovers) or not scan.foreign
    refused = root_refusal(scan.root, scan.real_root, looks_like_cache, force)
    if refused:
        raise FvError.of(refused)


@dataclass
class _Guards:
    """What keeps a selected entry in place, by key: ``--keep``, in use, a mount inside, not removable here."""

    keep: set[str]
    protected: dict[str, SkippedEntry]
    mounted: dict[str, str]
    unremovable: dict[str, SkippedEntry] = field(default_factory=dict)

    @classmethod
    def of(cls, scan: CacheScan, selectors: EvictionSelectors, now: float, grace: float, force: bool) -> _Guards:
        # Two signals of use: live processes holding its files (first), then recent mtimes.
        held = {} if force else {e.key: process_skip(e.key, e.in_use_by) for e in scan.entries if e.in_use_by}
        protected = {} if force else {
            e.key: SkippedEntry.of(e.key, "skip.in_use", why=r)
            for e in scan.entries if e.key not in held and (r := protection_reason(e, now, grace)) is not None
        }
        protected.update(held)
        return cls(set(selectors.keep), protected, {e.key: mount_reason(e.mounts) for e in scan.entries if e.mounts})

    def keys(self) -> set[str]:
        """Every guarded key: the size policies pass over them."""
        return self.keep | set(self.protected) | set(self.mounted) | set(self.unremovable)

    def skip_of(self, key: str) -> SkippedEntry | None:
        """Why a selected entry stays (the first guard that holds it), or None: it is evicted."""
        if key in self.keep:
            return SkippedEntry.of(key, "skip.kept")
        if key in self.mounted:
            return SkippedEntry.of(key, "skip.mounted", prefix="", why=self.mounted[key])
        return self.protected.get(key) or self.unremovable.get(key)


def _select_removable(scan: CacheScan, selectors: EvictionSelectors, max_gb: float | None, guards: _Guards,
                      now: float, failed: Mapping[str, str], leftovers: Sequence[PlannedEviction],
                      ) -> tuple[dict[str, list[Reason]], FreeSpacePlan | None]:
    """The selection (key -> reasons) and its free-space side, with what this process cannot remove guarded.

    What this process cannot remove is skipped before anything is renamed (and the size
    policies pass over it): only entries a selector would evict are checked, so this selects
    again until no newly chosen entry turns out unremovable.
    """
    checked: set[str] = set()
    while True:
        skip = guards.keys()
        selected = _select(scan, selectors, max_gb, skip, now, failed)
        free_space = None
        if selectors.free_target is not None:
            free_space = _free_space(scan, selectors.free_target, selected, skip, leftovers)
        fresh = [e for e in scan.entries if e.key in selected and e.key not in skip and e.key not in checked]
        checked.update(e.key for e in fresh)
        blocked = {e.key: s for e in fresh if (s := removal_skip(e.key, e.path)) is not None}
        if not blocked:
            return selected, free_space
        guards.unremovable.update(blocked)


def _free_space(scan: CacheScan, target: FreeTarget, selected: dict[str, list[Reason]], skip: set[str],
                leftovers: Sequence[PlannedEviction]) -> FreeSpacePlan:
    """Add (to ``selected``) the entries a free-space target needs, in GC order; the plan's free-space side.

    What the other selectors and the leftover cleanup free counts first; entries that may not
    be evicted (``skip``) are passed over and recorded like ``--max-gb`` does. A target that
    evicting all it may cannot reach adds nothing, unless it is best effort (:mod:`.freespace`).
    """
    if scan.fs_free is None or not scan.fs_total:
        raise FvError(f"{scan.root}: cannot read the free space of its filesystem (statvfs failed); "
                      "a free-space target needs it")
    need = target.bytes_needed(scan.fs_total)
    others = [e for e in scan.entries if e.key in selected and e.key not in skip]
    free = scan.fs_free + sum(p.disk_bytes or 0 for p in leftovers) + sum(e.disk_bytes or 0 for e in others)
    regular = sorted((e for e in scan.entries if not e.is_symlink), key=gc_sort_key)
    victims, passed, possible = free_space_walk(regular, free, need, skip, {e.key for e in others})
    after = possible
    if possible < need and not target.best_effort:  # unreachable: nothing is evicted for it
        victims, after = [], free
    goal = {"need": human_bytes(need), **target.values()}
    running = free
    for rank, e in enumerate(victims, 1):
        selected.setdefault(e.key, []).append(
            reason("evict.min_free", "key", rank=rank, short=human_bytes(need - running), **goal))
        running += e.disk_bytes or 0
    for e in passed:
        selected.setdefault(e.key, []).append(reason("evict.min_free_next", "key", **goal))
    return FreeSpacePlan(target=target, target_bytes=need, fs_total=scan.fs_total, free_before=scan.fs_free,
                         free_after=after, victims=tuple(e.key for e in victims), possible=possible)


def _planned(e: CacheEntry, why: Sequence[Reason]) -> PlannedEviction:
    return PlannedEviction(key=e.key, path=e.path, bytes=e.bytes, why=tuple(why),
                           manifest_mtime_ns=e.manifest_mtime_ns, is_symlink=e.is_symlink, disk_bytes=e.disk_bytes,
                           owner_uid=e.owner_uid)


def _leftover_items(scan: CacheScan, now: float, grace: float,
                    force: bool) -> tuple[list[PlannedEviction], list[SkippedEntry]]:
    evict, skipped = [], []
    for item in scan.leftovers:
        busy = None if force else _leftover_reason(item, now, grace)
        if item.mounts:
            skipped.append(SkippedEntry.of(item.key, "skip.mounted", prefix=f"{item.name}: ",
                                           why=mount_reason(item.mounts)))
        elif busy:
            skipped.append(SkippedEntry.of(item.key, "skip.leftover_busy", name=item.name, why=busy))
        elif (blocked := removal_skip(item.key, item.path)) is not None:
            skipped.append(blocked)
        else:
            why = reason("evict.leftover", "key", name=item.name)
            evict.append(PlannedEviction(key=item.key, path=item.path, bytes=item.bytes, why=(why,),
                                         manifest_mtime_ns=None, leftover=True, disk_bytes=item.disk_bytes))
    return evict, skipped


def _lru_notes(scan: CacheScan, selected: dict[str, list[Reason]]) -> list[SkippedEntry]:
    """Symlinked entries are never part of the size policies: say so when --max-gb or a free target is used."""
    return [
        SkippedEntry.of(e.key, "skip.symlink_not_sized")
        for e in scan.entries if e.is_symlink and e.key not in selected
    ]
