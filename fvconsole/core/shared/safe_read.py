"""Bounded reads of input files: regular files only, opened without blocking, size and depth capped.

Why one module: every file fvconsole reads (run config, manifest, ``metadata.json``, receipt,
sidecars, Parquet files, DCP metadata) is named by a user or found in a directory a user
controls. A FIFO blocks ``open()`` forever, ``/dev/zero`` or a huge file exhausts memory, and
deeply nested JSON exhausts the stack of every recursive walk that follows. Each file is
therefore opened ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer),
checked with ``fstat`` on the very fd that is read (no race with a swapped-in file), and read
up to a cap. JSON documents are then decoded by ``core.shared.untrusted`` (the one door for them).

``OSError`` (missing file, permissions) propagates for the caller to word in its own terms;
everything else about an unusable file is an ``FvError`` naming the file and what it should be.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import reprlib
import stat
from collections.abc import Iterator
from typing import Any, BinaryIO

from fvconsole.core.shared.errors import FvError

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_NOATIME = getattr(os, "O_NOATIME", 0)
#: What :func:`open_input` adds: never through a symlink planted in a directory a user controls.
_INPUT_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_noatime(path: str | os.PathLike[str], flags: int, *, dir_fd: int | None = None) -> int:
    """``os.open`` with ``O_NOATIME`` where this process may (the owner, or CAP_FOWNER), else without.

    Why one rule: reading or listing must not change what it reads (an atime is what
    FastVideo's GC and an operator's ``ls -lu`` go by); the kernel refuses ``O_NOATIME`` with
    EPERM to anyone else, and then the plain open says whether reading is allowed at all.
    """
    if _NOATIME:
        try:
            return os.open(path, flags | _NOATIME, dir_fd=dir_fd)
        except PermissionError:
            pass
    return os.open(path, flags, dir_fd=dir_fd)


def open_input(path: str, *, directory: bool = False, dir_fd: int | None = None) -> int:
    """A read-only fd on a file (or ``directory``) found in a directory a user controls.

    Never through a symlink (``O_NOFOLLOW``), never blocking on a FIFO swapped in after a
    listing (``O_NONBLOCK`` for files), atime untouched (:func:`open_noatime`). ``dir_fd``:
    ``path`` is a name inside that directory (a scan opens an entry's files relative to the
    entry it listed: no path walk per file, and never another directory's).
    """
    flags = _INPUT_FLAGS | (os.O_DIRECTORY if directory else getattr(os, "O_NONBLOCK", 0))
    return open_noatime(path, flags, dir_fd=dir_fd)


def file_kind(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words ("a FIFO", "a directory", ...)."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def not_regular_text(shown: str, what: str, mode: int) -> str:
    """The one wording of a refused non-regular file, for a caller that only ``stat``ed it."""
    return f"{shown}: {what} must be a regular file, but it is {file_kind(mode)}"


@contextlib.contextmanager
def open_regular(path: str | os.PathLike[str], what: str, max_bytes: int | None = None) -> Iterator[BinaryIO]:
    """A binary file object on ``path``, once fstat on its fd shows a regular file of at most ``max_bytes``.

    The fd is opened non-blocking (so a FIFO cannot hang the open) and switched back to
    blocking mode only after the check, so it can be handed to code that does its own reads
    (pyarrow, torch.load) without a race between checking and opening.
    """
    fd, _ = _open_checked(path, what, max_bytes)
    try:
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def _open_checked(path: str | os.PathLike[str], what: str, max_bytes: int | None) -> tuple[int, os.stat_result]:
    """A blocking fd on ``path`` and its fstat, once they show a regular file of at most ``max_bytes``.

    Opened non-blocking so a FIFO cannot hang the open; the caller owns (and closes) the fd.
    """
    shown = os.fspath(path)
    fd = open_noatime(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FvError(not_regular_text(shown, what, st.st_mode))
        if max_bytes is not None and st.st_size > max_bytes:
            raise FvError(f"{shown}: {what} is larger than {max_bytes} bytes ({st.st_size}); refusing to read it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular_file(path: str | os.PathLike[str], what: str, max_bytes: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes`` (see ``open_regular``).

    The read itself is capped too, so a file that grows after the check is still refused.
    Reads the fd directly (no file object): a migration reads back a thousand small files.
    """
    fd, st = _open_checked(path, what, max_bytes)
    try:
        # Read in chunks sized by fstat, never one max_bytes buffer up front: read(n) allocates
        # n bytes, which a login node with ``ulimit -v`` refuses for a 1 GiB cap.
        chunks: list[bytes] = []
        got, limit = 0, max_bytes + 1
        while got < limit and (chunk := os.read(fd, min(limit - got, st.st_size + 1, 1 << 24))):
            chunks.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > max_bytes:
        raise FvError(f"{os.fspath(path)}: {what} is larger than {max_bytes} bytes; refusing to read it")
    return data


def sha256_regular_file(path: str | os.PathLike[str], what: str = "file", max_bytes: int | None = None) -> str:
    """Streamed sha256 of a regular file (a FIFO or device is refused, never read)."""
    digest = hashlib.sha256()
    read = 0
    with open_regular(path, what, max_bytes) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            read += len(chunk)
            if max_bytes is not None and read > max_bytes:
                raise FvError(f"{os.fspath(path)}: {what} is larger than {max_bytes} bytes; refusing to read it")
            digest.update(chunk)
    return digest.hexdigest()


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr`` of an input value for a one-line message, bounded in length and nesting.

    A 400-digit integer or a million-item list from a hostile file must not turn an error
    line into megabytes (nor raise ValueError for an integer beyond Python's digit limit).
    """
    if type(value) is int and value.bit_length() > 128:
        digits = int(value.bit_length() * 0.30103) + 1
        return f"<{'negative ' if value < 0 else ''}integer of about {digits} digits>"
    shortener = reprlib.Repr()
    shortener.maxlevel = 3
    shortener.maxstring = shortener.maxother = limit
    shortener.maxlong = 40
    text = shortener.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
