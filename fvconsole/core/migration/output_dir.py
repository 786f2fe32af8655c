"""The output dir rules: where a sidecar set may be published, and what lies beside it.

One module for every rule about ``--output-dir`` so that the dry run refuses exactly what
execution would, and execution re-checks the same rules right before it writes and again
before it publishes. The output dir is usually on a filesystem shared by several hosts, so
a PID means nothing by itself (:mod:`fvconsole.core.shared.host`): executions on one output dir
serialise through the lock file ``.<outname>.fvconsole-lock`` beside it
(:mod:`fvconsole.core.shared.locks`), and the staging dirs beside it
(``.<outname>.fvconsole-staging-<host>-<identity key>-<pid>-<rand>``) say whose they are.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.formats.sidecar_files import RECEIPT_NAME, classify_entry
from fvconsole.core.migration.upstream_receipt import find_upstream_receipts
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import is_within, real
from fvconsole.core.shared.host import HostIdentity, current_identity, pid_alive
from fvconsole.core.shared.humanize import human_bytes, plural
from fvconsole.core.shared.locks import FileLock
from fvconsole.core.shared.mounts import place_of, same_place
from fvconsole.core.shared.reasons import Reason, invalid, reason
from fvconsole.core.shared.safe_read import open_input
from fvconsole.core.shared.walk import listing

STAGING_TAG = ".fvconsole-staging-"
LOCK_TAG = ".fvconsole-lock"
#: The longest file name most filesystems accept (staging names add ~85 bytes to the output dir's).
NAME_MAX = 255


def staging_pattern(outname: str) -> re.Pattern[str]:
    """Names of our staging dirs for an output dir called ``outname``.

    Groups ``host`` (label), ``key`` (:attr:`HostIdentity.key`) and ``pid``; ``host`` and
    ``key`` are None for the identity-less names of older versions (``-<pid>-<rand>``).
    """
    return re.compile(
        rf"^\.{re.escape(outname)}{re.escape(STAGING_TAG)}"
        r"(?:(?P<host>[A-Za-z0-9._-]{1,40})-(?P<key>[0-9a-f]{12})-)?(?P<pid>\d+)-[0-9a-f]+$"
    )


def staging_name(outname: str, me: HostIdentity | None = None, pid: int | None = None) -> str:
    """A fresh staging dir name saying whose it is: host label, identity key, pid."""
    me = me or current_identity()
    pid = os.getpid() if pid is None else pid
    return f".{outname}{STAGING_TAG}{me.label}-{me.key}-{pid}-{secrets.token_hex(4)}"


def migration_lock(out: str, step: Any = None) -> FileLock:
    """The lock that serialises executions on ``out`` (any host sharing the filesystem): beside its real
    path, so no set ever contains it and every path to it takes one lock."""
    return FileLock.beside(out, LOCK_TAG, what="another migration holds the lock", step=step, field="output_dir")


@dataclass(frozen=True)
class OutputState:
    """What is at the output path right now."""

    path: str
    exists: bool
    sidecars: tuple[str, ...] = ()
    receipt: bool = False
    temps: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()
    #: FastVideo's validation receipts for the set (part of it: replaced with it, never foreign).
    upstream_receipts: tuple[str, ...] = ()

    @property
    def has_set(self) -> bool:
        return bool(self.sidecars) or self.receipt


def _output_state(path: str, found: list[Reason]) -> OutputState:
    """What is at ``path`` (entries classified without following symlinks); adds to ``found`` why it is unusable."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return OutputState(path, False)
    except OSError as exc:
        found.append(invalid("output_dir", f"{path}: cannot stat the output dir ({exc.strerror or exc})"))
        return OutputState(path, False)
    if stat.S_ISLNK(st.st_mode):
        found.append(reason("output_dir.symlink", "output_dir", path=path))
        return OutputState(path, True)
    if not stat.S_ISDIR(st.st_mode):
        found.append(reason("output_dir.not_dir", "output_dir", path=path))
        return OutputState(path, True)
    sidecars, temps, foreign = [], [], []
    receipt = False
    upstream = find_upstream_receipts(path)
    try:
        with listing(path) as entries:
            for entry in entries:
                kind = classify_entry(entry.name)
                regular = entry.is_file(follow_symlinks=False)
                if entry.name in upstream:
                    continue
                if kind == "foreign" or not regular:
                    foreign.append(entry.name)
                elif kind == "sidecar":
                    sidecars.append(entry.name)
                elif kind == "receipt":
                    receipt = True
                else:
                    temps.append(entry.name)
    except OSError as exc:
        found.append(invalid("output_dir", f"{path}: cannot list ({exc.strerror or exc})"))
    return OutputState(path, True, tuple(sorted(sidecars)), receipt, tuple(sorted(temps)),
                       tuple(sorted(foreign)), upstream)


