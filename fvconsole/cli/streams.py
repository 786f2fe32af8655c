"""Standard streams for one command: stdout failures become OutputError, stderr is best effort.

This is the one module that writes to the standard streams: everything else in the CLI
prints through :func:`write_out` / :func:`write_err` (or ``cli.common.say`` on top of them),
so that a stdout whose encoding cannot show a character (``PYTHONIOENCODING=ascii``, a
``C`` locale without UTF-8 mode) gets it backslash-escaped instead of a UnicodeEncodeError
(`tests/architecture/test_doors.py` checks that nothing else calls ``print`` or ``sys.stdout.write``).

Why: a command's result goes to stdout, and stdout can fail (`> /dev/full`, a reader that
left, `>&-`). That failure must be told apart from a failing input file (OSError with a
file name) so the dispatcher can say what was already done (exit 3 after a write). stderr
carries diagnostics only: failing to print one must never change what a command does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any


class OutputError(Exception):
    """Writing the command's output to stdout failed (deliberately not an OSError)."""

    def __init__(self, cause: OSError) -> None:
        self.errno = cause.errno
        self.strerror = cause.strerror or str(cause) or type(cause).__name__
        super().__init__(f"{self.strerror}: <stdout>")


class _Closed:
    """Stands in for a stream whose descriptor was closed when the process started."""

    closed = False
    encoding = "utf-8"
    errors = "strict"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def flush(self) -> None:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))


def _representable(text: str, stream: Any) -> str:
    """``text`` with what ``stream``'s encoding cannot show as a backslash escape (``\\u2026``)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding, "replace")


def _write(stream: Any, text: str) -> int:
    """Write ``text``; a character the stream cannot encode is written backslash-escaped."""
    try:
        return stream.write(text)
    except UnicodeEncodeError:  # the text wrapper encodes before buffering: nothing was written yet
        return stream.write(_representable(text, stream))


class _Stdout:
    """Delegates to the real stdout; an OSError from writing or flushing becomes OutputError."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return _write(self._stream, text)
        except OSError as exc:
            raise OutputError(exc) from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputError(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Stderr(_Stdout):
    """Delegates to the real stderr; a message that cannot be written is dropped.

    ``status_open``: a progress line (:func:`write_status`) is on the terminal without its
    newline yet; the next output of this command ends it first.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.status_open = False

    def write(self, text: str) -> int:
        with contextlib.suppress(OSError):
            return _write(self._stream, text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.flush()


def _reserve_closed_fds() -> set[int]:
    """Point closed fds 0-2 at /dev/null so no file opened later becomes "stdout"; returns them."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
    if closed:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in closed:
            if fd != null:
                os.dup2(null, fd)
        if null not in closed:
            os.close(null)
    return closed


@contextlib.contextmanager
def guarded_streams() -> Iterator[None]:
    """Install the guarded stdout/stderr for the duration of one command."""
    closed = _reserve_closed_fds()
    saved = sys.stdout, sys.stderr
    out = _Closed() if (1 in closed or sys.stdout is None) else sys.stdout
    err = _Closed() if (2 in closed or sys.stderr is None) else sys.stderr
    sys.stdout, sys.stderr = _Stdout(out), _Stderr(err)
    try:
        yield
    finally:
        _end_status()
        sys.stdout, sys.stderr = saved


def stdout_copy() -> Any:
    """A text stream on a duplicate of fd 1, ASCII with backslash replacement (the node runner's
    frames, kept apart from the command's stdout, which it captures)."""
    return os.fdopen(os.dup(1), "w", encoding="ascii", errors="backslashreplace")


def _end_status() -> None:
    """End a progress line left open on stderr, so what comes next starts on a line of its own.

    Why: a progress line is rewritten in place without a newline; a command that stopped
    before its last step (an error, a verification whose total counted unread files) would
    otherwise glue its next stdout line or its ``error:`` line to it on the terminal.
    """
    err = sys.stderr
    if getattr(err, "status_open", False):
        err.status_open = False
        _write(err, "\n")
        err.flush()


def write_status(text: str, *, final: bool = False) -> None:
    """Rewrite the progress line on stderr (a terminal) in place with ``text``; ``final`` ends it."""
    _write(sys.stderr, f"\r\x1b[K{text}" + ("\n" if final else ""))
    sys.stderr.flush()
    if isinstance(sys.stderr, _Stderr):
        sys.stderr.status_open = not final


def write_out(text: str) -> None:
    """Write ``text`` (already made printable by the caller, newlines included) on stdout."""
    _end_status()
    _write(sys.stdout, text)


def write_err(text: str) -> None:
    """Write ``text`` (already made printable by the caller) on stderr."""
    _end_status()
    _write(sys.stderr, text)


def flush_stdout() -> None:
    """Flush stdout now, so a failure surfaces here (as OutputError) and not at interpreter exit."""
    if sys.stdout is not None:
        sys.stdout.flush()


def discard_stdout() -> None:
    """After an output failure: send fd 1 to /dev/null so the interpreter's final flush of the
    unwritten buffer succeeds quietly (no "Exception ignored ... BrokenPipeError")."""
    real = getattr(sys.stdout, "_stream", None)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if real is not None and real is sys.__stdout__ and real.fileno() == 1:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
