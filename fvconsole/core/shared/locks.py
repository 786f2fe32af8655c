"""Exclusive locks that say whose they are, also between hosts on a shared filesystem.

Why: two fvconsole runs acting on the same directory (two ``migrate --yes`` to one output
dir from two login nodes; a cron evictor and an operator on one cache root) must not run at
once, and the one that is refused must be told *who* holds the lock. A PID alone cannot say
that (see :mod:`fvconsole.core.shared.host`), so every lock records a :class:`Holder`: host
identity (hostname, boot id, PID namespace), PID and the process start time (a reused PID
is not the holder), user, time and command line. Only a process of the holder's own
identity can prove that the holder is gone: it then takes the lock over by itself, with a
note (as Mercurial does with its repository lock on the same host), so a run killed by the
OOM killer or ``scancel --signal=KILL`` needs no manual step. A lock of another host or
container is never taken over silently: only on the operator's word (``break_stale``,
``--break-lock``), and never a holder this process sees alive.

API
---
``Holder.current(command=None)``
    The record for this process. ``describe()`` gives ``"pid P on host H since T"`` (safe
    to print: control characters escaped); ``judge()`` gives a :class:`Judgement`:
    ``ALIVE``, ``DEAD`` (provably: same identity and the PID is gone, a zombie, or another
    process with a different start time) or ``UNKNOWN`` (another host or PID namespace),
    with a reason; ``to_json()`` / ``Holder.from_json()`` (ValueError if malformed).
``FileLock(path, subject=..., what=..., step=None)``
    A lock *file* (for directories other hosts write to): created whole or not at all by
    writing the holder JSON to a unique temp file, fsyncing it and ``link()``-ing it to
    ``path`` (atomic and exclusive, also on NFS; on filesystems without hard links an
    ``O_CREAT|O_EXCL`` create, write and fsync). ``acquire(wait=0.0, break_stale=False)``
    returns notes (the stale lock it took over or broke) or raises :class:`LockBusy`. A lock
    whose holder is provably dead is always taken over; with ``break_stale`` also one whose
    holder cannot be judged from here (another host, container or boot). Either way it is
    renamed aside, re-read and compared, so that two breakers cannot remove a fresh lock. ``release()``
    removes the file only if it still holds our token, never raises and returns a problem
    (a :class:`~fvconsole.core.shared.reasons.Reason`, or None); the context manager releases in every path. ``step(label)`` is called
    before every file-system operation (the migration passes its test-only fault hook).
``FileLock.probe(break_stale=False)`` → :class:`LockProbe`
    Read-only: the refusal or note that ``acquire`` would give now (dry runs never lock).
``LockBusy(subject, what, path, holder, hint)``
    The refusal (FvError, exit 1): ``"<subject>: <what> (pid P on host H since T; lock file
    L)<hint>"``; ``holder`` and ``path`` stay available for JSON output.
``wait_for(attempt, wait)``
    Generic polling with back-off: calls ``attempt()`` until it returns something other
    than None or ``wait`` seconds have passed (always at least once).

``OwnerLock`` / ``lock_open_file``
    OFD write locks: the evictor's one lock per cache root (a file inside it, dropped by the
    kernel when its holder dies, so never stale) and the journal's append lock.
``RootLock(root, kind, command=None)``
    The evictor's whole lock: an ``OwnerLock`` inside the root composed with a
    :class:`HolderRecord` beside it (``RootLockKind`` names both files and words the refusals);
    ``acquire(wait)`` → :class:`LockState`, ``release()``, ``RootLock.probe(root, kind)`` for dry runs.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shlex
import stat
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from fvconsole.core.shared import reasons
from fvconsole.core.shared.atomic import fsync_dir, write_all
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.host import (
    HostIdentity,
    current_identity,
    host_label,
    pid_alive,
    process_start_time,
    user_name,
)
from fvconsole.core.shared.humanize import utc_text
from fvconsole.core.shared.interrupts import deferred
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.terminal_text import printable
from fvconsole.core.shared.untrusted import MAX_EPOCH, MAX_PID, Fields, UntrustedError, decode
from fvconsole.core.shared.walk import listing

T = TypeVar("T")
LOCK_FORMAT = "fvconsole-lock/v1"
#: A lock file is a few hundred bytes; anything larger is not ours.
MAX_LOCK_BYTES = 64 << 10
_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}


# --------------------------------------------------------------------------- holder


class Liveness(Enum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Judgement:
    """Whether a holder still runs, as far as this process can tell, and why."""

    state: Liveness
    reason: str


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: enough to find the process again, and to tell a human."""

    host: str
    boot_id: str
    pidns: int
    pid: int
    start_time: int | None
    user: str
    since: float
    command: str
    token: str

    @classmethod
    def current(cls, command: str | None = None) -> Holder:
        me = current_identity()
        pid = os.getpid()
        return cls(
            host=me.hostname,
            boot_id=me.boot_id,
            pidns=me.pidns,
            pid=pid,
            start_time=process_start_time(pid),
            user=user_name(),
            since=time.time(),
            command=command if command is not None else shlex.join(sys.argv)[:1000],
            token=secrets.token_hex(16),
        )

    @property
    def identity(self) -> HostIdentity:
        return HostIdentity(self.host, self.boot_id, self.pidns)

    @property
    def since_text(self) -> str:
        return utc_text(self.since)

    def describe(self) -> str:
        """``pid P on host H since T`` (user, command: see ``to_json``), safe to print."""
        return f"pid {self.pid} on host {printable(self.host)} since {self.since_text}"

    def judge(self, me: HostIdentity | None = None) -> Judgement:
        """Provably dead only for the holder's own identity; otherwise alive or unknown."""
        me = me or current_identity()
        host = printable(self.host)
        if self.identity == me:
            if pid_alive(self.pid, self.start_time):
                return Judgement(Liveness.ALIVE, f"pid {self.pid} is still running on this host")
            now = process_start_time(self.pid)
            if now is not None:
                return Judgement(Liveness.DEAD, f"pid {self.pid} is now another process (it started at another time)")
            return Judgement(Liveness.DEAD, f"pid {self.pid} is no longer running on this host")
        if me.same_machine(self.identity):
            return Judgement(Liveness.UNKNOWN, f"it runs in another PID namespace (container) on this host ({host})")
        if me.hostname == self.host:
            return Judgement(Liveness.UNKNOWN, f"it runs on host {host} under another boot id "
                                               "(rebooted since, or another machine with that name)")
        return Judgement(Liveness.UNKNOWN, f"it runs on another host ({host})")

    def to_json(self) -> dict[str, Any]:
        # Hand-written: the lock file's record format (`format`, `since` and `since_epoch`), read back by from_json.
        return {
            "format": LOCK_FORMAT,
            "host": self.host,
            "boot_id": self.boot_id,
            "pidns": self.pidns,
            "pid": self.pid,
            "start_time": self.start_time,
            "user": self.user,
            "since": self.since_text,
            "since_epoch": self.since,
            "command": self.command,
            "token": self.token,
        }

    @classmethod
    def from_json(cls, data: Any, shown: str = "lock", what: str = "holder record") -> Holder:
        """The holder a record names; UntrustedError (a ValueError) naming the field when it is damaged.

        Numbers are range-checked: a pid beyond pid_t made ``os.kill`` raise OverflowError, a
        ``since_epoch`` of ``1e400`` made the refusal's date fail (an internal error, not the
        "another ... holds the lock" refusal). A pid of 0 or below would signal a process group.
        """
        f = Fields(data, shown, what)
        return cls(f.str("host"), f.str("boot_id"), f.int("pidns"), f.int("pid", min=1, max=MAX_PID),
                   f.int("start_time", None), f.str("user"), f.number("since_epoch", max=MAX_EPOCH),
                   f.str("command"), f.str("token"))


