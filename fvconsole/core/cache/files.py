"""Polite, bounded reads of cache files: never the tensor data, never an mtime/atime change.

Opened with ``O_NOATIME`` where the kernel allows it (owner or CAP_FOWNER; silently
falls back otherwise) and ``O_NOFOLLOW`` so a planted symlink is never read through.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

from fvconsole.core.safe_read import short_repr
from fvconsole.core.untrusted import UntrustedError, decode

#: A safetensors header longer than this is treated as corrupt, not read.
MAX_HEADER_BYTES = 100 * 2**20
#: A manifest larger than this is refused rather than parsed (real ones are a few MB).
MAX_MANIFEST_BYTES = 512 * 2**20


class CacheFileError(ValueError):
    """A cache file that cannot be used; the message says what is wrong with it."""


def open_readonly(path: str, *, directory: bool = False, dir_fd: int | None = None) -> int:
    """A read-only fd that does not follow symlinks and, when permitted, does not touch atime.

    ``dir_fd``: ``path`` is a name relative to that directory (a scan opens an entry's files
    relative to the entry it listed: no path walk per file, and never another directory's).
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if directory:
        flags |= os.O_DIRECTORY
    else:
        flags |= getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in after the listing cannot hang us
    noatime = getattr(os, "O_NOATIME", 0)
    if noatime:
        try:
            return os.open(path, flags | noatime, dir_fd=dir_fd)
        except PermissionError:
            pass  # EPERM: not the owner; retry politely without O_NOATIME
    return os.open(path, flags, dir_fd=dir_fd)


def iter_fd(fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """(name, lstat) of every child of the directory open as ``fd``, as it reads (a root of 200,000
    entries is never held as one list); ``fd`` stays open: a scan opens the children relative to it.
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
    fd = open_readonly(path, directory=True)
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


def _regular_size(fd: int, what: str) -> int:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise CacheFileError(f"{what} is not a regular file")
    return st.st_size


def _pread_exact(fd: int, length: int, offset: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, min(length, 1 << 24), offset)
        if not chunk:
            break
        chunks.append(chunk)
        length -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_manifest(path: str, *, dir_fd: int | None = None) -> dict[str, Any]:
    """Parse a manifest.json once (CacheFileError when it is not a JSON object); ``dir_fd`` as :func:`open_readonly`."""
    fd = open_readonly(path, dir_fd=dir_fd)
    try:
        size = _regular_size(fd, "manifest.json")
        if size > MAX_MANIFEST_BYTES:
            raise CacheFileError(f"manifest.json is {size} bytes (more than {MAX_MANIFEST_BYTES})")
        raw = _pread_exact(fd, size, 0)
    finally:
        os.close(fd)
    return _json_object(raw, "manifest.json")


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


def read_safetensors_header(path: str, *, dir_fd: int | None = None) -> dict[str, Any]:
    """The JSON header of a safetensors file, validated against the file size.

    Reads 8 bytes plus the header: never tensor data, so it is cheap on a 10 GB shard.
    """
    header, data_bytes = read_header_table(path, dir_fd=dir_fd)
    _check_tensor_table(header, data_bytes=data_bytes)
    return header


def read_header_table(path: str, *, dir_fd: int | None = None) -> tuple[dict[str, Any], int]:
    """(the header as a JSON object, the size of the data section after it), unchecked.

    For a caller that reports every tensor's trouble itself (``cache verify``); the header
    length is still bounded and must fit in the file.
    """
    fd = open_readonly(path, dir_fd=dir_fd)
    try:
        size = _regular_size(fd, "shard")
        head = _pread_exact(fd, 8, 0)
        if len(head) < 8:
            raise CacheFileError(f"{size} bytes, shorter than the 8-byte header length")
        length = int.from_bytes(head, "little")
        if length > MAX_HEADER_BYTES:
            raise CacheFileError(f"header length {length} exceeds {MAX_HEADER_BYTES} bytes")
        if 8 + length > size:
            raise CacheFileError(f"header length {length} runs past the end of the file ({size} bytes)")
        raw = _pread_exact(fd, length, 8)
    finally:
        os.close(fd)
    return _json_object(raw, "header"), size - 8 - length


def read_through(path: str, progress: Callable[[int], None] | None = None, chunk: int = 1 << 22) -> int:
    """Read every byte of a regular file in ``chunk``-sized pieces (nothing kept); the bytes read.

    ``cache verify --deep``: an I/O error on a bad block surfaces here as OSError, not in a
    training job's ``safe_open``. ``progress(n)`` is called after each piece.
    """
    fd = open_readonly(path)
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
            raise CacheFileError(f"tensor {name!r} lacks dtype/shape/data_offsets")
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
                f"tensor {name!r} ends at byte {offsets[1]} of a {data_bytes}-byte data section (truncated)"
            )
