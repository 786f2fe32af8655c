"""Mount points inside a cache root: eviction never crosses a filesystem boundary.

A directory bound over an entry's subdirectory (``mount --bind /data ROOT/<key>/mnt``) would
otherwise be emptied along with the entry. ``st_dev`` alone (what ``rm --one-file-system``
compares) does not see a bind mount of the same filesystem, so a place is identified by
(``st_dev``, mount id): the kernel's mount id (``statx`` STATX_MNT_ID, else
``/proc/self/fdinfo/<fd>``) differs on every mount, bind mounts included. Without either only
``st_dev`` is compared.

Two uses: a scan reads ``/proc/self/mountinfo`` once and reports every mount point inside an
entry (so a plan skips it and the preview says so); removal compares the place of every
directory it opens with the entry's and never descends into another one (a mount that
appeared after the plan).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable
from typing import NamedTuple

MOUNTINFO = "/proc/self/mountinfo"
#: A node with 100k mounts has a ~20 MB mountinfo; beyond this it is not read (st_dev only).
MAX_MOUNTINFO_BYTES = 64 << 20
_OCTAL = re.compile(rb"\\([0-7]{3})")
_MNT_ID = re.compile(rb"^mnt_id:\s*(\d+)\s*$", re.MULTILINE)


class Place(NamedTuple):
    """Which mounted filesystem a directory is on: (st_dev, mount id or None)."""

    dev: int
    mnt: int | None


def _read_bounded(path: str, limit: int) -> bytes | None:
    """The whole of a /proc file (size 0 in stat), or None if unavailable or over ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def mount_points(path: str = MOUNTINFO) -> frozenset[str] | None:
    """Every mount point this process can see, or None when that cannot be known."""
    raw = _read_bounded(path, MAX_MOUNTINFO_BYTES)
    if raw is None:
        return None
    points = set()
    for line in raw.splitlines():
        fields = line.split(b" ", 5)
        if len(fields) > 4:  # id parent major:minor root MOUNT-POINT ...
            points.add(os.fsdecode(_OCTAL.sub(lambda m: bytes([int(m.group(1), 8)]), fields[4])))
    return frozenset(points)


def mounts_by_child(points: Iterable[str], real_dir: str) -> dict[str, tuple[str, ...]]:
    """Mount points strictly inside ``real_dir``, grouped by the child of it that holds them.

    Paths are relative to that child: ``"."`` when the child itself is a mount point.
    """
    prefix = real_dir.rstrip(os.sep) + os.sep
    found: dict[str, list[str]] = {}
    for point in points:
        if point.startswith(prefix):
            child, _, rest = point[len(prefix):].partition(os.sep)
            found.setdefault(child, []).append(rest or ".")
    return {child: tuple(sorted(rel)) for child, rel in found.items()}


def mount_id(fd: int) -> int | None:
    """The kernel's id of the mount ``fd`` is on, or None when neither statx nor /proc tells.

    ``statx(STATX_MNT_ID)`` (Linux >= 5.8) is one system call; ``/proc/self/fdinfo`` (>= 3.15)
    the fallback. Both give the same id.
    """
    raw = statx_raw(fd, "", STATX_MNT_ID)
    if raw is not None and struct.unpack_from("=I", raw, 0)[0] & STATX_MNT_ID:
        return struct.unpack_from("=Q", raw, 144)[0]
    raw = _read_bounded(f"/proc/self/fdinfo/{fd}", 1 << 16)
    match = _MNT_ID.search(raw) if raw else None
    return int(match.group(1)) if match else None


#: statx(2): flags and mask bits (linux/fcntl.h, linux/stat.h).
AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH, AT_STATX_DONT_SYNC = 0x100, 0x1000, 0x4000
STATX_BASIC_STATS, STATX_MNT_ID = 0x7FF, 0x1000
_statx: object = None


def statx_raw(dir_fd: int, name: str, mask: int) -> bytes | None:
    """The ``struct statx`` of ``name`` in ``dir_fd`` (``""``: ``dir_fd`` itself), never following a
    symlink nor syncing a network filesystem; None where libc or the kernel has no statx."""
    global _statx
    import ctypes

    if _statx is None:
        _statx = getattr(ctypes.CDLL(None, use_errno=True), "statx", False)
    if not _statx:
        return None
    buf = ctypes.create_string_buffer(256)
    flags = AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC | (AT_EMPTY_PATH if not name else 0)
    if _statx(dir_fd, os.fsencode(name), flags, mask, buf) != 0:  # type: ignore[operator]
        return None
    return buf.raw


def place_of(fd: int) -> Place:
    """The (st_dev, mount id) of an open file or directory."""
    return Place(os.fstat(fd).st_dev, mount_id(fd))


def same_place(a: Place, b: Place) -> bool:
    """True when both are on the same mount (mount ids compared only when both are known)."""
    return a.dev == b.dev and (a.mnt is None or b.mnt is None or a.mnt == b.mnt)
