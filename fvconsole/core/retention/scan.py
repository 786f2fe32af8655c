"""An output dir as retention sees it: every ``checkpoint-<step>`` with the facts its rules judge.

Why a scan of its own beside ``checkpoints ls``: pruning judges facts a listing does not need
(who holds a file open or mapped, a mount inside, which published sidecar set is the newest
resumable state, a checkpoint's age as its newest file's mtime), and the dry run and ``--yes``
must judge exactly the same frozen value. The DCP metadata is never decoded (a listing of
2,000 checkpoints must take well under 2 s): a legacy checkpoint is resumable on more than
one rank only with a published sidecar set, and that set is found through its receipt.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass, replace

from fvconsole.core.checkpoints.listing import CheckpointInfo, checkpoint_dirs, inspect_checkpoint
from fvconsole.core.migration.published import PublishedSet, run_sets
from fvconsole.core.retention.leftovers import (
    original_name,
    owner_running,
    parse_leftover,
    read_record,
    step_of,
)
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.host import current_identity
from fvconsole.core.shared.locks import Reader, live_readers, real_directory
from fvconsole.core.shared.mounts import mount_points, mounts_by_child
from fvconsole.core.shared.process_use import Holder, ProcessUse, scan_processes
from fvconsole.core.shared.walk import listing, tree_size


@dataclass(frozen=True)
class ScannedCheckpoint:
    """One ``checkpoint-<step>`` of the output dir and everything a retention rule asks of it."""

    info: CheckpointInfo
    #: The directory entry is a symlink (followed by FastVideo, never deleted here).
    symlink: bool
    #: (st_dev, st_ino) of the directory as scanned: execution removes only this very directory.
    identity: tuple[int, int]
    #: Mount points at or inside it, relative to it ("." = itself).
    mounts: tuple[str, ...]
    #: Live processes on this node holding one of its files open or mapped.
    holders: tuple[Holder, ...]
    #: The published sidecar set made for it (its dir), if one is complete.
    published: str | None
    #: Every set published in the output dir for it, or outside it and named by a FastVideo validation
    #: receipt there (their dirs): a prune that deletes it says they are left without their checkpoint.
    sets: tuple[str, ...] = ()
    #: Live readers (a migration or reshard reading it: their reader's records beside it).
    readers: tuple[Reader, ...] = ()

    @property
    def step(self) -> int:
        return self.info.step

    @property
    def path(self) -> str:
        return self.info.path

    @property
    def complete(self) -> bool:
        return self.info.complete

    @property
    def resumable(self) -> bool:
        """Complete and able to resume on its world size: rank-local, or legacy with a published set."""
        return self.complete and (self.info.kind == "rank-local" or self.published is not None)


@dataclass(frozen=True)
class PruneLeftover:
    """A checkpoint an interrupted prune renamed out of the pattern and did not finish removing."""

    path: str
    #: The step of its original name (None: unknown, its record was never written).
    step: int | None
    host: str
    pid: int
    #: Its original ``checkpoint-<step>`` name (None: unknown).
    original: str | None = None
    #: Its owner still runs on this host: not a leftover but a prune at work (left alone).
    running: bool = False


@dataclass(frozen=True)
class OutputScan:
    """The output dir at one moment: its checkpoints newest first, the leftovers, what the scan could not see."""

    output_dir: str
    checkpoints: tuple[ScannedCheckpoint, ...]
    leftovers: tuple[PruneLeftover, ...]
    #: The time the ages are measured from.
    now: float
    #: Why the process check did not see every process (None: it did).
    process_partial: str | None = None
    #: Problems that do not stop the scan (an unreadable receipt).
    notes: tuple[str, ...] = ()


def scan_output_dir(output_dir: str, *, now: float | None = None, use: ProcessUse | None = None) -> OutputScan:
    """Scan ``output_dir`` (reads only). FvError when it is not a readable directory.

    The scan, its checkpoints' and leftovers' paths, and so the plan and its journal line, name the
    real directory (``~`` expanded, every symlink resolved): the one name the output dir's lock has,
    however the command line reached it (issue 37 item 1).
    """
    out = real_directory(output_dir)
    try:
        st = os.stat(out)
    except OSError as exc:
        raise FvError(f"{out}: cannot read the output dir ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise FvError(f"{out}: not a directory (expected a training output dir)")
    if re.match(r"^checkpoint-\d+$", os.path.basename(out)):
        raise FvError(f"{out}: is a checkpoint-<step> dir; give the training output dir that holds it")
    real = out
    try:
        dirs = checkpoint_dirs(out)
        leftovers = _leftovers(out)
    except OSError as exc:
        raise FvError(f"{out}: cannot list the output dir ({exc.strerror or exc})") from None
    use = scan_processes() if use is None else use
    held = _holders_by_child(use.under(real), real)
    mounted = mounts_by_child(mount_points() or (), real)
    published = run_sets(out)
    by_checkpoint = published.made_for()
    every_set = published.made_for(include_named=True)  # also the sets outside the output dir receipts name
    reading = live_readers(out)
    found, notes = [], [*published.notes, *(p.cli for p in reading.problems)]
    for path in dirs:
        try:
            key = os.path.join(real, os.path.basename(path))
            scanned = _scan_one(path, st.st_dev, use, held, mounted, by_checkpoint.get(key, ()),
                                every_set.get(key, ()))
        except (FvError, OSError):
            continue  # vanished since the listing (pruned or renamed by someone else)
        found.append(replace(scanned, readers=reading.of(os.path.basename(path))))
    return OutputScan(out, tuple(found), leftovers, time.time() if now is None else now,
                      use.partial, tuple(notes))


def _scan_one(path: str, out_dev: int, use: ProcessUse, held: dict[str, set[Holder]],
              mounted: dict[str, tuple[str, ...]], sets: tuple[PublishedSet, ...],
              orphaned: tuple[PublishedSet, ...]) -> ScannedCheckpoint:
    name = os.path.basename(path)
    lst = os.lstat(path)
    symlink = stat.S_ISLNK(lst.st_mode)
    # One walk gives the size and every inode of the tree a process holds (a bind mount's paths differ).
    walked = tree_size(path, watch=use.by_inode if use.by_inode else None)
    info = inspect_checkpoint(path, read_dcp=False, size=walked)
    mounts = set(mounted.get(name, ()))
    if not symlink and lst.st_dev != out_dev:
        mounts.add(".")
    holders = set(held.get(name, ()))
    if not symlink:
        holders |= use.held_in(walked)
    published = None
    if info.complete and info.kind != "rank-local" and not symlink:
        published = next((found.output_dir for found in sets if found.complete), None)
    return ScannedCheckpoint(info, symlink, (lst.st_dev, lst.st_ino), tuple(sorted(mounts)),
                             tuple(sorted(holders)), published,
                             () if symlink else tuple(sorted(found.output_dir for found in orphaned)))


def _holders_by_child(use: ProcessUse, real: str) -> dict[str, set[Holder]]:
    """Holders by path, grouped by the child of the output dir the held file lies in (one pass)."""
    prefix = real.rstrip("/") + "/"
    grouped: dict[str, set[Holder]] = {}
    for path, holders in use.by_path.items():
        child = path[len(prefix):].split("/", 1)[0]
        grouped.setdefault(child, set()).update(holders)
    return grouped


def holders_of(use: ProcessUse, path: str) -> tuple[Holder, ...]:
    """Live processes holding anything in the checkpoint dir ``path`` (execution's re-check)."""
    return use.tree_holders(path)


def _leftovers(out: str) -> tuple[PruneLeftover, ...]:
    """Every hidden leftover of a prune, its name parsed (either way of naming), its owner judged."""
    found = []
    me = current_identity()
    with listing(out) as entries:
        for entry in entries:
            parsed = parse_leftover(entry.name)
            if parsed is None or not entry.is_dir(follow_symlinks=False):
                continue
            path = os.path.join(out, entry.name)
            record = read_record(path)
            original = original_name(parsed, record)
            found.append(PruneLeftover(path, step_of(original), parsed.host, parsed.pid, original,
                                       owner_running(parsed, record, me)))
    return tuple(sorted(found, key=lambda item: item.path))