def _after(exc: Exception, path: str) -> str:
    """The problem without the leading "<path>: " (the refusal names the file itself)."""
    text = str(exc)
    return text[len(path) + 2:] if text.startswith(path + ": ") else text


def read_holder(path: str) -> Holder:
    """The holder recorded in lock file ``path`` (FileNotFoundError if none; ValueError if damaged)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("it is a symlink") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("it is not a regular file")
        data = handle.read(MAX_LOCK_BYTES + 1)
    if len(data) > MAX_LOCK_BYTES:
        raise ValueError(f"larger than {MAX_LOCK_BYTES} bytes")
    if not data:
        raise ValueError("it is empty")
    try:
        return Holder.from_json(decode(data, path, "lock record"), path, "lock record")
    except UntrustedError as exc:
        raise ValueError(f"not an fvconsole lock ({_after(exc, path)})") from None


def record_bytes(holder: Holder) -> bytes:
    """The bytes of a holder record (a lock file, or a record beside a locked directory)."""
    return (json.dumps(holder.to_json(), indent=2, sort_keys=True) + "\n").encode("utf-8")


def temp_record_path(path: str, identity: HostIdentity) -> str:
    """A unique temp name beside record ``path`` that says which identity and pid wrote it."""
    return f"{path}.{identity.key}-{os.getpid()}-{secrets.token_hex(4)}.tmp"


def clean_dead_temps(path: str, step: Callable[[str], None] | None = None) -> None:
    """Remove temp records of ``path`` (:func:`temp_record_path`) written by this identity's dead runs:
    a writer killed between create and rename (or link) leaves one."""
    parent, name = os.path.split(path)
    key = current_identity().key
    pattern = re.compile(rf"^{re.escape(name)}\.{re.escape(key)}-(\d+)-[0-9a-f]+\.tmp$")
    try:
        with listing(parent) as listed:
            names = [item.name for item in listed]
    except OSError:
        return
    for entry in names:
        match = pattern.match(entry)
        if match and not pid_alive(int(match.group(1))):
            if step is not None:
                step(f"unlink {os.path.join(parent, entry)}")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(parent, entry))


class HolderRecord:
    """An advisory holder record at ``path``: who holds a lock that cannot say so itself (an OFD lock).

    Published whole (a temp file of this identity, then rename: readers see a whole record or
    none), read back through the untrusted decoder (:func:`read_holder`), removed only while it
    still names its writer. The lock excludes; the record only names the holder in a refusal.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.written: Holder | None = None

    def read(self) -> Holder:
        """The holder it names (FileNotFoundError if none; ValueError if damaged)."""
        return read_holder(self.path)

    def live(self) -> Holder | None:
        """The holder it names, unless it is missing, damaged or provably dead."""
        try:
            holder = self.read()
        except (OSError, ValueError):
            return None
        return None if holder.judge().state is Liveness.DEAD else holder

    def problem(self) -> str | None:
        """Why it names no holder when it exists but is damaged (None: absent or usable)."""
        try:
            self.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            return exc.strerror or str(exc)
        except ValueError as exc:
            return str(exc)
        return None

    def publish(self, holder: Holder) -> str | None:
        """Write ``holder`` in place of whatever record is there; a problem (the lock still holds) or None."""
        tmp = temp_record_path(self.path, holder.identity)
        clean_dead_temps(self.path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                write_all(fd, record_bytes(holder))
            finally:
                os.close(fd)
            os.rename(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return f"{self.path}: cannot write the holder record ({exc.strerror}); the lock still holds"
        self.written = holder
        return None

    def withdraw(self) -> str | None:
        """Remove the record if it is still the one :meth:`publish` wrote (call it while still locked,
        so it is never a successor's); a problem or None. Never raises."""
        holder, self.written = self.written, None
        if holder is None:
            return None
        try:
            if self.read().token == holder.token:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            return f"{self.path}: cannot remove the holder record ({exc}); it is ignored once this process is gone"
        return None


# --------------------------------------------------------------------------- refusals


class LockBusy(FvError):
    """Someone else holds the lock: exit 1, one line naming the holder and the lock file.

    ``code`` (a ``lock.*`` code of :mod:`fvconsole.core.shared.reasons`) says why it is not taken;
    ``values`` are what that code names beyond the subject, the holder and the lock file;
    ``who`` replaces the holder description when there is no holder record; ``field`` is the
    request field the refusal concerns (a migration's ``output_dir``).
    """

    def __init__(self, subject: str, what: str, path: str | None, holder: Holder | None,
                 code: str = "lock.alive", *, who: str | None = None, field: str = "lock", **values: Any) -> None:
        if who is None:
            where = f"lock file {path}" if path else ""
            who = "; ".join(p for p in ((holder.describe() if holder else ""), where) if p)
            who = f" ({who})" if who else ""
        why = reasons.reason(code, field, subject=subject, what=what, who=who, **values)
        super().__init__(why.cli, details={"lock": {"path": path, "holder": holder.to_json() if holder else None}},
                         reason=why)
        self.holder = holder
        self.path = path


@dataclass(frozen=True)
class LockProbe:
    """What acquiring would do now, found without writing: refuse, or go ahead (maybe with a note)."""

    #: Why acquiring would be refused (None: it would not).
    reason: Reason | None = None
    #: What acquiring would do beside taking the lock (take over or break a stale one).
    note_reason: Reason | None = None
    holder: Holder | None = None

    @property
    def refusal(self) -> str | None:
        """The refusal in the command line's words."""
        return None if self.reason is None else self.reason.cli

    @property
    def note(self) -> str | None:
        """The note in the command line's words."""
        return None if self.note_reason is None else self.note_reason.cli


def wait_for(
    attempt: Callable[[], T | None], wait: float, *, interval: float = 0.05, max_interval: float = 1.0
) -> T | None:
    """``attempt()`` until it returns non-None or ``wait`` seconds passed (at least one call)."""
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        result = attempt()
        if result is not None:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(interval, remaining))
        interval = min(interval * 2, max_interval)


# --------------------------------------------------------------------------- lock file


class FileLock:
    """An exclusive lock file beside the directory it protects; see the module docstring."""

    def __init__(
        self,
        path: str,
        *,
        subject: str,
        what: str = "another run holds the lock",
        step: Callable[[str], None] | None = None,
        holder: Holder | None = None,
        field: str = "lock",
    ) -> None:
        self.path = os.path.abspath(path)
        self.parent = os.path.dirname(self.path)
        self.subject = subject
        self.what = what
        #: The request field its refusals concern, the same for the probe and acquire.
        self.field = field
        self._step = step or (lambda label: None)
        self._holder = holder
        self.held: Holder | None = None
        #: What the last :meth:`acquire` did beside taking the lock (a stale lock taken over or broken).
        self.notes: tuple[Reason, ...] = ()

    # ---------------------------------------------------------------- judging

    def probe(self, *, break_stale: bool = False) -> LockProbe:
        """Read-only: the refusal (or the note) :meth:`acquire` would give right now."""
        try:
            holder = read_holder(self.path)
        except (FileNotFoundError, NotADirectoryError):  # no lock (or no parent dir yet)
            return LockProbe()
        except (OSError, ValueError) as exc:
            damaged = self._damaged(exc)
            return LockProbe(reason=damaged.reason)
        judgement = holder.judge()
        code = _takeover_code(judgement, break_stale)
        if code is not None:
            note = reasons.reason(code, "lock", file=self.path, holder=holder.describe(), why=judgement.reason)
            return LockProbe(note_reason=note, holder=holder)
        busy = self._busy(holder, judgement, break_stale)
        return LockProbe(reason=busy.reason, holder=holder)

    def _busy(self, holder: Holder, judgement: Judgement, break_stale: bool) -> LockBusy:
        if judgement.state is Liveness.ALIVE:
            code = "lock.alive_not_broken" if break_stale else "lock.alive"
        else:  # DEAD is always taken over, UNKNOWN with break_stale: only UNKNOWN is refused here
            code = "lock.unknown"
        return LockBusy(self.subject, self.what, self.path, holder, code, why=judgement.reason, file=self.path,
                        field=self.field)

    def _damaged(self, exc: BaseException) -> LockBusy:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return LockBusy(self.subject, self.what, None, None, "lock.damaged", why=why, file=self.path,
                        field=self.field)

    # ---------------------------------------------------------------- acquire / release

    def acquire(self, *, wait: float = 0.0, break_stale: bool = False) -> list[str]:
        """Take the lock or raise :class:`LockBusy`; returns notes (a stale lock taken over or broken) in the
        command line's words, and keeps them as reasons in ``notes``."""
        if self.held is not None:
            raise RuntimeError(f"{self.path}: lock already held by this object")
        holder = self._holder or Holder.current()
        notes: list[Reason] = []
        refusal: list[FvError] = []
        try:
            clean_dead_temps(self.path, self._step)

            def attempt() -> bool | None:
                refusal.clear()
                for _ in range(3):  # the lock may vanish between our create and our read
                    if self._create(holder):
                        return True
                    try:
                        current = read_holder(self.path)
                    except FileNotFoundError:
                        continue
                    except (OSError, ValueError) as exc:
                        refusal.append(self._damaged(exc))
                        return None
                    judgement = current.judge()
                    code = _takeover_code(judgement, break_stale, done=True)
                    if code is not None:
                        if self._break(current):
                            notes.append(reasons.reason(code, "lock", file=self.path, holder=current.describe(),
                                                        why=judgement.reason))
                        continue
                    refusal.append(self._busy(current, judgement, break_stale))
                    return None
                return None

            taken = wait_for(attempt, wait)
        except OSError as exc:
            raise FvError.of(reasons.reason("lock.cannot_take", self.field, subject=self.subject, file=self.path,
                                            why=exc.strerror or exc)) from None
        if not taken:
            raise refusal[0] if refusal else LockBusy(self.subject, self.what, self.path, None, "lock.changing",
                                                      field=self.field)
        self.held = holder
        self.notes = tuple(notes)
        return [n.cli for n in notes]

    def release(self) -> Reason | None:
        """Remove the lock file if it is still ours; returns a problem for the operator, never raises."""
        holder, self.held = self.held, None
        if holder is None:
            return None
        try:
            current = read_holder(self.path)
        except FileNotFoundError:
            return reasons.invalid("lock", f"{self.path}: the lock file had already been removed (by hand?)")
        except (OSError, ValueError) as exc:
            return reasons.invalid("lock", f"{self.path}: cannot read the lock file before removing it ({exc}); "
                                           "remove it by hand")
        if current.token != holder.token:
            return reasons.invalid("lock", f"{self.path}: the lock file now belongs to {current.describe()}; left in place")
        try:
            self._step(f"unlink {self.path}")
            os.unlink(self.path)
        except OSError as exc:
            return reasons.invalid("lock", f"{self.path}: cannot remove the lock file ({exc.strerror}); remove it by hand")
        with contextlib.suppress(OSError):
            self._fsync_parent()
        return None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ---------------------------------------------------------------- file operations

    def _create(self, holder: Holder) -> bool:
        """Make ``path`` hold ``holder``'s JSON, whole, unless it exists. True if we made it."""
        data = record_bytes(holder)
        tmp = temp_record_path(self.path, holder.identity)
        self._step(f"create {tmp}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            self._step(f"write {tmp}")
            write_all(fd, data)
            self._step(f"fsync {tmp}")
            os.fsync(fd)
            self._step(f"link {tmp} -> {self.path}")
            try:
                os.link(tmp, self.path)
                made = True
            except OSError as exc:
                # NFS may report failure for a link that was made: the temp's link count tells.
                made = os.fstat(fd).st_nlink == 2
                if not made and exc.errno in _NO_HARDLINKS:
                    made = self._create_direct(data)
                elif not made and exc.errno != errno.EEXIST:
                    raise
        finally:
            os.close(fd)
            self._step(f"unlink {tmp}")
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if made:
            self._fsync_parent()
        return made

    def _create_direct(self, data: bytes) -> bool:
        """Filesystems without hard links: ``O_CREAT|O_EXCL``, write, fsync."""
        self._step(f"create {self.path}")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            return False
        try:
            write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise
        finally:
            os.close(fd)
        return True

    def _break(self, judged: Holder) -> bool:
        """Remove the lock of ``judged`` (provably dead). False if the lock turned out to be another's."""
        aside = temp_record_path(self.path, current_identity())
        self._step(f"rename {self.path} -> {aside}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        try:
            moved: Holder | None = read_holder(aside)
        except (OSError, ValueError):
            moved = None
        if moved is not None and moved.token == judged.token:
            self._step(f"unlink {aside}")
            os.unlink(aside)
            self._fsync_parent()
            return True
        # Someone took the lock between our judgement and the rename: give it back unchanged.
        try:
            os.link(aside, self.path)
        except OSError:
            raise FvError.of(reasons.reason("lock.moved", self.field, subject=self.subject, aside=aside,
                                            file=self.path)) from None
        os.unlink(aside)
        return False

    def _fsync_parent(self) -> None:
        self._step(f"fsync {self.parent}")
        fsync_dir(self.parent)


def _takeover_code(judgement: Judgement, break_stale: bool, *, done: bool = False) -> str | None:
    """The note's code when a lock so judged is taken over (``done``: it was), else None (refused).

    Provably dead: always. Unknown (another host, container or boot): only on the operator's
    word (``break_stale``). Alive: never.
    """
    if judgement.state is Liveness.DEAD:
        return "lock.took_over" if done else "lock.will_take_over"
    if judgement.state is Liveness.UNKNOWN and break_stale:
        return "lock.broke" if done else "lock.will_break"
    return None


# --------------------------------------------------------------------------- write locks on a file
#
# The lock of a directory that only its owner may change (a cache root): an OFD write lock
# (``F_OFD_SETLK``, F_WRLCK) on a lock file inside it. Taking it needs the file open for
# writing, so a user who can only read the directory cannot take it, and the kernel drops it
# when its holder dies however it dies (no stale lock to break). The file exists only while
# held: its holder unlinks it before unlocking, and a taker re-checks after locking that the
# name still is the inode it locked (else it locked an unlinked file and tries again).

#: ``struct flock`` (Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid).
_FLOCK = "hhxxxxqqixxxx"
#: ``/proc/<pid>/fd`` entries read when looking for a lock's holder (only for a refusal message).
MAX_FDS_SCANNED = 200_000


class LockFileRefused(FvError):
    """The lock file cannot be opened for writing, or is not a regular file: exit 1, naming it."""


def _ofd(fd: int, cmd: int, kind: int) -> tuple[int, int]:
    import fcntl

    raw = fcntl.fcntl(fd, cmd, struct.pack(_FLOCK, kind, os.SEEK_SET, 0, 0, 0))
    got_kind, _, _, _, pid = struct.unpack(_FLOCK, raw)
    return got_kind, pid


def _ofd_setlk(fd: int) -> bool:
    """True when the OFD write lock on ``fd`` is taken; False when someone else holds it."""
    import fcntl

    try:
        _ofd(fd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


class OwnerLock:
    """An exclusive OFD write lock on lock file ``name`` in the directory open as ``dir_fd``.

    The directory is held by its fd, so a rename of it meanwhile changes nothing; ``path`` is
    the lock file's name for messages (see the comment above).

    ``try_acquire()``: True when taken, False when another open file description holds it;
    raises :class:`LockFileRefused` for a lock file this user cannot write (planted by
    another user, a symlink, not a regular file) and OSError (``errno``) when this
    filesystem cannot lock. ``release()`` unlinks the file and unlocks; never raises.
    ``fd`` is the open lock file while held (the holder may keep a record in it).
    """

    def __init__(self, dir_fd: int, name: str, *, path: str, subject: str) -> None:
        self.dir_fd = dir_fd
        self.name = name
        self.path = path
        self.subject = subject
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        if self.fd is not None:
            raise RuntimeError(f"{self.path}: lock already held by this object")
        for _ in range(16):  # the holder unlinked the file just as we opened it: try the new one
            fd = self._open()
            try:
                taken = _ofd_setlk(fd)
                if taken and not self._still_named(fd):
                    os.close(fd)
                    continue
            except BaseException:
                os.close(fd)
                raise
            if not taken:
                os.close(fd)
                return False
            self.fd = fd
            return True
        return False

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.name, flags, 0o644, dir_fd=self.dir_fd)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EROFS):
                raise LockFileRefused(self._refusal(exc)) from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise LockFileRefused(f"{self.subject}: the lock file {self.path} is not a regular file; "
                                  f"remove it once no fvconsole run uses it")
        return fd

    def _refusal(self, exc: OSError) -> str:
        try:
            st = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except OSError:
            st = None
        if exc.errno == errno.EROFS:
            return f"{self.subject}: cannot create the lock file {self.path}: read-only filesystem"
        if st is not None and stat.S_ISLNK(st.st_mode):
            return f"{self.subject}: the lock file {self.path} is a symlink; remove it once no fvconsole run uses it"
        if st is not None and not stat.S_ISREG(st.st_mode):
            return f"{self.subject}: the lock file {self.path} is not a regular file; remove it once no fvconsole run uses it"
        if st is not None:
            return (f"{self.subject}: the lock file {self.path} belongs to {_owner(st.st_uid)} and is not writable "
                    f"by {user_name()}: only who can write it may take the lock; its owner (or root) can remove it")
        return (f"{self.subject}: cannot create the lock file {self.path} ({exc.strerror}): only a user who can write "
                f"there may take the lock")

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if self._still_named(fd):
                os.unlink(self.name, dir_fd=self.dir_fd)  # still locked: a taker of this inode sees it unnamed
        os.close(fd)  # the last fd of the open file description: the OFD lock goes

    def _still_named(self, fd: int) -> bool:
        try:
            named = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        st = os.fstat(fd)
        return (named.st_dev, named.st_ino) == (st.st_dev, st.st_ino)


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def is_write_locked(path: str) -> bool | None:
    """Read-only: does someone hold a write lock on lock file ``path``? None when it cannot be told."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        kind, _ = _ofd(fd, fcntl.F_OFD_GETLK, fcntl.F_WRLCK)
        return kind != fcntl.F_UNLCK
    except OSError:
        return None
    finally:
        os.close(fd)


def lock_holder_pids(path: str) -> tuple[list[int], bool]:
    """PIDs, as *this* PID namespace numbers them, that hold a write lock on lock file ``path``.

    An OFD lock has no owning process (``/proc/locks`` shows pid -1), so the holders are the
    processes that have the file open (:mod:`fvconsole.core.shared.process_use`, the door to
    ``/proc/<pid>/fd``) and whose ``/proc/<pid>/fdinfo`` lists a write lock on it; a process
    of a namespace this one cannot see is not found. Returns (pids, complete): ``complete``
    is False when the process check was partial. Only for a refusal message.
    """
    from fvconsole.core.shared.process_use import scan_processes

    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return [], False
    use = scan_processes()
    candidates = sorted({h.pid for h in use.by_inode.get((st.st_dev, st.st_ino), ()) if h.how == "open"})
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino} "
    found = [pid for pid in candidates[:64] if _holds_write_lock(pid, wanted)]
    return found, use.partial is None


def _holds_write_lock(pid: int, wanted: str) -> bool:
    """Whether one of ``pid``'s open files holds a write lock on the inode ``wanted`` names (``/proc/locks`` form)."""
    base = f"/proc/{pid}/fdinfo"
    try:
        names = os.listdir(base)
    except OSError:
        return False
    for name in names[:MAX_FDS_SCANNED]:
        try:
            with open(f"{base}/{name}", "rb") as handle:
                info = handle.read(1 << 16).decode("ascii", "replace")
        except OSError:
            continue
        if any(line.startswith("lock:") and " WRITE " in line and wanted in line for line in info.splitlines()):
            return True
    return False


# --------------------------------------------------------------------------- a root's lock and its holder record


@dataclass(frozen=True)
class RootLockKind:
    """Which lock of a root (the evictor's) and how its refusals word it.

    ``name``: the lock file ``.<name>.lock`` inside the root and the holder record
    ``.<root's name>.<name>`` beside it; ``noun``: what the root is called in a refusal;
    ``busy`` and ``code``: the refusal when another run holds it (``code`` + ``_waited`` after
    a ``--wait``); ``unguarded``: what is not excluded where the filesystem cannot lock.
    """

    name: str
    noun: str
    busy: str
    code: str
    unguarded: str

    @property
    def lock_name(self) -> str:
        """The lock file's name inside the root (a regular file: listings of the root skip it)."""
        return f".{self.name}.lock"

    def lock_file(self, real_root: str) -> str:
        """The lock file: inside the root, writable only by who can write the root."""
        return os.path.join(real_root, self.lock_name)

    def record(self, real_root: str) -> str:
        """Where the holder describes itself: beside the root, never inside."""
        parent, base = os.path.split(real_root.rstrip(os.sep) or os.sep)
        return os.path.join(parent, f".{base}.{self.name}")


@dataclass(frozen=True)
class LockState:
    """How a run holds its root: whether exclusion is in force, how long it waited, and notes."""

    held: bool
    waited: float
    problem: str | None = None  # why it runs without exclusion (held False): worth a warning
    record_problem: str | None = None  # the holder record could not be written (the lock still holds)
    took_over: str | None = None  # the record of a holder that died, replaced: a warning and a journal note

    def to_json(self) -> dict[str, object]:
        return fields_json(self, omit=("waited",), waited_seconds=round(self.waited, 3))


#: Lock errors meaning "this filesystem cannot lock this file" (NFS without a lock manager: ENOLCK).
_UNSUPPORTED = {errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS}


class RootLock:
    """One run at a time in a root many runs act in: an OFD write lock on a file inside the root,
    plus a holder record beside it (a context manager).

    Why this shape (the evictor's, docs/formats.md §6): a cron job, a Slurm epilog and an
    operator may all evict one node-local root. Taking an OFD write lock (:class:`OwnerLock`)
    needs the lock file open for writing, so only a user who can write the root can take it (a
    user who can merely read it cannot block its evictor, as anyone could with a ``flock`` of
    the directory); the kernel drops it when its holder dies however it dies; it is taken on the
    root's real path, so two spellings of one root (a symlink) are one lock. The lock file is a
    regular *file* (FastVideo's GC counts only child directories) and exists only while held. A
    lock file another user planted that this one cannot write is a refusal naming its owner.

    On NFS the lock may be unsupported: the run then goes ahead *without* exclusion and says so
    (``LockState.problem``, ``held: false``) rather than refusing every run in that root.

    The lock cannot say who holds it, so the holder writes a :class:`HolderRecord` beside the
    root and withdraws it before unlocking. The record is advisory, only for the refusal; a
    record left by a holder that died is taken over with a note (it is the lock that excludes).
    Without a usable record the holder's pid is found from ``/proc/*/fdinfo``; a holder in
    another PID namespace is named with the pid this namespace sees, or said to be in another
    PID namespace. When the parent is not writable there is no record, and the lock still excludes.

    ``acquire(wait)`` waits up to ``wait`` seconds (polling, never blocking in the kernel, so a
    console thread stays cancellable) and raises :class:`LockBusy` naming the holder, or FvError
    when the root cannot be opened; ``release()`` never raises. Dry runs only :meth:`probe`.
    """

    def __init__(self, root: str, kind: RootLockKind, *, command: str | None = None) -> None:
        self.root = os.path.abspath(root)
        self.real_root = os.path.realpath(self.root)
        self.kind = kind
        self.record = kind.record(self.real_root)
        self._record = HolderRecord(self.record)
        self._command = command
        self._fd: int | None = None
        self._lock: OwnerLock | None = None
        self.state: LockState | None = None

    @staticmethod
    def probe(root: str, kind: RootLockKind) -> Holder | None:
        """Read-only: the holder of ``root``'s lock as its record tells, if one is running.

        For dry runs and the console's preview: takes no lock, so a preview can never make a
        real run wait or be refused.
        """
        real = os.path.realpath(os.path.abspath(root))
        holder = HolderRecord(kind.record(real)).live()
        if holder is not None and is_write_locked(kind.lock_file(real)) is False and holder.identity.same_machine(
                current_identity()):
            return None  # its record survived, but this machine shows no such lock: not running
        return holder

    def acquire(self, wait: float = 0.0) -> LockState:
        """Take the lock (see the class docstring)."""
        if self._fd is not None:
            raise RuntimeError(f"{self.root}: lock already held by this object")
        noun = self.kind.noun
        try:
            dir_fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FvError(f"{self.root}: {noun} does not exist") from None
        except NotADirectoryError:
            raise FvError(f"{self.root}: {noun} is not a directory") from None
        except OSError as exc:
            raise FvError(f"{self.root}: cannot open {noun} ({exc.strerror})") from None
        lock_file = self.kind.lock_file(self.real_root)
        lock = OwnerLock(dir_fd, os.path.basename(lock_file), path=lock_file, subject=self.root)
        started = time.monotonic()
        unsupported: list[OSError] = []

        def attempt() -> bool | None:
            try:
                return True if lock.try_acquire() else None
            except LockFileRefused:
                raise
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
                unsupported.append(exc)
                return False

        try:
            taken = wait_for(attempt, wait)  # a signal while waiting ends the wait (see below)
            with deferred():  # the record is written whole and known as ours before a signal acts
                if taken is not None:
                    self._lock, self._fd = lock, dir_fd
                if taken:
                    took_over = self._stale_record_note()
                    self.state = LockState(True, time.monotonic() - started, None,
                                           self._record.publish(Holder.current(self._command)), took_over)
        except LockFileRefused:
            os.close(dir_fd)
            raise
        except OSError as exc:
            lock.release()
            os.close(dir_fd)
            raise FvError(f"{self.root}: cannot lock {noun} ({exc.strerror})") from None
        except BaseException:  # interrupted while waiting or writing the record: the lock goes
            if self._fd is None:
                lock.release()
                os.close(dir_fd)
            raise
        waited = time.monotonic() - started
        if taken is None:
            os.close(dir_fd)
            raise self.busy(wait)
        if taken is False:
            why = unsupported[0].strerror or str(unsupported[0])
            self.state = LockState(False, waited, f"cannot lock the root on this filesystem ({why}; NFS?): "
                                                  f"{self.kind.unguarded}")
        return self.state

    def _stale_record_note(self) -> str | None:
        """A record left beside the root although we hold the lock: its holder died (or lost it) without removing it."""
        try:
            left = self._record.read()
        except (OSError, ValueError):
            return None
        return f"{self.record}: took over from {left.describe()}: {left.judge().reason}"

    def busy(self, wait: float) -> LockBusy:
        """The refusal: who holds the lock, as far as can be told."""
        code, waited = (f"{self.kind.code}_waited", {"wait": f"{wait:g}"}) if wait > 0 else (self.kind.code, {})
        holder = self._record.live()
        pids, _ = lock_holder_pids(self.kind.lock_file(self.real_root))
        if holder is not None:
            me = current_identity()
            if holder.identity != me and me.same_machine(holder.identity):
                return LockBusy(self.root, self.kind.busy, None, holder, code,
                                who=f" ({_other_namespace(holder, pids)})", **waited)
            return LockBusy(self.root, self.kind.busy, None, holder, code, **waited)
        damaged = self._record.problem()
        record = f"its holder record {self.record} is damaged: {damaged}" if damaged else "it left no holder record"
        if pids:
            who = f" (pid {pids[0]} on host {host_label(current_identity().hostname)}; {record})"
        else:
            who = f" ({record})" if damaged else ""
        return LockBusy(self.root, self.kind.busy, None, None, code, who=who, **waited)

    def release(self) -> str | None:
        """Withdraw our record (still under the lock, so never a successor's), then unlock. Never raises."""
        fd, self._fd = self._fd, None
        if fd is None:
            return None
        problem = self._record.withdraw()
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()  # unlinks the lock file, then the last close drops the OFD lock
        os.close(fd)
        return problem

    def __enter__(self) -> RootLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _other_namespace(holder: Holder, pids: list[int]) -> str:
    """The holder of another PID namespace on this machine, by the pid this namespace sees if it can."""
    since = f"on host {host_label(holder.host)} since {holder.since_text}"
    if len(pids) == 1:
        return f"pid {pids[0]} here, pid {holder.pid} in its own PID namespace, {since}"
    return f"pid {holder.pid} in another PID namespace, {since}"


# --------------------------------------------------------------------------- brief locks on an open file


def lock_open_file(fd: int, wait: float) -> bool:
    """An exclusive POSIX lock (``lockf``) on open file ``fd``, waited for up to ``wait`` s.

    For appends by several processes to one file (the journal): False when it could not be
    had in time, or this filesystem cannot lock (ENOLCK ...): the caller then goes ahead
    without it (an ``O_APPEND`` write alone), never hangs on a broken lock manager.
    """
    import fcntl

    def attempt() -> bool | None:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):
            return None
        except OSError:
            return False
        return True

    return bool(wait_for(attempt, wait))


def unlock_open_file(fd: int) -> None:
    """Drop :func:`lock_open_file`'s lock (never raises)."""
    import fcntl

    with contextlib.suppress(OSError):
        fcntl.lockf(fd, fcntl.LOCK_UN)
