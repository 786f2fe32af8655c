"""The journal's append lock: a brief exclusive POSIX lock on a file already open for appending.

Not a lock of a directory (it has no holder record and no :class:`~.interface.Lock` interface):
held for one write, by several processes appending to one file, and given up on a filesystem
that cannot lock rather than waited for.
"""

from __future__ import annotations

import contextlib

from fvconsole.core.shared.locks.interface import wait_for


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
