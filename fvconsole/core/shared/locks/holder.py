"""Who holds a lock, and the record that says so: :class:`Holder` and :class:`HolderRecord`.

Why: a PID alone means nothing on a shared filesystem (see :mod:`fvconsole.core.shared.host`),
so every lock records its holder's host identity (hostname, boot id, PID namespace), PID and
process start time (a reused PID is not the holder), user, time and command line. Only a
process of the holder's own identity can prove that the holder is gone (:meth:`Holder.judge`):
``ALIVE``, ``DEAD`` (same identity and the PID is gone, a zombie, or another process with a
different start time) or ``UNKNOWN`` (another host, container or boot). Every kind of lock
(:mod:`.lock_file`, :mod:`.root_lock`, a reader's record in :mod:`.readers`) writes and reads
its holder through this module: one format, one temp naming, one dead-temp cleanup.
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
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from fvconsole.core.shared import reasons
from fvconsole.core.shared.atomic import write_all
from fvconsole.core.shared.host import (
    HostIdentity,
    current_identity,
    pid_alive,
    process_start_time,
    user_name,
)
from fvconsole.core.shared.humanize import utc_text
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.terminal_text import printable
from fvconsole.core.shared.untrusted import MAX_EPOCH, MAX_PID, Fields, UntrustedError, decode
from fvconsole.core.shared.walk import listing

LOCK_FORMAT = "fvconsole-lock/v1"
#: A lock file is a few hundred bytes; anything larger is not ours.
MAX_LOCK_BYTES = 64 << 10


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
    return read_record(path)[0]


def read_record(path: str) -> tuple[Holder, Fields]:
    """The holder a record names, and the record's fields for what a kind adds (a reader's checkpoint).

    FileNotFoundError if there is none; ValueError if it is damaged (not a regular file, too large,
    not an fvconsole record)."""
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
        document = decode(data, path, "lock record")
        return Holder.from_json(document, path, "lock record"), Fields(document, path, "lock record")
    except UntrustedError as exc:
        raise ValueError(f"not an fvconsole lock ({_after(exc, path)})") from None


def record_bytes(holder: Holder, extra: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of a holder record (a lock file, or a record beside a locked directory); ``extra``: the
    fields a kind of record adds to the holder's."""
    return (json.dumps({**holder.to_json(), **(extra or {})}, indent=2, sort_keys=True) + "\n").encode("utf-8")


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

    def publish(self, holder: Holder, extra: Mapping[str, Any] | None = None) -> Reason | None:
        """Write ``holder`` in place of whatever record is there; a problem (the lock still holds) or None."""
        tmp = temp_record_path(self.path, holder.identity)
        clean_dead_temps(self.path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                write_all(fd, record_bytes(holder, extra))
            finally:
                os.close(fd)
            os.rename(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return reasons.reason("lock.record_unwritten", "lock", file=self.path, why=exc.strerror)
        self.written = holder
        return None

    def withdraw(self) -> Reason | None:
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
            return reasons.reason("lock.record_not_removed", "lock", file=self.path, why=exc)
        return None
