"""Making many new files in one directory durable: one ``syncfs(2)`` where it can be trusted, else fsync each.

Why: a migration writes one sidecar per rank. 1,024 ``fsync`` calls on a local disk cost
1,024 journal commits (0.3-1 s here); one ``syncfs`` on the staging dir's filesystem writes
everything back at once and waits for it (15-35 ms). ``syncfs`` is only used where it means
"every file written through this filesystem is on stable storage, or an error":

* Linux 5.8 or later: older kernels return 0 from ``syncfs`` even when writeback failed
  (5.8 made it report the superblock's writeback errors, sampled when the fd was opened,
  so the caller opens the directory *before* writing the files);
* a local filesystem whose ``sync_fs`` is known to flush data and metadata (ext2/3/4, XFS,
  Btrfs, F2FS; tmpfs, where there is nothing to flush). On network and cluster filesystems
  (NFS, Lustre, GPFS, CephFS, CIFS, FUSE, overlayfs...) ``syncfs`` semantics vary and it would
  flush every other user's dirty data on that client, so each file is fsynced instead (the
  migration overlaps those fsyncs in a thread pool);
* libc exports ``syncfs`` and ``FVCONSOLE_DURABILITY`` is not ``fsync`` (an operator who
  distrusts ``syncfs`` on a filesystem forces per-file fsync with it).

:func:`choose` makes the decision once per directory (with its reason, for the record);
:func:`syncfs` runs the call. Where it turns out to be unavailable at run time (``ENOSYS``,
``EPERM``... from a seccomp filter or a sandbox kernel: :data:`UNAVAILABLE`), the caller
fsyncs each file with :func:`fsync_at` instead.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from dataclasses import dataclass

#: ``FVCONSOLE_DURABILITY=fsync`` forces one fsync per file (``auto``, the default, picks).
ENV_DURABILITY = "FVCONSOLE_DURABILITY"
#: statfs ``f_type`` magic numbers (linux/magic.h) of local filesystems whose syncfs flushes
#: file data and metadata and (5.8+) reports writeback errors.
SYNCFS_FILESYSTEMS = {
    0xEF53: "ext2/ext3/ext4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0xF2F52010: "f2fs",
    0x01021994: "tmpfs",
}
#: The first kernel whose syncfs returns writeback errors (commit 735e4ae5ba28).
MIN_KERNEL = (5, 8)
#: errno values meaning "syncfs cannot be called here" (seccomp filters, sandbox kernels):
#: the caller then fsyncs each file. Any other error (EIO, ENOSPC...) is a failed write.
UNAVAILABLE = frozenset({errno.ENOSYS, errno.EPERM, errno.EACCES, errno.EINVAL, errno.EOPNOTSUPP})


@dataclass(frozen=True)
class Durability:
    """How a directory's new files are made durable: ``syncfs`` once, or ``fsync`` per file."""

    mode: str  # "syncfs" or "fsync"
    reason: str

    @property
    def per_file_fsync(self) -> bool:
        return self.mode == "fsync"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library: the process's own symbols, else ``find_library`` (which may run ldconfig)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if hasattr(libc, "fstatfs"):
            return libc
    except OSError:
        pass
    from ctypes.util import find_library

    try:
        name = find_library("c")
        libc = ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "fstatfs") else None


def _syncfs_function():
    """libc's ``syncfs``, or None where there is none (not Linux, old or non-glibc libc)."""
    libc = _libc()
    function = getattr(libc, "syncfs", None) if libc is not None else None
    if function is not None:
        function.argtypes = [ctypes.c_int]
        function.restype = ctypes.c_int
    return function


def _fs_type(fd: int) -> int | None:
    """``fstatfs(fd).f_type`` (Linux; its first field on every ABI), or None if unknown."""
    libc = _libc()
    fstatfs = getattr(libc, "fstatfs", None) if libc is not None else None
    if fstatfs is None:
        return None
    buf = ctypes.create_string_buffer(512)  # struct statfs is 120 bytes on 64-bit Linux
    fstatfs.argtypes = [ctypes.c_int, ctypes.c_char_p]
    fstatfs.restype = ctypes.c_int
    if fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def kernel_version(release: str | None = None) -> tuple[int, int]:
    """(major, minor) of the running kernel's release string, (0, 0) when it does not parse."""
    release = os.uname().release if release is None else release
    parts = release.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1].split("-")[0] if c.isdigit()) or 0)
    except (IndexError, ValueError):
        return 0, 0


def choose(dir_fd: int) -> Durability:
    """``syncfs`` for the directory open as ``dir_fd`` when every condition above holds, else ``fsync``."""
    forced = os.environ.get(ENV_DURABILITY, "auto").strip().lower()
    if forced == "fsync":
        return Durability("fsync", f"{ENV_DURABILITY}=fsync")
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return Durability("fsync", "not Linux")
    if kernel_version() < MIN_KERNEL:
        return Durability("fsync", f"kernel {os.uname().release} < 5.8 (syncfs does not report writeback errors)")
    if _syncfs_function() is None:
        return Durability("fsync", "libc has no syncfs")
    magic = _fs_type(dir_fd)
    name = SYNCFS_FILESYSTEMS.get(magic) if magic is not None else None
    if name is None:
        shown = "unknown" if magic is None else f"0x{magic:x}"
        return Durability("fsync", f"filesystem type {shown} is not a local one trusted with syncfs")
    return Durability("syncfs", f"{name}: one syncfs")


def syncfs(fd: int) -> None:
    """``syncfs(fd)``: flush the whole filesystem holding ``fd``; OSError on failure (e.g. EIO)."""
    function = _syncfs_function()
    if function is None:
        raise OSError(38, os.strerror(38))  # ENOSYS
    if function(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def fsync_at(dir_fd: int, name: str) -> None:
    """fsync the regular file ``name`` in the directory open as ``dir_fd`` (never following a symlink)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
