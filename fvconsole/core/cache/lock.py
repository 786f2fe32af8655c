"""One evictor per cache root: a write lock on a lock file inside the root, plus a holder record beside it.

Why: a cron job, a Slurm epilog and an operator may all evict the same node-local root, and
two executions at once would plan against the same free space and race entry by entry.
Executions therefore serialise on an exclusive OFD write lock
(:class:`fvconsole.core.shared.locks.OwnerLock`) of ``<root>/.fvconsole-evictor.lock``: taking it
needs the file open for writing, so only a user who can write the cache root can take it (a
user who can merely read the root cannot block its evictor, as anyone could with a
``flock`` of the root directory); the kernel drops it when the holder dies however it dies;
it is taken on the root's real path, so two spellings of one root (a symlink) are one lock.
The lock file is a regular *file* (FastVideo's GC counts only child directories, and
``cache ls`` does not list it) and exists only while held. A lock file another user planted
there that this one cannot write is a clear refusal naming its owner.

On NFS the lock may be unsupported: the eviction then goes ahead *without* exclusion and
says so (a warning, ``lock.held: false`` in JSON) rather than refusing every eviction of
that root.

The lock cannot say who holds it, so the holder also writes a record (a
:class:`~fvconsole.core.shared.locks.Holder`: host identity, pid, start time, user, time, command)
to ``.<root name>.fvconsole-evictor`` in the root's *parent* directory, atomically (temp +
rename), and removes it before unlocking. The record is advisory, only for the refusal
message; a record left by a holder that died is taken over with a note (it is the lock that
excludes). Without a usable record the holder's pid is found from ``/proc/*/fdinfo``; a
holder in another PID namespace is named with the pid this namespace sees, or said to be in
another PID namespace. When the parent is not writable there is no record, and the lock
still excludes.

Dry runs never take the lock (``probe_evictor`` only reads).
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

from fvconsole.core.journal.interrupts import deferred
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.host import current_identity, host_label
from fvconsole.core.shared.locks import (
    Holder,
    HolderRecord,
    LockBusy,
    LockFileRefused,
    OwnerLock,
    is_write_locked,
    lock_holder_pids,
    wait_for,
)

RECORD_SUFFIX = ".fvconsole-evictor"
#: The lock file inside the root (a regular file: FastVideo's GC counts only directories).
LOCK_NAME = ".fvconsole-evictor.lock"
BUSY = "another eviction is running"
#: Lock errors meaning "this filesystem cannot lock this file" (NFS without a lock manager: ENOLCK).
_UNSUPPORTED = {errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS}


def lock_file_path(real_root: str) -> str:
    """The lock file of ``real_root``'s evictor: inside the root, writable only by who can write the root."""
    return os.path.join(real_root, LOCK_NAME)


def record_path(real_root: str) -> str:
    """Where the holder of ``real_root``'s lock describes itself: beside the root, never inside."""
    parent, name = os.path.split(real_root.rstrip(os.sep) or os.sep)
    return os.path.join(parent, f".{name}{RECORD_SUFFIX}")


@dataclass(frozen=True)
class LockState:
    """How an execution holds its root: whether exclusion is in force, how long it waited, and notes."""

    held: bool
    waited: float
    problem: str | None = None  # why it runs without exclusion (held False): worth a warning
    record_problem: str | None = None  # the holder record could not be written (the lock still holds)
    took_over: str | None = None  # the record of a holder that died, replaced: a warning and a journal note

    def to_json(self) -> dict[str, object]:
        return fields_json(self, omit=("waited",), waited_seconds=round(self.waited, 3))


class EvictorLock:
    """The exclusive eviction lock of one cache root (a context manager; see the module docstring).

    ``acquire(wait)`` waits up to ``wait`` seconds (polling, never blocking in the kernel, so
    a console thread stays cancellable) and raises :class:`LockBusy` with the holder, or
    FvError when the root cannot be opened. ``release()`` never raises.
    """

    def __init__(self, root: str, *, command: str | None = None) -> None:
        self.root = os.path.abspath(root)
        self.real_root = os.path.realpath(self.root)
        self.record = record_path(self.real_root)
        self._record = HolderRecord(self.record)
        self._command = command
        self._fd: int | None = None
        self._lock: OwnerLock | None = None
        self.state: LockState | None = None

    def acquire(self, wait: float = 0.0) -> LockState:
        """Take the lock (see the class docstring). Check the root first (``roots.check_root_early``):
        the holder record is written beside the root, which must not be a system directory."""
        if self._fd is not None:
            raise RuntimeError(f"{self.root}: eviction lock already held by this object")
        try:
            dir_fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FvError(f"{self.root}: cache root does not exist") from None
        except NotADirectoryError:
            raise FvError(f"{self.root}: cache root is not a directory") from None
        except OSError as exc:
            raise FvError(f"{self.root}: cannot open cache root ({exc.strerror})") from None
        lock = OwnerLock(dir_fd, LOCK_NAME, path=lock_file_path(self.real_root), subject=self.root)
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
            raise FvError(f"{self.root}: cannot lock cache root ({exc.strerror})") from None
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
                                                  "another eviction of it is not excluded")
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
        code, waited = ("lock.evicting_waited", {"wait": f"{wait:g}"}) if wait > 0 else ("lock.evicting", {})
        holder = self._record.live()
        pids, _ = lock_holder_pids(lock_file_path(self.real_root))
        if holder is not None:
            me = current_identity()
            if holder.identity != me and me.same_machine(holder.identity):
                return LockBusy(self.root, BUSY, None, holder, code, who=f" ({_other_namespace(holder, pids)})",
                                **waited)
            return LockBusy(self.root, BUSY, None, holder, code, **waited)
        damaged = self._record.problem()
        record = f"its holder record {self.record} is damaged: {damaged}" if damaged else "it left no holder record"
        if pids:
            who = f" (pid {pids[0]} on host {host_label(current_identity().hostname)}; {record})"
        else:
            who = f" ({record})" if damaged else ""
        return LockBusy(self.root, BUSY, None, None, code, who=who, **waited)

    def release(self) -> str | None:
        """Remove our record (still under the lock, so never a successor's), then unlock. Never raises."""
        fd, self._fd = self._fd, None
        if fd is None:
            return None
        problem = self._record.withdraw()
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()  # unlinks the lock file, then the last close drops the OFD lock
        os.close(fd)
        return problem

    def __enter__(self) -> EvictorLock:
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


def probe_evictor(root: str) -> Holder | None:
    """Read-only: the holder of ``root``'s eviction lock as its record tells, if one is running.

    For dry runs and the console's preview ("an eviction is running"): takes no lock, so a
    preview can never make a real eviction wait or be refused.
    """
    real = os.path.realpath(os.path.abspath(root))
    holder = HolderRecord(record_path(real)).live()
    if holder is not None and is_write_locked(lock_file_path(real)) is False and holder.identity.same_machine(
            current_identity()):
        return None  # its record survived, but this machine shows no such lock: not running
    return holder