def mount_point_of(path: str) -> str | None:
    """Why directory ``path`` is a mount point (a tmpfs, a container's bind mount), or None.

    Publishing renames the staging dir onto ``path`` (or swaps the two), which the kernel
    refuses for a mount point (EBUSY). ``st_dev`` alone misses a bind mount of the same
    filesystem, so the mount ids are compared too (:mod:`fvconsole.core.shared.mounts`).
    """
    try:
        fd = open_input(path, directory=True)
    except OSError:
        return None  # judged (and refused) by the other rules
    try:
        parent = open_input(os.path.join(path, os.pardir), directory=True)
    except OSError:
        os.close(fd)
        return None
    try:
        here, above = place_of(fd), place_of(parent)
        same_inode = os.fstat(fd).st_ino == os.fstat(parent).st_ino
    finally:
        os.close(fd)
        os.close(parent)
    if here.dev != above.dev:
        return "another filesystem than its parent's"
    if not same_place(here, above) or same_inode:
        return "a mount of its own, e.g. a bind mount"
    return None


# --------------------------------------------------------------------------- the rules


def resolve(output_dir: str) -> str:
    """The output dir as the operator means it: ``~`` expanded, absolute (symlinks kept)."""
    return os.path.abspath(os.path.expanduser(output_dir))


def output_dir_rules(out: str, checkpoint: str, dataset_root: str | None, overwrite: bool) -> Judged:
    """Every reason a new set may not be published at ``out`` now (none: it may), and what is there; writes nothing.

    The one place of the output dir rules: the preview collects every reason with its other
    refusals, execution re-checks all of them right before its first write, under the lock,
    and right before publishing (:func:`check_destination`). ``out`` is :func:`resolve`'s
    path; the checkpoint and the dataset root (None: not known) are compared with it after
    resolving symlinks, so a symlink swapped in since the preview still counts.
    """
    found: list[Reason] = []
    outname = os.path.basename(out)
    if not outname or outname in (".", ".."):
        return Judged(OutputState(out, False), (reason("output_dir.bad_name", "output_dir", path=out),))
    if len(os.fsencode(staging_name(outname))) > NAME_MAX:
        found.append(reason("output_dir.name_too_long", "output_dir", path=out,
                            limit=NAME_MAX - len(os.fsencode(staging_name("")))))
    out_real, ck_real = real(out), real(checkpoint)
    inside, holds = is_within(out_real, ck_real), is_within(ck_real, out_real)
    if inside:
        found.append(reason("output_dir.in_checkpoint", "output_dir", path=out, real=out_real, checkpoint=ck_real))
    elif holds:
        found.append(reason("output_dir.holds_checkpoint", "output_dir", path=out, checkpoint=ck_real))
    if dataset_root is not None and is_within(out_real, real(dataset_root)):
        found.append(reason("output_dir.in_dataset", "output_dir", path=out, real=out_real, root=real(dataset_root)))
    state = OutputState(out, os.path.lexists(out))
    if not inside and not holds:  # the checkpoint's own entries say nothing about a set
        state = _output_state(out, found)
        mounted = mount_point_of(out) if state.exists else None
        if mounted:
            found.append(reason("output_dir.mount_point", "output_dir", path=out, why=mounted))
        if state.foreign:
            shown = ", ".join(state.foreign[:3]) + (" ..." if len(state.foreign) > 3 else "")
            found.append(reason("output_dir.foreign", "output_dir", path=out, count=len(state.foreign),
                                foreign=plural(len(state.foreign), "file"), shown=shown))
        if state.has_set and not overwrite:
            found.append(reason("output_dir.has_sidecars", "output_dir", path=out, count=len(state.sidecars),
                                sidecars=plural(len(state.sidecars), "dataloader_state_rank<r>.pt sidecar"),
                                receipt=" and a receipt" if state.receipt else "",
                                example=(state.sidecars or (RECEIPT_NAME,))[0]))
    problem = _unwritable_parent(out)
    if problem:
        found.append(invalid("output_dir", problem))
    return Judged(state, tuple(found))


