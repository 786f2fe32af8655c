"""What a prune keeps and deletes, and why: one pure function of a scan and the rules.

Why pure: the dry run and ``--yes`` (and the console's confirmation) must judge exactly alike,
so both call :func:`plan_prune` on a scan; execution re-checks each victim before it touches it.

The rules (issue 31): a complete checkpoint is deleted only when no keep rule keeps it
(``keep_last`` and ``older_than`` select complete checkpoints; with both, a victim must be
beyond the newest N *and* older than D); interrupted saves are selected by ``incomplete``
alone (one newer than the newest complete checkpoint only once older than ``grace``);
``keep_every`` (complete checkpoints) and ``keep_steps`` (any) only keep. Whatever the rules,
never deleted: the newest complete checkpoint, one a live process holds open or mapped, the
one whose published sidecar set is the newest resumable state, a symlink, one across a mount,
one this process could not remove entirely.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.retention.scan import OutputScan, PruneLeftover, ScannedCheckpoint
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import clipped, format_duration, human_age, plural
from fvconsole.core.shared.process_use import holders_text
from fvconsole.core.shared.reasons import Reason, reason
from fvconsole.core.shared.removal import removal_obstacle
from fvconsole.core.shared.walk import tree_size

#: FastVideo's default for a save that may still be in progress (issue 31: ``--grace``, 10m).
DEFAULT_GRACE = 600.0


@dataclass(frozen=True)
class PruneRules:
    """What a prune selects and what it keeps beyond the rules that always hold."""

    keep_last: int | None = None
    keep_every: int | None = None
    older_than: float | None = None
    incomplete: bool = False
    grace: float = DEFAULT_GRACE
    keep_steps: frozenset[int] = field(default_factory=frozenset)
    #: Steps the console's operator marked: selected by name, still under every rule that always holds.
    marked: frozenset[int] = field(default_factory=frozenset)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, keep_steps=sorted(self.keep_steps), marked=sorted(self.marked))


@dataclass(frozen=True)
class KeptCheckpoint:
    """A checkpoint the plan leaves, with every reason it is kept (the first is the one shown)."""

    step: int
    path: str
    why: tuple[Reason, ...]
    bytes: int
    complete: bool

    @property
    def reason(self) -> str:
        return "; ".join(r.cli for r in self.why)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "path": self.path, "bytes": self.bytes, "reason": self.reason}


@dataclass(frozen=True)
class DoomedCheckpoint:
    """A checkpoint the plan deletes: what the scan saw of it (execution re-checks it) and why it goes."""

    #: None only for a leftover whose original name was never recorded.
    step: int | None
    path: str
    bytes: int
    files: int
    why: tuple[Reason, ...]
    identity: tuple[int, int]
    complete: bool
    #: A leftover of an interrupted prune (already out of the ``checkpoint-<step>`` pattern).
    leftover: bool = False
    #: What its removal leaves behind: the sidecar sets published for it (``prune.orphans_set``).
    warnings: tuple[Reason, ...] = ()

    @property
    def reason(self) -> str:
        return "; ".join([" and ".join(r.cli for r in self.why), *(w.cli for w in self.warnings)])

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "path": self.path, "bytes": self.bytes, "reason": self.reason,
                "warnings": [w.cli for w in self.warnings]}


@dataclass(frozen=True)
class PrunePlan:
    """The verdict on every checkpoint of one scan: kept (newest first) and deleted (leftovers first)."""

    output_dir: str
    rules: PruneRules
    kept: tuple[KeptCheckpoint, ...]
    delete: tuple[DoomedCheckpoint, ...]
    #: Scan-level warnings (a partial process check, an unreadable receipt).
    notes: tuple[str, ...] = ()
    #: ``time.monotonic()`` when judged: execution walks a victim's removability again only for an older plan.
    planned_at: float = field(default_factory=time.monotonic)

    @property
    def freed_bytes(self) -> int:
        return sum(d.bytes for d in self.delete)

    def to_json(self) -> dict[str, Any]:
        return {"output_dir": self.output_dir, "executed": False, "rules": self.rules.to_json(),
                "kept": [k.to_json() for k in self.kept], "delete": [d.to_json() for d in self.delete],
                "freed_bytes": self.freed_bytes, "warnings": list(self.notes)}


def plan_prune(scan: OutputScan, rules: PruneRules) -> PrunePlan:
    """Judge every checkpoint of ``scan`` by ``rules`` (reads nothing but the removability of victims)."""
    complete = [c for c in scan.checkpoints if c.complete and not c.symlink]
    newest_complete = complete[0].step if complete else None
    last = {c.step for c in complete[: rules.keep_last]} if rules.keep_last is not None else set()
    resumable = next((c for c in scan.checkpoints if c.resumable and not c.symlink), None)
    kept: list[KeptCheckpoint] = []
    delete: list[DoomedCheckpoint] = [_leftover(item) for item in scan.leftovers if not item.running]
    for ck in scan.checkpoints:
        never = _never(ck, newest_complete, resumable)
        if ck.step in rules.marked:
            keeps, goes = _judge_marked(ck, rules, newest_complete, scan.now)
        elif ck.complete:
            keeps, goes = _judge_complete(ck, rules, last, scan.now)
        else:
            keeps, goes = _judge_incomplete(ck, rules, newest_complete, scan.now)
        keeps = never + keeps
        if not keeps and goes:
            obstacle = removal_obstacle(ck.path)
            if obstacle is not None:
                keeps = [reason("keep.not_removable", "checkpoint", user=obstacle.user, path=obstacle.path,
                                why=obstacle.why)]
        if keeps or not goes:
            kept.append(KeptCheckpoint(ck.step, ck.path, tuple(keeps), ck.info.bytes, ck.complete))
        else:
            orphans = tuple(reason("prune.orphans_set", "checkpoint", path=p) for p in ck.sets)
            delete.append(DoomedCheckpoint(ck.step, ck.path, ck.info.bytes, ck.info.files, tuple(goes),
                                           ck.identity, ck.complete, warnings=orphans))
    running = tuple(reason("prune.leftover_running", "leftover", path=item.path, pid=item.pid,
                           name=item.original or "a checkpoint").cli for item in scan.leftovers if item.running)
    orphaned = tuple(f"{item.path}: {w.cli}" for item in delete for w in item.warnings)
    notes = tuple(n for n in (scan.process_partial, *scan.notes, *running, *orphaned) if n)
    return PrunePlan(scan.output_dir, rules, tuple(kept), tuple(delete), notes)


def _never(ck: ScannedCheckpoint, newest_complete: int | None, resumable: ScannedCheckpoint | None) -> list[Reason]:
    """The reasons that hold whatever the rules say."""
    found = []
    if ck.info.unreadable is not None:
        found.append(reason("keep.unreadable", "checkpoint", why=ck.info.unreadable))
    if ck.symlink:
        found.append(reason("keep.symlink", "checkpoint"))
    if ck.mounts:
        where = ("is itself a mount point" if "." in ck.mounts
                 else f"contains a mount point ({', '.join(ck.mounts[:3])})")
        found.append(reason("keep.mounted", "checkpoint", where=where))
    if ck.readers:
        first = ck.readers[0].holder
        more = f" (and {plural(len(ck.readers) - 1, 'more reader')})" if len(ck.readers) > 1 else ""
        found.append(reason("keep.read", "checkpoint", pid=first.pid, host=first.host,
                            operation=f"{ck.readers[0].operation}: {clipped(first.command, 120)}", more=more))
    if ck.holders:
        how, pid, command, more = holders_text(ck.holders)
        found.append(reason("keep.in_use", "checkpoint", how=how, pid=pid, command=command, more=more))
    if ck.complete and not ck.symlink and ck.step == newest_complete:
        found.append(reason("keep.newest_complete", "checkpoint"))
    if resumable is not None and ck is resumable and ck.published is not None:
        found.append(reason("keep.published", "checkpoint", path=ck.published))
    return found


def _age(ck: ScannedCheckpoint, now: float) -> float | None:
    """Seconds since its newest file changed (None: unknown, a walk over its bound or no file at all)."""
    newest = ck.info.newest_mtime
    if newest is None or not ck.info.size_complete:
        return None
    return max(0.0, now - newest)


def _judge_complete(ck: ScannedCheckpoint, rules: PruneRules, last: set[int],
                    now: float) -> tuple[list[Reason], list[Reason]]:
    """(keep reasons, delete reasons) of the rules for a complete checkpoint."""
    keeps: list[Reason] = []
    goes: list[Reason] = []
    if ck.step in rules.keep_steps:
        keeps.append(reason("keep.step", "keep_steps", step=ck.step))
    if rules.keep_every and ck.step % rules.keep_every == 0:
        keeps.append(reason("keep.every", "keep_every", every=rules.keep_every))
    if rules.keep_last is None and rules.older_than is None:
        return keeps + [reason("keep.unselected", "rules")], goes
    if rules.keep_last is not None:
        if ck.step in last:
            keeps.append(reason("keep.last", "keep_last", count=rules.keep_last))
        else:
            goes.append(reason("prune.beyond_last", "keep_last", count=rules.keep_last))
    if rules.older_than is not None:
        age = _age(ck, now)
        limit = format_duration(rules.older_than)
        if age is None:
            keeps.append(reason("keep.age_unknown", "older_than", why=ck.info.problems[-1] if ck.info.problems
                                else "no file in it"))
        elif age <= rules.older_than:
            keeps.append(reason("keep.recent", "older_than", age=human_age(age), limit=limit))
        else:
            goes.append(reason("prune.older_than", "older_than", age=human_age(age), limit=limit))
    return keeps, goes


def _judge_incomplete(ck: ScannedCheckpoint, rules: PruneRules, newest_complete: int | None,
                      now: float) -> tuple[list[Reason], list[Reason]]:
    """(keep reasons, delete reasons) of the rules for an incomplete checkpoint (each worded by its gaps)."""
    keeps: list[Reason] = []
    if ck.step in rules.keep_steps:
        keeps.append(reason("keep.step", "keep_steps", step=ck.step))
    if not rules.incomplete:
        return keeps + [reason("keep.incomplete_unselected", "incomplete", gaps=ck.info.gaps_brief)], []
    age = _age(ck, now)
    if newest_complete is None or ck.step > newest_complete:
        if age is None:
            keeps.append(reason("keep.age_unknown", "grace", why="its size walk did not finish"))
        elif age < rules.grace:
            keeps.append(reason("keep.grace", "grace", gaps=ck.info.gaps_brief, age=human_age(age),
                                grace=format_duration(rules.grace)))
    # The listing's first typed gap (dcp/, its .metadata, then the RNG files), never a match on its words.
    why = ck.info.gaps[0].summary if ck.info.gaps else "incomplete"
    return keeps, [reason("prune.incomplete", "incomplete", gaps=ck.info.gaps_brief, why=why, age=human_age(age))]


def _judge_marked(ck: ScannedCheckpoint, rules: PruneRules, newest_complete: int | None,
                  now: float) -> tuple[list[Reason], list[Reason]]:
    """A marked checkpoint goes, unless it is an incomplete one that may still be being written."""
    keeps: list[Reason] = []
    if not ck.complete and (newest_complete is None or ck.step > newest_complete):
        age = _age(ck, now)
        if age is None or age < rules.grace:
            keeps.append(reason("keep.grace", "grace", gaps=ck.info.gaps_brief, age=human_age(age),
                                grace=format_duration(rules.grace)))
    return keeps, [reason("prune.marked", "marked", step=ck.step)]


def _leftover(item: PruneLeftover) -> DoomedCheckpoint:
    size = tree_size(item.path)
    hidden = item.path.rsplit("/", 1)[-1]
    named = f"{hidden}, was {item.original!r}" if item.original is not None else f"{hidden}, its name not recorded"
    return DoomedCheckpoint(item.step, item.path, size.bytes, size.files,
                            (reason("prune.leftover", "leftover", name=named),), (0, 0), False, leftover=True)
