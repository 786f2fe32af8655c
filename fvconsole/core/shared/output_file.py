"""The one door for writing a file whose path a user named: ``--output FILE`` and the journal.

Why: ``--output`` used to rename a temp file over whatever was at its path, so a FIFO, a
character device or stdout's own ``/proc`` link became a regular file (as root, ``--output
/dev/null`` would have replaced the system's ``/dev/null``). What is at the path now decides
how it is written (``lstat`` first, the last component never followed):

- absent, or a regular file: replaced atomically (:mod:`core.shared.atomic`: temp file in the same
  directory, fsync, rename), so a reader such as node-exporter's textfile collector sees the
  old file or the new one, never half of one; the path is checked again right before the
  rename, so a FIFO or device put there meanwhile is not replaced either;
- a stream, a FIFO or a character device (``/dev/null``, a tty), also when reached through a
  symlink such as ``/dev/stdout`` (a link to the process's own descriptor): written through
  in place, never replaced, never truncated. The open is non-blocking, so a FIFO that nobody reads is
  refused at once ("a FIFO with no reader") instead of hanging; writes then block as on a
  pipe;
- anything else (a directory, a socket, a block device, a symlink to a regular file, a
  dangling symlink) is refused with one line naming the path; nothing is written.

The journal (:mod:`core.journal.log`) appends one line per action through :func:`open_append`:
the same checks, but it takes a regular file only (it is read back), never a stream.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from fvconsole.core.shared.atomic import atomic_write_bytes, write_all
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.safe_read import file_kind

ABSENT = "absent"
REGULAR = "regular file"
STREAM = "stream"

_STREAM_FLAGS = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW


class OutputRefused(FvError):
    """What is at a user-named output path may not be written (exit 1, nothing written).

    ``why`` is the phrase without the path ("is a directory"), for callers that word it
    themselves (the journal reports "the journal is a directory").
    """

    kind = "output_refused"

    def __init__(self, path: str, what: str, why: str) -> None:
        super().__init__(f"{path}: {what}: {why}")
        self.path = path
        self.what = what
        self.why = why


@dataclass(frozen=True)
class OutputTarget:
    """A checked output path: ``kind`` is ABSENT, REGULAR or STREAM (a FIFO or character device)."""

    path: str
    kind: str


def _is_stream(mode: int) -> bool:
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _kind_words(mode: int) -> str:
    return "a regular file" if stat.S_ISREG(mode) else file_kind(mode)


def check_output_path(path: str | os.PathLike[str], what: str = "output file", *,
                      streams: bool = True) -> OutputTarget:
    """What is at ``path`` and how it may be written; :class:`OutputRefused` when it may not be.

    ``streams=False`` (the journal) refuses a FIFO or device as well.
    """
    target = os.path.abspath(os.fspath(path))
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return OutputTarget(target, ABSENT)
    except OSError as exc:
        raise OutputRefused(target, what, f"cannot check it ({exc.strerror or exc})") from None
    if stat.S_ISREG(st.st_mode):
        return OutputTarget(target, REGULAR)
    if stat.S_ISLNK(st.st_mode):
        try:
            followed = os.stat(target)
        except OSError:
            raise OutputRefused(target, what, "is a symlink to nothing (not followed)") from None
        if streams and _is_stream(followed.st_mode):
            return OutputTarget(target, STREAM)
        raise OutputRefused(target, what, f"is a symlink to {_kind_words(followed.st_mode)} (not followed); "
                                          f"name the file itself")
    if streams and _is_stream(st.st_mode):
        return OutputTarget(target, STREAM)
    if streams:
        raise OutputRefused(target, what, f"is {file_kind(st.st_mode)}, not a regular file, FIFO or character device")
    raise OutputRefused(target, what, f"is {file_kind(st.st_mode)}, not a regular file")


def write_output(path: str | os.PathLike[str], data: bytes, what: str = "output file") -> OutputTarget:
    """Write ``data`` to the user-named ``path`` as the module docstring says; FvError naming it otherwise."""
    checked = check_output_path(path, what)
    if checked.kind == STREAM:
        _write_through(checked, data, what)
        return checked

    def recheck(label: str) -> None:
        if label.startswith("rename ") and check_output_path(checked.path, what).kind == STREAM:
            raise OutputRefused(checked.path, what, "became a FIFO or device while being written; not replaced")

    try:
        atomic_write_bytes(checked.path, data, step=recheck)
    except OSError as exc:
        raise OutputRefused(checked.path, what, f"cannot write ({exc.strerror or exc})") from None
    return checked


def _write_through(checked: OutputTarget, data: bytes, what: str) -> None:
    """Write into the FIFO or device in place (no create, no truncate, no rename)."""
    nofollow = 0 if os.path.islink(checked.path) else os.O_NOFOLLOW
    try:
        fd = os.open(checked.path, _STREAM_FLAGS | nofollow)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OutputRefused(checked.path, what, "is a FIFO with no reader (nothing has it open for reading); "
                                                    "start the reader first") from None
        raise OutputRefused(checked.path, what, f"cannot open it ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not _is_stream(mode):
            raise OutputRefused(checked.path, what, f"changed while being opened (now {_kind_words(mode)}); "
                                                    "nothing written")
        os.set_blocking(fd, True)
        write_all(fd, data)
    except OSError as exc:
        why = "the reader went away" if exc.errno == errno.EPIPE else (exc.strerror or str(exc))
        raise OutputRefused(checked.path, what, f"cannot write ({why})") from None
    finally:
        os.close(fd)


def open_append(path: str | os.PathLike[str], what: str, mode: int = 0o666) -> int:
    """An ``O_APPEND`` fd on the regular file at ``path`` (created when absent).

    For appending whole lines (the journal): a symlink, FIFO, device, directory or socket is
    :class:`OutputRefused`; a parent directory that is missing or unwritable is an OSError.
    The fd is checked with ``fstat`` after the open (the path can change in between).
    """
    checked = check_output_path(path, what, streams=False)
    try:
        fd = os.open(checked.path, _APPEND_FLAGS | os.O_CREAT, mode)
    except OSError as exc:  # the path changed since the check
        if exc.errno == errno.ELOOP:
            raise OutputRefused(checked.path, what, "is a symlink (not followed)") from None
        if exc.errno == errno.ENXIO:
            raise OutputRefused(checked.path, what, "is a FIFO, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputRefused(checked.path, what, f"is {file_kind(st.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd
