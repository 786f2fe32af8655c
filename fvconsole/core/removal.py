"""The one door for deleting anything: every tree, leftover, staging dir and old set goes here.

``remove_tree`` removes a tree like ``rm -rf --one-file-system``, but safe against hostile
trees; ``remove_flat_dir`` removes a directory of plain files whose every name the caller
recognises (a staging dir, a replaced sidecar set); ``remove_empty_dir`` removes a directory
only if it is empty. ``tests/test_doors.py`` proves no other module of ``fvconsole`` deletes
a tree (no ``shutil.rmtree``, no ``os.rmdir``, unlinks only of its own named temp files).

Why not ``shutil.rmtree``: it recurses (a 1500-deep chain raises RecursionError), and it
descends into bind mounts. Here the walk is iterative (an explicit stack), works only through
directory file descriptors (``openat``/``unlinkat`` with ``O_NOFOLLOW | O_DIRECTORY``, so a
symlink is unlinked, never followed), holds at most ``MAX_OPEN_DIRS`` descriptors however
deep the tree is, and never enters a directory on another mount than the tree's top (see
``mounts``). A file or directory that cannot be removed does not stop the rest: everything
that can go, goes, and PartialRemoval says what stayed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from fvconsole.core.mounts import Place, place_of, same_place

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: Directory descriptors held at once; deeper levels are closed and re-opened through "..".
MAX_OPEN_DIRS = 32
#: Deeper than this a tree is left in place (its walk state would grow without bound).
MAX_DEPTH = 100_000


class PartialRemoval(OSError):
    """Some files of a tree could not be removed; the rest were, ``freed`` bytes of them.

    Removal goes on past a failing file (the entry is already hidden, so what can be freed
    should be); the first failure is kept as the error.
    """

    def __init__(self, first: OSError, freed: int, failures: int) -> None:
        super().__init__(first.errno, first.strerror, first.filename)
        self.freed = freed
        self.failures = failures


def remove_tree(path: str) -> int:
    """Remove ``path`` (a directory, a symlink or a file) without following any symlink.

    Returns the bytes of regular files this call unlinked; files that vanish under us
    (a concurrent evictor) are not counted and are not errors. Raises PartialRemoval when
    anything stayed: a file that cannot be unlinked, a mount point inside (never crossed),
    a directory that moved during the walk.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(path)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise _explained(exc, os.path.basename(path)) from None
        return st.st_size if stat.S_ISREG(st.st_mode) else 0
    # The parent is the cache root as the user named it (it may itself be a symlink).
    parent_fd = os.open(os.path.dirname(path) or ".", _DIR_FLAGS & ~os.O_NOFOLLOW)
    walk = _Walk(parent_fd)
    try:
        walk.run(os.path.basename(path))
    finally:
        walk.close_all()
        os.close(parent_fd)
    if walk.failures:
        raise PartialRemoval(walk.failures[0], walk.freed, len(walk.failures))
    return walk.freed


