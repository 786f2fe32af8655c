"""Execute a prune plan: leftovers first, then each victim renamed out of the pattern, re-checked, removed.

Why rename first: FastVideo's ``latest`` resume and its own cleanup list ``checkpoint-<step>``
dirs; a half-deleted one under that name would be resumed from, or counted. The rename to
``.fvconsole-pruning-<digest>-<host>-<key>-<pid>`` (``core/retention/leftovers.py``) is atomic, so after a SIGKILL at
any moment every ``checkpoint-<step>`` is either whole or gone, and what is left is a hidden
leftover the next prune finishes first (the caller holds the output dir's lock, so no other
prune can be working on it). After the rename the victim is re-checked (the very directory
the plan judged, nobody holding a file of it open or mapped, nothing mounted in it, removable
by this process); if that fails it is renamed back and left as it was. One checkpoint that
cannot be removed is reported and the rest go on.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fvconsole.core.checkpoints.listing import CHECKPOINT_RE
from fvconsole.core.retention.leftovers import RECORD_NAME, parse_leftover, pruning_name, write_record
from fvconsole.core.retention.plan import DoomedCheckpoint, PrunePlan
from fvconsole.core.retention.scan import holders_of
from fvconsole.core.shared import interrupts
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.locks import live_readers
from fvconsole.core.shared.mounts import mount_points, mounts_by_child
from fvconsole.core.shared.operation import Stop
from fvconsole.core.shared.process_use import holders_text, scan_processes
from fvconsole.core.shared.reasons import Reason, reason
from fvconsole.core.shared.removal import PartialRemoval, removal_obstacle, remove_tree

#: ``progress(bytes removed, bytes planned, message)`` of the checkpoint being removed (the message
#: counts its files), at most every PROGRESS_EVERY seconds and once when it is gone.
RemovalProgress = Callable[[int, int, str], None]
PROGRESS_EVERY = 0.2
#: A plan judged longer ago than this (seconds) has each victim's removability walked again before
#: removal (the plan walked it once; a 100,000-file checkpoint takes seconds per walk). Both front ends
#: plan under the lock right before executing, so only the later victims of a long prune are walked twice.
REWALK_AFTER = 60.0


@dataclass(frozen=True)
class PrunedCheckpoint:
    """A checkpoint (or leftover) this process removed, with the bytes it actually unlinked."""

    step: int | None
    path: str
    bytes: int
    files: int
    reason: str
    leftover: bool = False

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class LeftInPlace:
    """A planned victim found changed at execution and left as it was (not an error)."""

    step: int | None
    path: str
    why: Reason

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "path": self.path, "reason": self.why.cli}


@dataclass(frozen=True)
class PruneResult:
    """What an execution did; ``errors`` non-empty means it failed part-way (exit 3)."""

    output_dir: str
    removed: tuple[PrunedCheckpoint, ...]
    left: tuple[LeftInPlace, ...]
    errors: tuple[str, ...]
    planned_bytes: int
    #: Bytes unlinked from checkpoints whose removal then failed part-way (counted in freed_bytes).
    partial_bytes: int = 0

    @property
    def freed_bytes(self) -> int:
        return sum(r.bytes for r in self.removed) + self.partial_bytes

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, executed=True, freed_bytes=self.freed_bytes)


class _Left(Exception):
    def __init__(self, why: Reason) -> None:
        super().__init__(why.cli)
        self.why = why


def execute_prune(plan: PrunePlan, progress: RemovalProgress | None = None,
                  on_stop: Callable[[Stop], None] | None = None) -> PruneResult:
    """Remove exactly the plan's victims (leftovers first), continuing past per-checkpoint failures.

    The caller holds the output dir's lock (:class:`fvconsole.core.retention.locked.PruneOperation`).
    Stopped by a signal, it tells ``on_stop`` what was done (the result so far) and lets the signal go on.
    """
    removed: list[PrunedCheckpoint] = []
    left: list[LeftInPlace] = []
    errors: list[str] = []
    partial = 0

    def result(extra: tuple[str, ...] = ()) -> PruneResult:
        return PruneResult(plan.output_dir, tuple(removed), tuple(left), (*errors, *extra), plan.freed_bytes, partial)

    for item in plan.delete:
        hidden = item.path if item.leftover else os.path.join(plan.output_dir, pruning_name(os.path.basename(item.path)))
        try:
            freed, files = _prune_one(plan, item, hidden, progress)
        except KeyboardInterrupt as exc:
            stop = _interrupted(exc, item, hidden, removed, result)
            if on_stop is not None:
                on_stop(stop)
            raise interrupts.as_interrupted(exc) from None
        except _Left as change:
            left.append(LeftInPlace(item.step, item.path, change.why))
            continue
        except OSError as exc:
            message = f"{item.path}: {exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
            if isinstance(exc, PartialRemoval):
                partial += exc.freed
                message += f"; {exc.left_in(hidden)}"
            errors.append(message)
            continue
        removed.append(PrunedCheckpoint(item.step, item.path, freed, files, item.reason, item.leftover))
    return result()


def _prune_one(plan: PrunePlan, item: DoomedCheckpoint, hidden: str,
               progress: RemovalProgress | None) -> tuple[int, int]:
    name = os.path.basename(item.path)
    ours = parse_leftover(name) is not None if item.leftover else CHECKPOINT_RE.match(name) is not None
    if os.path.dirname(item.path) != plan.output_dir or not ours:
        raise _Left(reason("prune.changed", "checkpoint", path=item.path, why="not a checkpoint of the output dir"))
    try:
        st = os.lstat(item.path)
    except FileNotFoundError:
        raise _Left(reason("prune.changed", "checkpoint", path=item.path, why="gone")) from None
    if not stat.S_ISDIR(st.st_mode) or (not item.leftover and (st.st_dev, st.st_ino) != item.identity):
        raise _Left(reason("prune.changed", "checkpoint", path=item.path, why="replaced"))
    if not item.leftover:
        mounted = mounts_by_child(mount_points() or (), os.path.realpath(plan.output_dir)).get(name)
        if mounted:
            raise _Left(reason("prune.changed", "checkpoint", path=item.path, why="mounted on"))
        os.rename(item.path, hidden)
        why = _recheck(hidden, item, walk=time.monotonic() - plan.planned_at > REWALK_AFTER)
        if why is not None:
            _rename_back(hidden, item.path)
            raise _Left(reason("prune.changed", "checkpoint", path=item.path, why=why))
        recorded = write_record(hidden, name)  # what it was, for the report of a prune that finishes it
    else:
        recorded = 0
    counted = [0]
    last = [time.monotonic()]

    def report(freed: int, files: int) -> None:
        counted[0] = files
        now = time.monotonic()
        if progress is not None and now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            progress(freed, max(item.bytes, freed), f"removing {name}: {plural(files, 'file')}")

    freed = remove_tree(hidden, report, last=RECORD_NAME)
    if recorded:  # our own record is not the checkpoint's
        freed, counted[0] = max(0, freed - recorded), max(0, counted[0] - 1)
    if progress is not None:
        progress(freed, freed, f"removed {name}: {plural(counted[0], 'file')}")
    return freed, counted[0]


def _recheck(hidden: str, item: DoomedCheckpoint, *, walk: bool) -> str | None:
    """Why the renamed victim must not be removed after all (None: it may); ``walk``: its removability too."""
    try:
        st = os.lstat(hidden)
    except OSError:
        return "gone"
    if (st.st_dev, st.st_ino) != item.identity:
        return "replaced"
    held = holders_of(scan_processes(), hidden)
    if held:
        how, pid, command, more = holders_text(held)
        return f"in use: {how} by pid {pid} ({command}){more}"
    name = os.path.basename(item.path)
    reading = live_readers(os.path.dirname(hidden)).of(name)
    if reading:  # a migration that began reading after the plan: its reader's record is there now
        first = reading[0]
        return f"read by pid {first.holder.pid} on host {first.holder.host} ({first.operation})"
    obstacle = removal_obstacle(hidden) if walk else None
    if obstacle is not None:
        return f"not removable by {obstacle.user}: {obstacle.path} ({obstacle.why})"
    return None


def _rename_back(hidden: str, path: str) -> None:
    """Undo the hiding rename (the name is free: we hold the output dir's lock; if not, leave it hidden)."""
    if not os.path.lexists(path):
        os.rename(hidden, path)


def _interrupted(exc: KeyboardInterrupt, item: DoomedCheckpoint, hidden: str, removed: list[PrunedCheckpoint],
                 result: Callable[[tuple[str, ...]], PruneResult]) -> Stop:
    """Stopped by a signal while pruning ``item``: untouched, hidden (a leftover) or gone; the result so far."""
    stop = interrupts.as_interrupted(exc)
    left = os.path.lexists(hidden) and hidden != item.path
    if left:
        error = (f"{item.path}: interrupted by {stop.name} while removing it; the rest is left in {hidden} "
                 "(the next prune removes it)")
    elif not os.path.lexists(item.path):
        removed.append(PrunedCheckpoint(item.step, item.path, item.bytes, item.files, item.reason, item.leftover))
        error = f"interrupted by {stop.name} after {item.path} was removed"
    else:
        error = f"{item.path}: interrupted by {stop.name} before it was removed; left as it was"
    partial = result((error,))
    changed = bool(removed) or left
    what = f"{plural(len(removed), 'checkpoint')} pruned from {partial.output_dir}" + (
        f"; {os.path.basename(hidden)} left for the next prune" if left else "")
    return Stop(stop.signum, partial, done=what if changed else None, note=None if changed else "nothing was pruned")
