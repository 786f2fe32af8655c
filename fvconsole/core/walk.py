"""The one bounded walk of a directory tree: every size and recursive scan in fvconsole goes through here.

A symlink is never followed (not even the top directory: a ``checkpoint-999 -> /`` once made
``checkpoints ls`` walk the whole filesystem), and a walk stops at a bound on the entries it
lists and on its depth, saying so ("size unknown: over N files") instead of running for
minutes. Directories are opened ``O_NOFOLLOW|O_DIRECTORY`` and, where permitted,
``O_NOATIME``, so walking changes no atime; one ``getdents`` pass and one ``lstat`` per child.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

#: Entries (files and directories) one walk lists before it gives up; a DCP checkpoint of a
#: 1,024-rank run has a few thousand files.
MAX_ENTRIES = 200_000
#: Directory depth below the top it descends to.
MAX_DEPTH = 64


@dataclass(frozen=True)
class TreeSize:
    """What a bounded walk found: bytes of the files listed, and whether that is all of them."""

    bytes: int
    files: int
    complete: bool = True
    #: Why the size is not the whole tree's (None when complete).
    note: str | None = None


def _open_dir(path: str, *, follow: bool = False) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | (0 if follow else os.O_NOFOLLOW) | getattr(os, "O_CLOEXEC", 0)
    noatime = getattr(os, "O_NOATIME", 0)
    if noatime:
        try:
            return os.open(path, flags | noatime)
        except PermissionError:
            pass  # not the owner: without O_NOATIME
    return os.open(path, flags)


@contextlib.contextmanager
def listing(path: str) -> Iterator[Iterator[os.DirEntry[str]]]:
    """``os.scandir(path)`` that leaves the directory's atime alone (``O_NOATIME`` where allowed).

    Why: listing must not change what it lists; a plain ``scandir`` by name updates the atime
    of every checkpoint dir ``checkpoints ls`` reads. ``path`` is followed if it is a symlink,
    as ``scandir(path)`` does; each entry's ``path`` is its name only (join it yourself).
    """
    fd = _open_dir(path, follow=True)
    try:
        with os.scandir(fd) as it:
            yield it
    finally:
        os.close(fd)


def tree_size(path: str | os.PathLike[str], *, max_entries: int | None = None,
              max_depth: int | None = None) -> TreeSize:
    """Sum of the sizes of what lies below ``path`` (lstat: a symlink counts as itself, never followed).

    A ``path`` that is itself a symlink is not walked at all. Unreadable directories are
    skipped (their contents do not count); the walk stops after ``max_entries`` entries or
    below ``max_depth`` (default :data:`MAX_ENTRIES`, :data:`MAX_DEPTH`), with ``complete=False`` and a note.
    """
    top = os.fspath(path)
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    try:
        st = os.lstat(top)
    except OSError:
        return TreeSize(0, 0)
    if stat.S_ISLNK(st.st_mode):
        return TreeSize(0, 0, False, "size unknown: a symlink (not followed)")
    if not stat.S_ISDIR(st.st_mode):
        return TreeSize(st.st_size, 1) if stat.S_ISREG(st.st_mode) else TreeSize(0, 0)
    total = files = listed = 0
    stack: list[tuple[str, int]] = [(top, 0)]
    note = None
    while stack and note is None:
        current, depth = stack.pop()
        try:
            fd = _open_dir(current)
        except OSError:
            continue
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    listed += 1
                    if listed > max_entries:
                        note = f"size unknown: over {max_entries} files"
                        break
                    try:
                        child = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(child.st_mode):
                        if depth + 1 > max_depth:
                            note = f"size unknown: deeper than {max_depth} directories"
                            break
                        stack.append((os.path.join(current, entry.name), depth + 1))
                    else:
                        total += child.st_size
                        files += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return TreeSize(total, files, note is None, note)


@dataclass(frozen=True)
class FoundFiles:
    """Files whose names end with a suffix, as ``os.walk`` lists them, and whether that is all of them."""

    paths: tuple[str, ...]
    complete: bool = True
    note: str | None = None


def find_files(top: str | os.PathLike[str], suffix: str, *, max_entries: int | None = None,
               max_depth: int | None = None) -> FoundFiles:
    """Every non-directory named ``*suffix`` below ``top``, classified as ``os.walk(top)`` does.

    Why this shape: FastVideo's ``_scan_manifest`` lists a dataset with ``os.walk`` (a symlink
    to a directory counts as a directory and is not entered; any other symlink is a file), and
    fvconsole must predict exactly which files it reads. ``top`` itself is entered even when
    it is a symlink, like ``os.walk``; nothing below it is followed. Bounded as
    :func:`tree_size`; unreadable directories are skipped, as ``os.walk`` skips them.
    """
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    found: list[str] = []
    listed = 0
    note = None
    stack: list[tuple[str, int]] = [(os.fspath(top), 0)]
    while stack and note is None:
        current, depth = stack.pop()
        try:
            fd = _open_dir(current) if depth else os.open(current, os.O_RDONLY | os.O_DIRECTORY
                                                          | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    listed += 1
                    if listed > max_entries:
                        note = f"not every file listed: over {max_entries} entries"
                        break
                    path = os.path.join(current, entry.name)
                    try:
                        is_dir = entry.is_dir()  # follows a symlink, as os.walk's classification does
                    except OSError:
                        is_dir = False
                    if is_dir:
                        if entry.is_symlink():
                            continue  # os.walk(followlinks=False) lists it as a directory, never enters it
                        if depth + 1 > max_depth:
                            note = f"not every file listed: deeper than {max_depth} directories"
                            break
                        stack.append((path, depth + 1))
                    elif entry.name.endswith(suffix):
                        found.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return FoundFiles(tuple(found), note is None, note)
