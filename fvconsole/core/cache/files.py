"""Polite, bounded reads of cache files: never the tensor data, never an mtime/atime change.

Every file and directory is opened by the input-file door (``core/shared/safe_read.py``'s
``open_input``: ``O_NOFOLLOW``, non-blocking, ``O_NOATIME`` where the kernel allows it); what
is here is the cache's formats: the caps on a manifest and a safetensors header, and how
they are read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.safe_read import open_input, short_repr
from fvconsole.core.shared.untrusted import UntrustedError, decode

#: A safetensors header longer than this is treated as corrupt, not read.
MAX_HEADER_BYTES = 100 * 2**20
#: A manifest larger than this is refused rather than parsed (real ones are a few MB).
MAX_MANIFEST_BYTES = 512 * 2**20
#: The first read of a shard: its length field and, when they fit, the whole header (one
#: ``pread`` instead of two for the usual small header; never more than this of tensor data).
HEAD_READ_BYTES = 64 * 2**10
#: Files a listing opens as it lists them (their ``fstat`` replaces the listing's ``lstat``);
#: past this many in one directory the rest are ``lstat``'ed as before (bounded open fds).
MAX_OPENED = 16

#: A file opened by :func:`list_fd_opening`: its fd and the ``fstat`` of that fd (a regular file).
Opened = tuple[int, os.stat_result]


class CacheFileError(ValueError):
    """A cache file that cannot be used; the message says what is wrong with it."""


def iter_fd(fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """(name, lstat) of every child of the directory open as ``fd``, as it reads (a large root is
    never held as one list); ``fd`` stays open: a scan opens the children relative to it.
    Children removed between readdir and lstat are left out."""
    with os.scandir(fd) as it:
        for item in it:
            try:
                yield item.name, item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue


def list_dir(path: str) -> list[tuple[str, os.stat_result]]:
    """(name, lstat) of every child: one getdents pass plus one lstat per child, atime untouched.

    Children removed between readdir and lstat are left out (they are gone).
    """
    fd = open_input(path, directory=True)
    try:
        return list_fd(fd)
    finally:
        os.close(fd)


def list_fd(fd: int) -> list[tuple[str, os.stat_result]]:
    """:func:`list_dir` of a directory already open as ``fd`` (which stays open)."""
    out = []
    append = out.append
    with os.scandir(fd) as it:
        for item in it:
            try:
                append((item.name, item.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue
    return out


def list_fd_opening(fd: int, want: Callable[[str], bool]) -> tuple[list[tuple[str, os.stat_result]], dict[str, Opened]]:
    """:func:`list_fd`, but a regular file whose name ``want`` takes is opened (as
    :func:`open_input` does) and ``fstat``'ed instead of ``lstat``'ed: a scan reads those
    anyway, and one ``fstat`` of the open file gives the same fields as the ``lstat`` would.

    Returns the listing and the open files by name (the caller closes them; at most
    :data:`MAX_OPENED`). A file that cannot be opened (a symlink or FIFO swapped in, no
    permission) is ``lstat``'ed as by :func:`list_fd`, and its reader meets the same trouble.
    """
    out: list[tuple[str, os.stat_result]] = []
    opened: dict[str, Opened] = {}
    append = out.append
    fstat = os.fstat
    try:
        with os.scandir(fd) as it:
            for item in it:
                name = item.name
                if want(name) and len(opened) < MAX_OPENED and item.is_file(follow_symlinks=False):
                    try:
                        child = open_input(name, dir_fd=fd)
                    except FileNotFoundError:
                        continue
                    except OSError:
                        pass  # lstat it below; the reader reports the same error
                    else:
                        try:
                            st = fstat(child)
                        except BaseException:
                            os.close(child)
                            raise
                        if st.st_mode & 0o170000 == stat.S_IFREG:
                            opened[name] = (child, st)
                        else:
                            os.close(child)  # not a symlink (O_NOFOLLOW): this is its lstat
                        append((name, st))
                        continue
                try:
                    append((name, item.stat(follow_symlinks=False)))
                except FileNotFoundError:
                    continue
    except BaseException:
        close_opened(opened)
        raise
    return out, opened


def close_opened(opened: dict[str, Opened]) -> None:
    """Close every file :func:`list_fd_opening` opened."""
    for child, _ in opened.values():
        os.close(child)
    opened.clear()


def _regular_size(fd: int, what: str) -> int:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise CacheFileError(f"{what} is not a regular file")
    return st.st_size


def _pread_exact(fd: int, length: int, offset: int) -> bytes:
    chunks = []
    if 0 < length <= 1 << 24:  # the usual case: one pread returns it all
        first = os.pread(fd, length, offset)
        if len(first) == length or not first:
            return first
        chunks.append(first)
        length -= len(first)
        offset += len(first)
    while length > 0:
        chunk = os.pread(fd, min(length, 1 << 24), offset)
        if not chunk:
            break
        chunks.append(chunk)
        length -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_manifest(path: str, *, dir_fd: int | None = None, opened: Opened | None = None) -> dict[str, Any]:
    """Parse a manifest.json once (CacheFileError when it is not a JSON object); ``dir_fd`` as
    :func:`open_input`; ``opened``: the file as :func:`list_fd_opening` opened it (read, not closed)."""
    if opened is not None:
        return _json_object(_manifest_bytes(opened[0], opened[1].st_size), "manifest.json")
    fd = open_input(path, dir_fd=dir_fd)
    try:
        raw = _manifest_bytes(fd, _regular_size(fd, "manifest.json"))
    finally:
        os.close(fd)
    return _json_object(raw, "manifest.json")


def _manifest_bytes(fd: int, size: int) -> bytes:
    if size > MAX_MANIFEST_BYTES:
        raise CacheFileError(f"manifest.json is {size} bytes (more than {MAX_MANIFEST_BYTES})")
    return _pread_exact(fd, size, 0)


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    """Decode a JSON object through the untrusted-document door; every way it is broken is one CacheFileError.

    The door bounds memory against the size: a 40 MiB manifest of ``{}`` objects (~27x its
    size once parsed) died with MemoryError and lost the whole listing; now that entry is broken.
    """
    try:
        data = decode(raw, what, what)
    except UntrustedError as exc:
        if exc.syntax:
            raise CacheFileError(f"{what} does not parse as JSON ({exc.detail})") from None
        raise CacheFileError(str(exc)[len(what) + 2:]) from None
    if not isinstance(data, dict):
        raise CacheFileError(f"{what} is not a JSON object")
    return data


def read_safetensors_header(path: str, *, dir_fd: int | None = None, opened: Opened | None = None) -> dict[str, Any]:
    """The JSON header of a safetensors file, validated against the file size.

    Reads at most :data:`HEAD_READ_BYTES` first, then the rest of a longer header: never more
    tensor data than that, so it is cheap on a 10 GB shard. ``opened`` as :func:`read_manifest`.
    """
    header, data_bytes = read_header_table(path, dir_fd=dir_fd, opened=opened)
    _check_tensor_table(header, data_bytes=data_bytes)
    return header


def read_header_table(path: str, *, dir_fd: int | None = None,
                      opened: Opened | None = None) -> tuple[dict[str, Any], int]:
    """(the header as a JSON object, the size of the data section after it), unchecked.

    For a caller that reports every tensor's trouble itself (``cache verify``); the header
    length is still bounded and must fit in the file. ``opened`` as :func:`read_manifest`.
    """
    if opened is not None:
        raw, size, length = _header_bytes(opened[0], opened[1].st_size)
    else:
        fd = open_input(path, dir_fd=dir_fd)
        try:
            raw, size, length = _header_bytes(fd, _regular_size(fd, "shard"))
        finally:
            os.close(fd)
    return _json_object(raw, "header"), size - 8 - length


def _header_bytes(fd: int, size: int) -> tuple[bytes, int, int]:
    """(header bytes, file size, header length): one read of the first HEAD_READ_BYTES, which
    holds the whole header when it is that small; a second read for the rest of a longer one."""
    first = _pread_exact(fd, min(size, HEAD_READ_BYTES), 0)
    if len(first) < 8:
        raise CacheFileError(f"{plural(size, 'byte')}, shorter than the 8-byte header length")
    length = int.from_bytes(first[:8], "little")
    if length > MAX_HEADER_BYTES:
        raise CacheFileError(f"header length {length} exceeds {MAX_HEADER_BYTES} bytes")
    if 8 + length > size:
        raise CacheFileError(f"header length {length} runs past the end of the file ({size} bytes)")
    if 8 + length <= len(first):
        return first[8:8 + length], size, length
    return first[8:] + _pread_exact(fd, 8 + length - len(first), len(first)), size, length


def read_through(path: str, progress: Callable[[int], None] | None = None, chunk: int = 1 << 22) -> int:
    """Read every byte of a regular file in ``chunk``-sized pieces (nothing kept); the bytes read.

    ``cache verify --deep``: an I/O error on a bad block surfaces here as OSError, not in a
    training job's ``safe_open``. ``progress(n)`` is called after each piece.
    """
    fd = open_input(path)
    try:
        _regular_size(fd, "shard")
        offset = 0
        while True:
            piece = os.pread(fd, chunk, offset)
            if not piece:
                return offset
            offset += len(piece)
            if progress is not None:
                progress(len(piece))
    finally:
        os.close(fd)


def _check_tensor_table(header: dict[str, Any], data_bytes: int) -> None:
    """Every tensor has dtype/shape/data_offsets inside the data section (catches truncation)."""
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            raise CacheFileError(f"tensor {short_repr(name)} lacks dtype/shape/data_offsets")
        offsets = info["data_offsets"]
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]
        ):
            raise CacheFileError(f"tensor {short_repr(name)} has bad data_offsets {short_repr(offsets)}")
        if offsets[1] > data_bytes:
            raise CacheFileError(
                f"tensor {short_repr(name)} ends at byte {short_repr(offsets[1])} of a {data_bytes}-byte "
                "data section (truncated)"
            )
