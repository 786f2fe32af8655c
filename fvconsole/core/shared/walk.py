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
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field

from fvconsole.core.shared.safe_read import open_noatime

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
    #: The newest mtime of a file listed (None: no file): a checkpoint's age (``core/retention``).
    #: Not compared: two walks of one tree are equal whenever its files are.
    newest_mtime: float | None = field(default=None, compare=False)
    #: The (st_dev, st_ino) of the walk's ``watch`` it met, the top and every directory included
    #: (who holds a file of a tree, by inode: ``core/shared/process_use.py``).
    watched: frozenset[tuple[int, int]] = field(default=frozenset(), compare=False)


def _open_dir(path: str, *, follow: bool = False) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | (0 if follow else os.O_NOFOLLOW) | getattr(os, "O_CLOEXEC", 0)
    return open_noatime(path, flags)


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


def _walk(top: str, visit: Callable[[str, os.DirEntry[str]], bool], open_top: Callable[[str], int],
          max_entries: int, max_depth: int) -> str | None:
    """The bounded stack walk both callers share: ``visit(dir, entry)`` says whether to descend.

    Returns None when every entry was listed, else which bound stopped it (``"entries"`` or
    ``"depth"``). Unreadable directories are skipped. Below the top, directories are opened
    ``O_NOFOLLOW`` (and ``O_NOATIME`` where allowed); ``open_top`` opens the top itself.
    """
    listed = 0
    stack: list[tuple[str, int]] = [(top, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            fd = _open_dir(current) if depth else open_top(current)
        except OSError:
            continue
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    listed += 1
                    if listed > max_entries:
                        return "entries"
                    if visit(current, entry):
                        if depth + 1 > max_depth:
                            return "depth"
                        stack.append((os.path.join(current, entry.name), depth + 1))
        except OSError:
            pass
        finally:
            os.close(fd)
    return None


def tree_size(path: str | os.PathLike[str], *, max_entries: int | None = None,
              max_depth: int | None = None, watch: Container[tuple[int, int]] | None = None) -> TreeSize:
    """Sum of the sizes of what lies below ``path`` (lstat: a symlink counts as itself, never followed).

    A ``path`` that is itself a symlink is not walked at all. Unreadable directories are
    skipped (their contents do not count); the walk stops after ``max_entries`` entries or
    below ``max_depth`` (default :data:`MAX_ENTRIES`, :data:`MAX_DEPTH`), with ``complete=False`` and a note.
    ``watch``: (st_dev, st_ino) pairs to look out for on the way (the walk lstats every entry
    anyway); those met are the result's ``watched``.
    """
    top = os.fspath(path)
    try:
        st = os.lstat(top)
    except OSError:
        return TreeSize(0, 0)
    if stat.S_ISLNK(st.st_mode):
        return TreeSize(0, 0, False, "size unknown: a symlink (not followed)")
    watched: set[tuple[int, int]] = set()
    if watch is not None and (st.st_dev, st.st_ino) in watch:
        watched.add((st.st_dev, st.st_ino))
    if not stat.S_ISDIR(st.st_mode):
        found = frozenset(watched)
        return TreeSize(st.st_size, 1, watched=found) if stat.S_ISREG(st.st_mode) else TreeSize(0, 0, watched=found)
    total = files = 0
    newest: float | None = None

    def visit(_current: str, entry: os.DirEntry[str]) -> bool:
        nonlocal total, files, newest
        try:
            child = entry.stat(follow_symlinks=False)
        except OSError:
            return False
        if watch is not None and (child.st_dev, child.st_ino) in watch:
            watched.add((child.st_dev, child.st_ino))
        if stat.S_ISDIR(child.st_mode):
            return True
        total += child.st_size
        files += 1
        if newest is None or child.st_mtime > newest:
            newest = child.st_mtime
        return False

    max_entries = MAX_ENTRIES if max_entries is None else max_entries  # read at call time: tests lower it
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    stopped = _walk(top, visit, _open_dir, max_entries, max_depth)
    if stopped is None:
        return TreeSize(total, files, newest_mtime=newest, watched=frozenset(watched))
    note = (f"size unknown: over {max_entries} files" if stopped == "entries"
            else f"size unknown: deeper than {max_depth} directories")
    return TreeSize(total, files, False, note, newest, frozenset(watched))


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
    found: list[str] = []

    def visit(current: str, entry: os.DirEntry[str]) -> bool:
        try:
            is_dir = entry.is_dir()  # follows a symlink, as os.walk's classification does
        except OSError:
            is_dir = False
        if is_dir:
            # os.walk(followlinks=False) lists a symlink to a directory as one, never enters it
            return not entry.is_symlink()
        if entry.name.endswith(suffix):
            found.append(os.path.join(current, entry.name))
        return False

    def open_top(path: str) -> int:
        return _open_dir(path, follow=True)

    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    stopped = _walk(os.fspath(top), visit, open_top, max_entries, max_depth)
    if stopped is None:
        return FoundFiles(tuple(found))
    note = (f"not every file listed: over {max_entries} entries" if stopped == "entries"
            else f"not every file listed: deeper than {max_depth} directories")
    return FoundFiles(tuple(found), False, note)
