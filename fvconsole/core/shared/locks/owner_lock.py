"""An OFD write lock on a file inside a directory: :class:`OwnerLock`, the part of the root lock that excludes.

Why an OFD lock (``F_OFD_SETLK``, F_WRLCK), not ``flock``: taking it needs the lock file open
for writing, so a user who can only read the directory (a cache root) cannot take it (anyone
who can read a directory can ``flock`` it and block its evictor), and the kernel drops it when
its holder dies however it dies (no stale lock to break). The file exists only while held: its
holder unlinks it before unlocking, and a taker re-checks after locking that the name still is
the inode it locked (else it locked an unlinked file and tries again). It cannot say who holds
it: :mod:`.root_lock` composes it with a holder record, and :func:`lock_holder_pids` finds the
holder's pid in ``/proc`` for a refusal without one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct

from fvconsole.core.shared import reasons
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.host import user_name
from fvconsole.core.shared.reasons import Reason

#: ``struct flock`` (Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid).
_FLOCK = "hhxxxxqqixxxx"
#: ``/proc/<pid>/fd`` entries read when looking for a lock's holder (only for a refusal message).
MAX_FDS_SCANNED = 200_000


class LockFileRefused(FvError):
    """The lock file cannot be opened for writing, or is not a regular file: exit 1, naming it."""

    kind = "lock_file_refused"


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
                raise LockFileRefused.of(self._refusal(exc)) from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise LockFileRefused.of(self._reason("lock.file_not_regular"))
        return fd

    def _reason(self, code: str, **values: object) -> Reason:
        return reasons.reason(code, "lock", subject=self.subject, file=self.path, **values)

    def _refusal(self, exc: OSError) -> Reason:
        try:
            st = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except OSError:
            st = None
        if exc.errno == errno.EROFS:
            return self._reason("lock.file_read_only")
        if st is not None and stat.S_ISLNK(st.st_mode):
            return self._reason("lock.file_symlink")
        if st is not None and not stat.S_ISREG(st.st_mode):
            return self._reason("lock.file_not_regular")
        if st is not None:
            return self._reason("lock.file_foreign", owner=_owner(st.st_uid), user=user_name())
        return self._reason("lock.file_uncreatable", why=exc.strerror)

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
