"""One evictor per cache root: ``flock`` on the root directory, plus a holder record beside it.

Why: a cron job, a Slurm epilog and an operator may all evict the same node-local root, and
two executions at once would plan against the same free space and race entry by entry.
Executions therefore serialise on an exclusive ``flock`` of the root directory's own file
descriptor: it puts no file inside the root (FastVideo's GC counts every child of the root),
the kernel drops it when the holder dies however it dies (no stale lock to break), and it
follows the directory's inode, so two spellings of one root (a symlink) are one lock.

flock is node-local on tmpfs and local disks, which is right for node-local caches. On NFS
the Linux client turns flock into a POSIX lock, which needs a file opened for writing, so on
a directory it fails: the eviction then goes ahead *without* exclusion and says so (a
warning, ``lock.held: false`` in JSON) rather than refusing every eviction of that root.

The lock cannot say who holds it, so the holder also writes a record (a
:class:`~fvconsole.core.locks.Holder`: host identity, pid, start time, user, time, command)
to ``.<root name>.fvconsole-evictor`` in the root's *parent* directory, atomically (temp +
rename), and removes it before unlocking. The record is advisory, only for the refusal
message: a record whose holder is provably dead is ignored, and without a usable record
the holder's pid is read from ``/proc/locks``. When the parent is not writable there is
no record, and the lock still excludes.

Dry runs never take the lock (``probe_evictor`` only reads).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import time
from dataclasses import dataclass

from fvconsole.core.errors import FvError
from fvconsole.core.host import current_identity, host_label, pid_alive
from fvconsole.core.interrupts import deferred
from fvconsole.core.locks import Holder, Liveness, LockBusy, read_holder, wait_for

RECORD_SUFFIX = ".fvconsole-evictor"
BUSY = "another eviction is running"
#: /proc/locks is one line per lock on the whole machine; a few MiB is far beyond any real node.
_PROC_LOCKS_MAX = 4 << 20
#: flock errors meaning "this filesystem cannot lock a directory fd" (NFS: EBADF/ENOLCK).
_UNSUPPORTED = {errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS}


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

    def to_json(self) -> dict[str, object]:
        return {"held": self.held, "waited_seconds": round(self.waited, 3), "problem": self.problem,
                "record_problem": self.record_problem}


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
        self._command = command
        self._fd: int | None = None
        self._holder: Holder | None = None
        self.state: LockState | None = None

    def acquire(self, wait: float = 0.0) -> LockState:
        """Take the lock (see the class docstring). Check the root first (``roots.check_root_early``):
        the holder record is written beside the root, which must not be a system directory."""
        if self._fd is not None:
            raise RuntimeError(f"{self.root}: eviction lock already held by this object")
        try:
            fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FvError(f"{self.root}: cache root does not exist") from None
        except NotADirectoryError:
            raise FvError(f"{self.root}: cache root is not a directory") from None
        except OSError as exc:
            raise FvError(f"{self.root}: cannot open cache root ({exc.strerror})") from None
        started = time.monotonic()
        unsupported: list[OSError] = []

        def attempt() -> bool | None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
                unsupported.append(exc)
                return False
            return True

        try:
            taken = wait_for(attempt, wait)  # a signal while waiting ends the wait (see below)
            with deferred():  # the record is written whole and known as ours before a signal acts
                if taken is not None:
                    self._fd = fd
                if taken:
                    self.state = LockState(True, time.monotonic() - started, None, self._write_record())
        except OSError as exc:
            os.close(fd)
            raise FvError(f"{self.root}: cannot lock cache root ({exc.strerror})") from None
        except BaseException:  # interrupted while waiting: the fd (and any flock on it) goes
            if self._fd is None:
                os.close(fd)
            raise
        waited = time.monotonic() - started
        if taken is None:
            os.close(fd)
            raise self.busy(wait)
        if taken is False:
            why = unsupported[0].strerror or str(unsupported[0])
            self.state = LockState(False, waited, f"cannot lock the root on this filesystem ({why}; NFS?): "
                                                  "another eviction of it is not excluded")
        return self.state

    def busy(self, wait: float) -> LockBusy:
        """The refusal: who holds the lock, as far as can be told."""
        code, waited = ("lock.evicting_waited", {"wait": f"{wait:g}"}) if wait > 0 else ("lock.evicting", {})
        holder = live_record(self.record)
        if holder is not None:
            return LockBusy(self.root, BUSY, None, holder, code, **waited)
        pid = flock_holder_pid(self.real_root)
        damaged = record_problem(self.record)
        record = f"its holder record {self.record} is damaged: {damaged}" if damaged else "it left no holder record"
        if pid:
            who = f" (pid {pid} on host {host_label(current_identity().hostname)}; {record})"
        else:
            who = f" ({record})" if damaged else ""
        return LockBusy(self.root, BUSY, None, None, code, who=who, **waited)

    def _write_record(self) -> str | None:
        """Publish who holds the lock (temp + rename: readers see a whole record or none)."""
        holder = Holder.current(self._command)
        data = (json.dumps(holder.to_json(), sort_keys=True) + "\n").encode("utf-8")
        tmp = f"{self.record}.{holder.identity.key}-{holder.pid}-{secrets.token_hex(4)}.tmp"
        self._clean_dead_temps(holder.identity.key)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.rename(tmp, self.record)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return f"{self.record}: cannot write the holder record ({exc.strerror}); the lock still holds"
        self._holder = holder
        return None

    def _clean_dead_temps(self, key: str) -> None:
        """Temp records of this host identity whose writer died between create and rename (SIGKILL)."""
        parent, name = os.path.split(self.record)
        pattern = re.compile(rf"^{re.escape(name)}\.{key}-(\d+)-[0-9a-f]+\.tmp$")
        try:
            names = os.listdir(parent)
        except OSError:
            return
        for entry in names:
            match = pattern.match(entry)
            if match and not pid_alive(int(match.group(1))):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(parent, entry))

    def release(self) -> str | None:
        """Remove our record (still under the lock, so never a successor's), then unlock. Never raises."""
        fd, self._fd = self._fd, None
        holder, self._holder = self._holder, None
        if fd is None:
            return None
        problem = None
        if holder is not None:
            try:
                current = read_holder(self.record)
                if current.token == holder.token:
                    os.unlink(self.record)
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:
                problem = f"{self.record}: cannot remove the holder record ({exc}); it is ignored once this process is gone"
        os.close(fd)  # closing the last fd of the open file description releases the flock
        return problem

    def __enter__(self) -> EvictorLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def live_record(path: str) -> Holder | None:
    """The holder named in record ``path``, unless it is missing, damaged or provably dead."""
    try:
        holder = read_holder(path)
    except (OSError, ValueError):
        return None
    return None if holder.judge().state is Liveness.DEAD else holder


def record_problem(path: str) -> str | None:
    """Why record ``path`` names no holder, when it exists but is damaged (None: absent or usable)."""
    try:
        read_holder(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    except ValueError as exc:
        return str(exc)
    return None


def flock_holder_pid(path: str) -> int | None:
    """PID holding an exclusive flock on ``path``'s inode, from ``/proc/locks`` (None if unseen)."""
    try:
        st = os.stat(path)
        fd = os.open("/proc/locks", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, _PROC_LOCKS_MAX)
    except OSError:
        return None
    finally:
        os.close(fd)
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in data.decode("ascii", "replace").splitlines():
        # "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF" ("->" marks a waiter)
        fields = line.split()
        if "->" in fields[:2] or len(fields) < 6:
            continue
        if fields[1] == "FLOCK" and fields[3] == "WRITE" and fields[5] == wanted:
            with contextlib.suppress(ValueError):
                pid = int(fields[4])
                return pid if pid > 0 else None
    return None


def probe_evictor(root: str) -> Holder | None:
    """Read-only: the holder of ``root``'s eviction lock as its record tells, if one is running.

    For dry runs and the console's preview ("an eviction is running"): takes no lock, so a
    preview can never make a real eviction wait or be refused.
    """
    real = os.path.realpath(os.path.abspath(root))
    holder = live_record(record_path(real))
    if holder is not None and flock_holder_pid(real) is None and holder.identity == current_identity():
        return None  # its record survived, but this host shows no such lock: not running
    return holder
