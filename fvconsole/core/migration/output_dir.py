"""The output dir rules: where a sidecar set may be published, and what lies beside it.

One module for every rule about ``--output-dir`` so that the dry run refuses exactly what
execution would, and execution re-checks the same rules right before it writes and again
before it publishes. The output dir is usually on a filesystem shared by several hosts, so
a PID means nothing by itself (:mod:`fvconsole.core.host`): executions on one output dir
serialise through the lock file ``.<outname>.fvconsole-lock`` beside it
(:mod:`fvconsole.core.locks`), and the staging dirs beside it
(``.<outname>.fvconsole-staging-<host>-<identity key>-<pid>-<rand>``) say whose they are.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fvconsole.core.errors import FvError
from fvconsole.core.fsutil import is_within, real
from fvconsole.core.host import HostIdentity, current_identity, pid_alive
from fvconsole.core.locks import FileLock
from fvconsole.core.migration.files import classify_entry
from fvconsole.core.mounts import place_of, same_place
from fvconsole.core.reasons import Reason, invalid, reason

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration.plan import Collector, MigrationRequest

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


def lock_path(out: str) -> str:
    """The migration lock of output dir ``out``: beside it, so no set ever contains it."""
    out = os.path.abspath(out)
    return os.path.join(os.path.dirname(out), f".{os.path.basename(out)}{LOCK_TAG}")


def migration_lock(out: str, step: Any = None) -> FileLock:
    """The lock that serialises executions on ``out`` (any host sharing the filesystem)."""
    return FileLock(lock_path(out), subject=os.path.abspath(out), what="another migration holds the lock", step=step)


@dataclass(frozen=True)
class OutputState:
    """What is at the output path right now."""

    path: str
    exists: bool
    sidecars: tuple[str, ...] = ()
    receipt: bool = False
    temps: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()

    @property
    def has_set(self) -> bool:
        return bool(self.sidecars) or self.receipt


def inspect_output_dir(path: str) -> OutputState:
    """Classify the output dir's entries without following symlinks (FvError if unusable)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return OutputState(path, False)
    if stat.S_ISLNK(st.st_mode):
        raise FvError.of(reason("output_dir.symlink", "output_dir", path=path))
    if not stat.S_ISDIR(st.st_mode):
        raise FvError.of(reason("output_dir.not_dir", "output_dir", path=path))
    sidecars, temps, foreign = [], [], []
    receipt = False
    with os.scandir(path) as entries:
        for entry in entries:
            kind = classify_entry(entry.name)
            regular = entry.is_file(follow_symlinks=False)
            if kind == "foreign" or not regular:
                foreign.append(entry.name)
            elif kind == "sidecar":
                sidecars.append(entry.name)
            elif kind == "receipt":
                receipt = True
            else:
                temps.append(entry.name)
    return OutputState(path, True, tuple(sorted(sidecars)), receipt, tuple(sorted(temps)), tuple(sorted(foreign)))


def check_output_dir(out: str, checkpoint: str, overwrite: bool) -> OutputState:
    """Refuse (FvError) unless ``out`` may receive a new set; nothing is written."""
    out_real = os.path.realpath(out)
    ck_real = os.path.realpath(checkpoint)
    if is_within(out_real, ck_real):
        raise FvError.of(reason("output_dir.in_checkpoint", "output_dir", path=out, real=out_real, checkpoint=ck_real))
    if is_within(ck_real, out_real):
        raise FvError.of(reason("output_dir.holds_checkpoint", "output_dir", path=out, checkpoint=ck_real))
    state = inspect_output_dir(out)
    mounted = mount_point_of(out) if state.exists else None
    if mounted:
        raise FvError.of(reason("output_dir.mount_point", "output_dir", path=out, why=mounted))
    if state.foreign:
        shown = ", ".join(state.foreign[:3]) + (" ..." if len(state.foreign) > 3 else "")
        raise FvError.of(reason("output_dir.foreign", "output_dir", path=out, count=len(state.foreign), shown=shown))
    if state.has_set and not overwrite:
        raise FvError.of(reason("output_dir.has_set", "output_dir", path=out, count=len(state.sidecars),
                                receipt=" and a receipt" if state.receipt else ""))
    return state


