"""Real mounts for tests: ``mounted(args, target)`` (any ``mount(8)`` arguments: a tmpfs, a bind
mount) and ``tmpfs(where, size_bytes)``, each lazily unmounted on exit; ``Mounter``, the ``mounter``
fixture's ``mount(args, target)`` that unmounts everything below a test's tmp_path at teardown.

Every one skips the test where this process may not mount (not root, no mount(8), a sandbox
that refuses it): mounting is what the test needs, not what it checks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def require_mount(what: str = "mounting") -> None:
    """Skip unless this process is root with mount(8) on PATH."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip(f"{what} needs root and mount(8)")


def mount(args: list[str], target: str | os.PathLike[str]) -> None:
    """``mount ARGS TARGET``; skips the test when the mount is refused."""
    require_mount()
    proc = subprocess.run(["mount", *args, os.fspath(target)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mount is not permitted here: {proc.stderr.strip()}")


def unmount(target: str | os.PathLike[str]) -> None:
    """Lazy unmount (``umount -l``): a test's open files never keep a mount alive after it."""
    subprocess.run(["umount", "-l", os.fspath(target)], capture_output=True, check=False)


def mounts_under(top: Path) -> list[str]:
    """Mount points at or below ``top`` as /proc/self/mountinfo lists them, deepest first."""
    prefix = str(top)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        points = [line.split(" ")[4].replace("\\040", " ") for line in fh]
    inside = [p for p in points if p == prefix or p.startswith(prefix + "/")]
    return sorted(inside, key=len, reverse=True)


@contextlib.contextmanager
def mounted(args: list[str], target: str | os.PathLike[str]) -> Iterator[Path]:
    """``mount ARGS TARGET`` for the ``with`` block (the target dir is created first)."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    mount(args, target)
    try:
        yield target
    finally:
        unmount(target)


def tmpfs(where: str | os.PathLike[str], size_bytes: int, options: str = "") -> contextlib.AbstractContextManager[Path]:
    """A fresh tmpfs of ``size_bytes`` (rounded down to KiB, 4 KiB at least) at ``where``;
    ``options`` are more ``-o`` options (``ro``, ``nr_inodes=4``)."""
    size = f"size={max(4, size_bytes // 1024)}k"
    return mounted(["-t", "tmpfs", "-o", ",".join(filter(None, [size, options])), "tmpfs"], where)


class Mounter:
    """``mounter(args, target)`` mounts; ``close()`` unmounts every mount below ``top``."""

    def __init__(self, top: Path) -> None:
        self.top = top

    def __call__(self, args: list[str], target: Path) -> None:
        mount(args, target)

    def close(self) -> None:
        for point in mounts_under(self.top):
            unmount(point)