def remove_flat_dir(path: str, recognised: Callable[[str], bool],
                    step: Callable[[str], None] = lambda label: None) -> bool:
    """Delete a directory of plain files, all of them named as ``recognised`` says; True when it is gone.

    Works through a directory fd (a swapped-in symlink cannot redirect the unlinks) and never
    crosses a mount: the dir must be on its parent's mount. Anything unrecognised, any
    subdirectory, a mount: it unlinks only what it recognises and keeps the dir (False).
    ``step(label)`` runs before each unlink and the rmdir (the migration's fault hook).
    """
    try:
        parent_fd = os.open(os.path.dirname(path) or ".", _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fd = os.open(os.path.basename(path), _DIR_FLAGS, dir_fd=parent_fd)
        except OSError:
            return False
        clean = same_place(place_of(fd), place_of(parent_fd))
        try:
            for name in os.listdir(fd) if clean else ():
                st = os.lstat(name, dir_fd=fd)
                if not recognised(name) or stat.S_ISDIR(st.st_mode):
                    clean = False
                    continue
                step(f"unlink {path}/{name}")
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        if not clean:
            return False
        step(f"rmdir {path}")
        try:
            os.rmdir(os.path.basename(path), dir_fd=parent_fd)
        except OSError:
            return False
        return True
    finally:
        os.close(parent_fd)


def remove_empty_dir(path: str) -> bool:
    """``rmdir`` (never anything inside it); True when the directory is gone."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _explained(exc: OSError, name: str) -> OSError:
    """The failure with the name it concerns; EBUSY on unlink/rmdir means something is mounted there."""
    if exc.errno == errno.EBUSY:
        return OSError(errno.EBUSY, "a mount point (something is mounted there); not removed", name)
    return OSError(exc.errno, exc.strerror, name)


@dataclass
class _Dir:
    """One directory on the walk's stack (mutable scratch, local to one removal)."""

    name: str  # in its parent
    fd: int | None  # None once closed to bound descriptor use
    ident: tuple[int, int]  # (st_dev, st_ino): a re-opened ".." must be this directory
    failures_before: int  # len(failures) when it was pushed: more at the end = something inside stayed
    subdirs: list[str] = field(default_factory=list)  # still to remove


class _Walk:
    """Depth-first removal with an explicit stack: constant Python stack, bounded descriptors."""

    def __init__(self, parent_fd: int) -> None:
        self.parent_fd = parent_fd
        self.stack: list[_Dir] = []
        self.lowest_open = 0  # stack[lowest_open:] have open fds; the ones below were closed
        self.failures: list[OSError] = []
        self.freed = 0
        self.place: Place | None = None

    # ------------------------------------------------------------ walk

    def run(self, name: str) -> None:
        fd = self._open_dir(self.parent_fd, name, name)
        if fd is None:
            return
        self.place = place_of(fd)
        if not same_place(self.place, place_of(self.parent_fd)):
            os.close(fd)
            self._fail(errno.EXDEV, "is a mount point: removal never crosses a mount", name)
            return
        self._push(name, fd)
        while self.stack:
            top = self.stack[-1]
            if top.subdirs:
                self._descend(top, top.subdirs.pop())
            else:
                self._finish(top)

    def _descend(self, top: _Dir, name: str) -> None:
        """Open ``name`` inside ``top``, check it is on the same mount, empty it and push it."""
        assert top.fd is not None  # the top of the stack is always open
        fd = self._open_dir(top.fd, name, self._rel(name))
        if fd is None:
            return
        if not same_place(place_of(fd), self.place):  # type: ignore[arg-type]
            os.close(fd)
            self._fail(errno.EXDEV, "a mount point inside: never descended into", self._rel(name))
            return
        if len(self.stack) >= MAX_DEPTH:
            os.close(fd)
            self._fail(errno.ELOOP, f"more than {MAX_DEPTH} directory levels deep: not removed", self._rel(name))
            return
        self._push(name, fd)

    def _push(self, name: str, fd: int) -> None:
        """Unlink every non-directory in ``fd`` and put the directory on the stack (unless unlistable)."""
        try:
            st = os.fstat(fd)
            with os.scandir(fd) as it:
                children = [(item.name, item.is_dir(follow_symlinks=False)) for item in it]
        except OSError as exc:
            os.close(fd)
            self._fail(exc.errno, exc.strerror, self._rel(name) if self.stack else name)
            return
        frame = _Dir(name, fd, (st.st_dev, st.st_ino), len(self.failures))
        self.stack.append(frame)
        for child, is_dir in children:
            if is_dir:
                frame.subdirs.append(child)
            else:
                self._unlink(fd, child)
        self._bound_open_dirs()

    def _finish(self, top: _Dir) -> None:
        """``top`` is empty (or holds what could not go): close it and rmdir it from its parent."""
        self.stack.pop()
        parent_fd = self._parent_fd(top)
        os.close(top.fd)  # type: ignore[arg-type]
        top.fd = None
        if parent_fd is None:  # the parent moved during the walk: stop, touch nothing more
            self.close_all()
            return
        try:
            os.rmdir(top.name, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if len(self.failures) == top.failures_before:  # else: not empty, already explained
                self.failures.append(_explained(exc, self._rel(top.name)))

    # ------------------------------------------------------------ descriptors

    def _parent_fd(self, child: _Dir) -> int | None:
        """The fd of the directory now on top (re-opened through ".." if it was closed)."""
        if not self.stack:
            return self.parent_fd
        parent = self.stack[-1]
        if parent.fd is not None:
            return parent.fd
        try:
            fd = os.open("..", _DIR_FLAGS, dir_fd=child.fd)
            st = os.fstat(fd)
        except OSError as exc:
            self._fail(exc.errno, f"cannot re-open the parent directory ({exc.strerror})", self._rel(child.name))
            return None
        if (st.st_dev, st.st_ino) != parent.ident:
            os.close(fd)
            self._fail(errno.ESTALE, "moved during removal; stopped here", self._rel(child.name))
            return None
        parent.fd = fd
        self.lowest_open = len(self.stack) - 1
        return fd

    def _bound_open_dirs(self) -> None:
        while len(self.stack) - self.lowest_open > MAX_OPEN_DIRS:
            frame = self.stack[self.lowest_open]
            os.close(frame.fd)  # type: ignore[arg-type]
            frame.fd = None
            self.lowest_open += 1

    def close_all(self) -> None:
        """Close every fd still held (also after a failure that stops the walk)."""
        for frame in self.stack:
            if frame.fd is not None:
                os.close(frame.fd)
                frame.fd = None
        self.stack.clear()

    # ------------------------------------------------------------ single files

    def _open_dir(self, dir_fd: int, name: str, rel: str) -> int | None:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and self.stack:
                # Replaced by a symlink or file since the listing: unlink it (never followed).
                self._unlink(dir_fd, name)
                return None
            self._fail(exc.errno, exc.strerror, rel)
            return None

    def _unlink(self, dir_fd: int, name: str) -> None:
        """Unlink one non-directory, counting a regular file's bytes."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.failures.append(_explained(exc, self._rel(name)))
            return
        if stat.S_ISREG(st.st_mode):
            self.freed += st.st_size

    # ------------------------------------------------------------ reporting

    def _fail(self, code: int | None, message: str | None, rel: str) -> None:
        self.failures.append(OSError(code or errno.EIO, message or "failed", rel))

    def _rel(self, name: str) -> str:
        """``name`` relative to the tree's top (for messages; only built on failure)."""
        parts = [frame.name for frame in self.stack[1:]] + [name]
        rel = "/".join(parts)
        return rel if len(rel) <= 200 else "…/" + rel[-197:]