def mount_point_of(path: str) -> str | None:
    """Why directory ``path`` is a mount point (a tmpfs, a container's bind mount), or None.

    Publishing renames the staging dir onto ``path`` (or swaps the two), which the kernel
    refuses for a mount point (EBUSY). ``st_dev`` alone misses a bind mount of the same
    filesystem, so the mount ids are compared too (:mod:`fvconsole.core.mounts`).
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None  # judged (and refused) by the other rules
    try:
        parent = os.open(os.path.join(path, os.pardir), flags)
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


def check_request(req: MigrationRequest, ckpt: str, data_path: str | None, col: Collector) -> str:
    """The rules the preview collects with every other refusal; returns :func:`resolve`'s path.

    The output dir must be outside the checkpoint (symlinks resolved) and the dataset root,
    a directory if it exists, and free of sidecars unless overwrite.
    """
    given = resolve(req.output_dir)
    out = real(req.output_dir)
    if is_within(out, ckpt):
        via = f" (resolves to {out})" if out != given else ""
        col.refuse("output_dir", f"{given}{via} is the checkpoint or inside it ({ckpt}); it must be outside")
    elif os.path.lexists(given) and not os.path.isdir(given):
        col.refuse("output_dir", f"{given} exists and is not a directory")
    elif os.path.isdir(out):
        try:
            with os.scandir(out) as it:
                existing = sorted(e.name for e in it if e.name.startswith("dataloader_state_rank") and e.name.endswith(".pt"))
        except OSError as exc:
            col.refuse("output_dir", f"{given}: cannot list ({exc.strerror or exc})")
            existing = []
        if existing and not req.overwrite:
            col.add(reason("output_dir.has_sidecars", "output_dir", path=given, count=len(existing),
                           example=existing[0]))
    if data_path is not None and is_within(real(req.output_dir), real(data_path)):
        col.refuse(
            "output_dir",
            f"{given} is inside the dataset root {real(data_path)} "
            "(training.data.data_path), which must stay read-only",
        )
    return given


def check_destination(out: str, checkpoint: str, overwrite: bool) -> OutputState:
    """Refuse (FvError) unless a new set may be published at ``out``; nothing is written.

    A usable name (the staging dir beside it adds ~85 bytes), :func:`check_output_dir`, and
    a parent in which the staging dir can be created. Execution calls it before its first
    write; the preview through :func:`review`, so a dry run refuses exactly what ``--yes``
    would.
    """
    outname = os.path.basename(out)
    if not outname or outname in (".", ".."):
        raise FvError.of(reason("output_dir.bad_name", "output_dir", path=out))
    if len(os.fsencode(staging_name(outname))) > NAME_MAX:
        raise FvError.of(reason("output_dir.name_too_long", "output_dir", path=out,
                                limit=NAME_MAX - len(os.fsencode(staging_name('')))))
    state = check_output_dir(out, checkpoint, overwrite)
    problem = _unwritable_parent(out)
    if problem:
        raise FvError.of(invalid("output_dir", problem))
    return state


@dataclass(frozen=True)
class Review:
    """What execution would refuse (as data) or report about the output dir right now."""

    refusal: Reason | None
    notes: tuple[Reason, ...] = ()

    @property
    def warnings(self) -> tuple[str, ...]:
        """The notes in the command line's words."""
        return tuple(n.cli for n in self.notes)


def review(out: str, checkpoint: str, overwrite: bool, *, break_lock: bool = False) -> Review:
    """:func:`check_destination` and the lock, judged without writing; staging dirs beside it.

    The preview calls this once every other rule has passed. The lock is only read, never
    taken; ``break_lock`` judges it as ``--break-lock`` would.
    """
    lock = migration_lock(out).probe(break_stale=break_lock)
    try:
        check_destination(out, checkpoint, overwrite)
        refusal = lock.reason
    except FvError as exc:
        refusal = exc.reason or invalid("output_dir", str(exc))
    parent, outname = os.path.dirname(out), os.path.basename(out)
    notes = []
    for found in staging_dirs(parent, outname):
        kept = staging_kept(found)
        notes.append(invalid("output_dir", kept) if kept else
                     reason("staging.crashed_here", "output_dir", path=found.path, pid=found.pid))
    if lock.note_reason is not None:
        notes.append(lock.note_reason)
    return Review(refusal, tuple(notes))


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
        entries = list(os.scandir(parent))
    except OSError:
        return found
    for entry in sorted(entries, key=lambda e: e.name):
        match = pattern.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False):
            found.append(StagingDir(entry.path, match["host"], match["key"], int(match["pid"])))
    return found


def staging_kept(found: StagingDir, me: HostIdentity | None = None) -> str | None:
    """Why ``found`` must be left alone, or None if it is a crashed run of this very identity.

    Only this identity can tell whether the PID in the name still runs: a staging dir of
    another host or container (or without an identity) may be a live migration's.
    """
    me = me or current_identity()
    if found.key is None:
        return (f"{found.path}: staging dir without a host identity (older fvconsole, pid {found.pid}); "
                "left untouched: remove it by hand once no migration is running")
    if found.key != me.key:
        return (f"{found.path}: staging dir of another host or container ({found.host}, pid {found.pid}); "
                "left untouched: a migration there is running or crashed, remove it by hand once it is gone")
    if pid_alive(found.pid):
        return f"{found.path}: staging dir of a running migration on this host (pid {found.pid}); left untouched"
    return None
