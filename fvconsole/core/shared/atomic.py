"""Crash-safe file writes: temp file in the same directory, fsync, os.replace, fsync dir."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(os.fspath(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_step(label: str) -> None:
    return None


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, sync_dir: bool = True,
                       sync_file: bool = True, step: Callable[[str], None] = _no_step) -> str:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one; returns the path.

    ``step(label)`` is called before each file-system operation (create, write, fsync, rename):
    the migration passes its test-only fault hook. ``sync_dir=False`` leaves the directory's
    fsync to a caller that writes many files into it; ``sync_file=False`` leaves the file's
    too, to a caller that makes the whole directory durable at once (``core.shared.durable``)
    before anything depends on it.
    """
    target = os.fspath(Path(path))  # normalised as before; plain strings from here (a thousand files per set)
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
    step(f"create {tmp}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        try:
            step(f"write {tmp}")
            write_all(fd, data)
            if sync_file:
                step(f"fsync {tmp}")
                os.fsync(fd)
        finally:
            os.close(fd)
        step(f"rename {tmp} -> {target}")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dir(directory or ".")
    return target


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def atomic_write_json(path: str | os.PathLike[str], payload: Any, *, sync_dir: bool = True) -> None:
    """Atomically write ``payload`` as indented, key-sorted JSON."""
    data = (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode("utf-8")
    atomic_write_bytes(path, data, sync_dir=sync_dir)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange_paths(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2(RENAME_EXCHANGE)``).

    Returns False when the platform or filesystem cannot do it, so the caller can fall
    back to two renames.
    """
    from ctypes.util import find_library  # here: it imports subprocess, which only this call needs

    try:
        libc = ctypes.CDLL(find_library("c") or None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a))