@dataclass(frozen=True)
class Judged:
    """The output dir rules' verdict: what is at the output path and every reason it may not receive a set."""

    state: OutputState
    reasons: tuple[Reason, ...]


def check_destination(out: str, checkpoint: str, dataset_root: str | None, overwrite: bool) -> OutputState:
    """:func:`output_dir_rules`, refusing (FvError, the first reason) unless a new set may be published at ``out``."""
    judged = output_dir_rules(out, checkpoint, dataset_root, overwrite)
    if judged.reasons:
        raise FvError.of(judged.reasons[0])
    return judged.state


@dataclass(frozen=True)
class Review:
    """Beside the output dir, right now: the lock's refusal (as data), and what executing would find."""

    refusal: Reason | None
    notes: tuple[Reason, ...] = ()


def review(out: str, *, break_lock: bool = False) -> Review:
    """The lock, judged without writing, and the staging dirs beside ``out``.

    The preview calls this once every other rule has passed. The lock is only read, never
    taken; ``break_lock`` judges it as ``--break-lock`` would.
    """
    lock = migration_lock(out).probe(break_stale=break_lock)
    parent, outname = os.path.dirname(out), os.path.basename(out)
    notes = []
    for found in staging_dirs(parent, outname):
        notes.append(staging_kept(found) or reason("staging.crashed_here", "output_dir", path=found.path,
                                                   pid=found.pid))
    if lock.note_reason is not None:
        notes.append(lock.note_reason)
    return Review(lock.reason, tuple(notes))


