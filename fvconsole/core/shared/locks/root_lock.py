"""A root's lock: :class:`RootLock`, an OFD write lock inside the root composed with a holder record beside it.

The evictor's one lock per cache root (``core/cache/roots.py: EVICTOR`` names it): see
:class:`RootLock` for why this shape.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

from fvconsole.core.shared import reasons
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.host import current_identity, host_label
from fvconsole.core.shared.interrupts import deferred
from fvconsole.core.shared.locks.holder import Holder, HolderRecord
from fvconsole.core.shared.locks.interface import Lock, LockBusy, LockProbe, LockState, wait_for
from fvconsole.core.shared.locks.naming import real_directory
from fvconsole.core.shared.locks.owner_lock import (
    LockFileRefused,
    OwnerLock,
    is_write_locked,
    lock_holder_pids,
)
from fvconsole.core.shared.reasons import Reason


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


#: Lock errors meaning "this filesystem cannot lock this file" (NFS without a lock manager: ENOLCK).
_UNSUPPORTED = {errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS}


class RootLock(Lock):
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
        self.real_root = real_directory(self.root)
        self.kind = kind
        self.record = kind.record(self.real_root)
        self._record = HolderRecord(self.record)
        self._command = command
        self._fd: int | None = None
        self._lock: OwnerLock | None = None
        self.state: LockState | None = None

    def probe(self, *, break_stale: bool = False) -> LockProbe:
        """Read-only: the eviction running in the root now, as its record tells, and the refusal
        :meth:`acquire` would give without waiting (``break_stale`` changes nothing: the kernel drops
        an OFD lock with its holder, so it is never stale).

        For dry runs and the console's preview: takes no lock, so a preview can never make a
        real run wait or be refused.
        """
        holder = self._record.live()
        locked = is_write_locked(self.kind.lock_file(self.real_root))
        if holder is not None and locked is False and holder.identity.same_machine(current_identity()):
            holder = None  # its record survived, but this machine shows no such lock: not running
        if holder is None and not locked:
            return LockProbe()
        return LockProbe(reason=self.busy(0.0).reason, holder=holder)

    def _refused(self, code: str, **values: object) -> FvError:
        return FvError.of(reasons.reason(code, "lock", subject=self.root, noun=self.kind.noun, **values))

    def acquire(self, wait: float = 0.0, *, break_stale: bool = False) -> LockState:
        """Take the lock (see the class docstring); ``break_stale`` changes nothing (see :meth:`probe`)."""
        if self._fd is not None:
            raise RuntimeError(f"{self.root}: lock already held by this object")
        try:
            dir_fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise self._refused("lock.root_missing") from None
        except NotADirectoryError:
            raise self._refused("lock.root_not_dir") from None
        except OSError as exc:
            raise self._refused("lock.root_unopenable", why=exc.strerror) from None
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
                                           self._record.publish(Holder.current(self._command)), notes=took_over)
        except LockFileRefused:
            os.close(dir_fd)
            raise
        except OSError as exc:
            lock.release()
            os.close(dir_fd)
            raise self._refused("lock.root_unlockable", why=exc.strerror) from None
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
            self.state = LockState(False, waited, reasons.reason("lock.unsupported", "lock", why=why,
                                                                 unguarded=self.kind.unguarded))
        return self.state

    def _stale_record_note(self) -> tuple[Reason, ...]:
        """A record left beside the root although we hold the lock: its holder died (or lost it) without removing it."""
        try:
            left = self._record.read()
        except (OSError, ValueError):
            return ()
        return (reasons.reason("lock.record_taken_over", "lock", file=self.record, holder=left.describe(),
                               why=left.judge().reason),)

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

    def release(self) -> Reason | None:
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


def _other_namespace(holder: Holder, pids: list[int]) -> str:
    """The holder of another PID namespace on this machine, by the pid this namespace sees if it can."""
    since = f"on host {host_label(holder.host)} since {holder.since_text}"
    if len(pids) == 1:
        return f"pid {pids[0]} here, pid {holder.pid} in its own PID namespace, {since}"
    return f"pid {holder.pid} in another PID namespace, {since}"