def _unwritable_parent(out: str) -> str | None:
    """Why the staging dir (a sibling of ``out``) could not be created, judged without writing.

    Looks at the nearest existing ancestor of ``out``'s parent: it must be a directory we may
    write into, on a filesystem mounted read-write. (A dry run must not promise a write that
    execution would then fail part-way.)
    """
    ancestor = os.path.dirname(out)
    while not os.path.lexists(ancestor) and ancestor != os.path.dirname(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"{out}: {ancestor} is not a directory, so the output dir cannot be created"
    try:
        if os.statvfs(ancestor).f_flag & os.ST_RDONLY:
            return f"{out}: {ancestor} is on a read-only filesystem"
    except OSError:
        pass
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{out}: no permission to create files in {ancestor}"
    return None


# --------------------------------------------------------------------------- room

#: Bytes a lock file's holder record takes at most (one block on every filesystem).
LOCK_RECORD_BYTES = 4096


@dataclass(frozen=True)
class Room:
    """What writing a set needs on the filesystem of the output dir's parent, and what is free there.

    ``free_inodes`` is None on a filesystem without an inode limit (``f_files`` 0: btrfs, some
    network filesystems). Free is what this process may use: ``f_bavail``/``f_favail``, or
    ``f_bfree``/``f_ffree`` for root, whom the reserved blocks are for.
    """

    where: str
    files: int
    need_bytes: int
    need_inodes: int
    free_bytes: int
    free_inodes: int | None

    @property
    def enough(self) -> bool:
        return self.need_bytes <= self.free_bytes and (self.free_inodes is None or self.need_inodes <= self.free_inodes)


def _blocks(size: int, block: int) -> int:
    return -(-size // block) * block if size else 0


@dataclass(frozen=True)
class Space:
    """What the filesystem a set would be written to has free, as ``statvfs`` said: the nearest existing
    ancestor of the output dir's parent (``missing``: the parent dirs the lock would create below it)."""

    where: str
    missing: int
    block: int
    free_bytes: int
    free_inodes: int | None


def free_space(out: str, vfs: Callable[[str], os.statvfs_result] = os.statvfs) -> Space | None:
    """The free space and inodes where a set at ``out`` would be written; None when the filesystem cannot
    be asked (the other rules judge a path that does not lead anywhere). ``vfs``: ``os.statvfs`` (a seam
    for the filesystem)."""
    ancestor, missing = os.path.dirname(out), 0
    while not os.path.isdir(ancestor) and ancestor != os.path.dirname(ancestor):
        ancestor, missing = os.path.dirname(ancestor), missing + 1
    try:
        st = vfs(ancestor)
    except OSError:
        return None
    block = st.f_frsize or st.f_bsize or 4096
    root = os.geteuid() == 0
    free = (st.f_bfree if root else st.f_bavail) * block
    inodes = (st.f_ffree if root else st.f_favail) if st.f_files else None
    return Space(ancestor, missing, block, free, inodes)


def room_for_set(space: Space | None, files: Sequence[tuple[str, int]]) -> Room | None:
    """What writing ``files`` ((name, bytes): the sidecars and the receipt) beside and into the output dir needs.

    Counted in the filesystem's own blocks: every file rounded up to whole blocks, the lock
    file and its holder record, the staging dir and its entries, and each missing parent dir
    the lock would create. None when ``space`` is (the filesystem could not be asked).
    """
    if space is None:
        return None
    block = space.block
    entries = sum(8 + -(-len(os.fsencode(name)) // 4) * 4 for name, _ in files)  # ext4's dirent: 8 bytes + name
    need = (sum(_blocks(size, block) for _, size in files) + _blocks(LOCK_RECORD_BYTES, block)
            + _blocks(entries + block, block) + space.missing * block)
    return Room(space.where, len(files), need, len(files) + 2 + space.missing, space.free_bytes, space.free_inodes)


def room_rule(out: str, files: Sequence[tuple[str, int]], space: Space | None) -> Reason | None:
    """Why the set cannot be written at ``out`` for want of space or inodes (None: it fits), judged on
    ``space`` (:func:`free_space`).

    The dry run and ``--yes`` both ask this, before anything is written: a full filesystem is a
    refusal naming what is needed and what is free, never a write that fails part-way.
    """
    room = room_for_set(space, files)
    if room is None or room.enough:
        return None
    return reason("output_dir.no_room", "output_dir", path=out, where=room.where, files=room.files,
                  need=human_bytes(room.need_bytes), need_inodes=room.need_inodes,
                  free=human_bytes(room.free_bytes),
                  free_inodes="unlimited" if room.free_inodes is None else room.free_inodes)


# --------------------------------------------------------------------------- staging


@dataclass(frozen=True)
class StagingDir:
    """A staging dir beside the output dir, as its name describes it."""

    path: str
    host: str | None  # host label; None for an identity-less name of an older version
    key: str | None
    pid: int


def staging_dirs(parent: str, outname: str) -> list[StagingDir]:
    """Staging dirs (real directories, not symlinks) of ``outname`` in ``parent``."""
    pattern = staging_pattern(outname)
    found = []
    try:
        with listing(parent) as listed:
            dirs = sorted(e.name for e in listed if pattern.match(e.name) and e.is_dir(follow_symlinks=False))
    except OSError:
        return found
    for name in dirs:
        match = pattern.match(name)
        found.append(StagingDir(os.path.join(parent, name), match["host"], match["key"], int(match["pid"])))
    return found


def staging_kept(found: StagingDir, me: HostIdentity | None = None) -> Reason | None:
    """Why ``found`` must be left alone, or None if it is a crashed run of this very identity.

    Only this identity can tell whether the PID in the name still runs: a staging dir of
    another host or container (or without an identity) may be a live migration's.
    """
    me = me or current_identity()
    if found.key is None:
        return reason("staging.no_identity", "output_dir", path=found.path, pid=found.pid)
    if found.key != me.key:
        return reason("staging.other_host", "output_dir", path=found.path, host=found.host, pid=found.pid)
    if pid_alive(found.pid):
        return reason("staging.running", "output_dir", path=found.path, pid=found.pid)
    return None


def checkpoint_view_rules(out: str, step: int, run_output_dirs: tuple[str, ...]) -> tuple[Reason, ...]:
    """Why ``out`` cannot receive a resharded checkpoint view (docs/formats.md §3), beside the rules above.

    FastVideo reads a checkpoint's own ``dataloader_state_rank<r>.pt`` before any override dir,
    so a native checkpoint's reshard is a new dir FastVideo resumes from: named
    ``checkpoint-<step>`` (it parses the step from the name), new, and outside every run output
    dir (its "latest" and its cleanup of old checkpoints would take it for one of the run's).
    """
    found = []
    name = f"checkpoint-{step}"
    if os.path.basename(out) != name:
        found.append(invalid("output_dir", f"{out}: a resharded native checkpoint is a checkpoint view FastVideo "
                                           f"resumes from; name it {name} (FastVideo parses the step from the name)"))
    if os.path.lexists(out):
        found.append(invalid("output_dir", f"{out}: already exists; a checkpoint view is written into a new dir"))
    out_real = real(out)
    for run_dir in run_output_dirs:
        if is_within(out_real, run_dir):
            found.append(invalid("output_dir", f"{out}: inside the run's output dir {run_dir}; FastVideo would take "
                                               "the view for one of the run's checkpoints (latest, cleanup)"))
            break
    return tuple(found)
