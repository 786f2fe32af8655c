"""The one door for deleting anything: every tree, leftover, staging dir and old set goes here.

``remove_tree`` removes a tree like ``rm -rf --one-file-system``, but safe against hostile
trees; ``remove_flat_dir`` removes a directory of plain files whose every name the caller
recognises (a staging dir, a replaced sidecar set); ``remove_empty_dir`` removes a directory
only if it is empty. ``tests/architecture/test_doors.py`` proves no other module of ``fvconsole`` deletes
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
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.mounts import STATX_BASIC_STATS, Place, place_of, same_place, statx_raw
from fvconsole.core.shared.safe_read import open_noatime

#: Directories are opened without moving their atime (``open_noatime``): the removability check
#: runs in dry runs too, and a dry run must not move the atimes of the directories it only looked at.
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

    def left_in(self, hidden: str) -> str:
        """``2 files left in HIDDEN, 4096 bytes freed``: what an eviction or a prune says of the tree it renamed."""
        return f"{plural(self.failures, 'file')} left in {hidden}, {plural(self.freed, 'byte')} freed"


def remove_tree(path: str, progress: Callable[[int, int], None] | None = None, *, last: str | None = None) -> int:
    """Remove ``path`` (a directory, a symlink or a file) without following any symlink.

    ``last``: a file directly inside ``path`` removed only after everything else went, and kept
    when anything stayed (a prune's record of what its hidden leftover was: a report names it).

    Returns the bytes of regular files this call unlinked; files that vanish under us
    (a concurrent evictor) are not counted and are not errors. Raises PartialRemoval when
    anything stayed: a file that cannot be unlinked, a mount point inside (never crossed),
    a directory that moved during the walk. ``progress(bytes, files)`` runs after each
    unlink (a checkpoint of 100,000 files takes a while: the prune's progress line).
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
    parent_fd = open_noatime(os.path.dirname(path) or ".", _DIR_FLAGS & ~os.O_NOFOLLOW)
    walk = _Walk(parent_fd, progress, last)
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
        parent_fd = open_noatime(os.path.dirname(path) or ".", _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fd = open_noatime(os.path.basename(path), _DIR_FLAGS, dir_fd=parent_fd)
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

    def __init__(self, parent_fd: int, progress: Callable[[int, int], None] | None = None,
                 last: str | None = None) -> None:
        self.parent_fd = parent_fd
        self.last = last  # a file of the top directory removed after all else (``remove_tree``)
        self.stack: list[_Dir] = []
        self.lowest_open = 0  # stack[lowest_open:] have open fds; the ones below were closed
        self.failures: list[OSError] = []
        self.freed = 0
        self.files = 0
        self.progress = progress
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
        """List ``fd``, let the visitor judge it and each child, and put it on the stack."""
        try:
            st = os.fstat(fd)
            with os.scandir(fd) as it:
                children = [(item.name, item.is_dir(follow_symlinks=False)) for item in it]
        except OSError as exc:
            os.close(fd)
            self._fail(exc.errno, exc.strerror, self._rel(name) if self.stack else name)
            return
        if not self._enter(name, fd):
            os.close(fd)
            return
        frame = _Dir(name, fd, (st.st_dev, st.st_ino), len(self.failures))
        self.stack.append(frame)
        for child, is_dir in children:
            if not self._visit(fd, st, child, is_dir):
                return
            if is_dir:
                frame.subdirs.append(child)
        self._bound_open_dirs()

    def _finish(self, top: _Dir) -> None:
        """``top`` is empty (or holds what could not go): close it and let the visitor leave it."""
        self.stack.pop()
        if self.last is not None and not self.stack and len(self.failures) == top.failures_before:
            self._unlink(top.fd, self.last)  # type: ignore[arg-type]
        parent_fd = self._parent_fd(top)
        os.close(top.fd)  # type: ignore[arg-type]
        top.fd = None
        if parent_fd is None:  # the parent moved during the walk: stop, touch nothing more
            self.close_all()
            return
        self._leave(top, parent_fd)

    # ------------------------------------------------------------ the remover's visits (_Check overrides them)

    def _enter(self, name: str, fd: int) -> bool:
        """Whether to walk into the directory ``fd`` just listed (False: it was judged, stop here)."""
        return True

    def _visit(self, fd: int, st: os.stat_result, child: str, is_dir: bool) -> bool:
        """One child of the directory ``fd`` (``st``): a non-directory is unlinked; False stops the walk."""
        if not is_dir and not (child == self.last and len(self.stack) == 1):
            self._unlink(fd, child)
        return True

    def _leave(self, top: _Dir, parent_fd: int) -> None:
        """Remove the emptied ``top`` from its parent."""
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
            fd = open_noatime("..", _DIR_FLAGS, dir_fd=child.fd)
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
            return open_noatime(name, _DIR_FLAGS, dir_fd=dir_fd)
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
        self.files += 1
        if self.progress is not None:
            self.progress(self.freed, self.files)

    # ------------------------------------------------------------ reporting

    def _fail(self, code: int | None, message: str | None, rel: str) -> None:
        self.failures.append(OSError(code or errno.EIO, message or "failed", rel))

    def _rel(self, name: str) -> str:
        """``name`` relative to the tree's top (for messages; only built on failure)."""
        parts = [frame.name for frame in self.stack[1:]] + [name]
        rel = "/".join(parts)
        return rel if len(rel) <= 200 else "…/" + rel[-197:]


# ================================================================ removability (before the first rename)


@dataclass(frozen=True)
class Obstacle:
    """The first thing in a tree this process could not remove: where, why, and as whom."""

    path: str
    why: str
    user: str


def removal_obstacle(path: str) -> Obstacle | None:
    """What would stop this process removing all of ``path`` (None: nothing), changing nothing.

    Why before, not during: eviction hides an entry by renaming it, and a rename needs only
    the root's permissions; an entry whose insides this process cannot remove would become a
    cache miss that frees nothing. Checked the way the kernel will judge the removal, on the
    same fd-based walk as ``remove_tree`` (no symlink followed, no mount crossed): write and
    search permission on every directory (and read, to list it), no immutable or append-only
    flag on anything (``FS_IOC_GETFLAGS`` on directories, statx attributes on other files),
    and in a sticky directory only what this user owns, unless it owns the directory (or has
    CAP_FOWNER). Permissions come from ``faccessat``, so capabilities and ACLs count.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    parent = os.path.dirname(path) or "."
    check = _Check(path, _credentials())
    try:
        parent_fd = open_noatime(parent, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError as exc:
        return Obstacle(parent, exc.strerror or "cannot open", check.creds.user)
    try:
        check.parent_fd = parent_fd
        if check.top_removable(os.path.basename(path), st, parent) and stat.S_ISDIR(st.st_mode):
            check.run(os.path.basename(path))
    finally:
        check.close_all()
        os.close(parent_fd)
    return check.obstacle


@dataclass(frozen=True)
class _Creds:
    uid: int
    user: str
    fowner: bool  # CAP_FOWNER: the sticky-bit rule does not apply


#: Capability numbers (linux/capability.h).
_CAP_FOWNER = 3
_FS_IOC_GETFLAGS = 0x80086601
_FS_IMMUTABLE_FL, _FS_APPEND_FL = 0x10, 0x20  # the same bits as STATX_ATTR_IMMUTABLE / _APPEND


def _credentials() -> _Creds:
    import pwd

    uid = os.geteuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = f"uid {uid}"
    return _Creds(uid, user, _has_capability(_CAP_FOWNER, default=uid == 0))


def _has_capability(cap: int, default: bool) -> bool:
    """Whether ``cap`` is in this process's effective set (``default`` when /proc cannot tell)."""
    try:
        with open("/proc/self/status", "rb") as fh:
            status = fh.read(1 << 16)
    except OSError:
        return default
    for line in status.splitlines():
        if line.startswith(b"CapEff:"):
            try:
                return bool(int(line.split()[1], 16) >> cap & 1)
            except (IndexError, ValueError):
                return default
    return default


def _statx_attributes(dir_fd: int, name: str) -> int | None:
    """The immutable/append attributes statx reports for ``name`` (``""``: ``dir_fd`` itself), or None."""
    raw = statx_raw(dir_fd, name, STATX_BASIC_STATS)
    if raw is None:
        return None
    attributes, = struct.unpack_from("=Q", raw, 8)
    supported, = struct.unpack_from("=Q", raw, 56)
    return attributes & supported


def _dir_flags(fd: int) -> int | None:
    """The inode flags of an open directory (``FS_IOC_GETFLAGS``; statx where the ioctl is unsupported)."""
    import fcntl

    buf = bytearray(8)
    try:
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf, True)
    except OSError:
        return _statx_attributes(fd, "")
    return int.from_bytes(buf[:4], sys.byteorder)


def _flag_problem(flags: int | None) -> str | None:
    if flags and flags & _FS_IMMUTABLE_FL:
        return "immutable (chattr +i)"
    if flags and flags & _FS_APPEND_FL:
        return "append-only (chattr +a)"
    return None


def _missing_access(fd: int, modes: tuple[tuple[int, str], ...]) -> list[str]:
    return [word for mode, word in modes if not os.access(".", mode, dir_fd=fd)]


class _Check(_Walk):
    """The removal walk without removing: stops at the first thing the kernel would refuse."""

    def __init__(self, top_path: str, creds: _Creds) -> None:
        super().__init__(-1)
        self.top_path = top_path
        self.creds = creds
        self.obstacle: Obstacle | None = None

    def top_removable(self, name: str, st: os.stat_result, parent: str) -> bool:
        """The parent's side: write+search on it, no append-only/immutable flag, the sticky rule."""
        missing = _missing_access(self.parent_fd, ((os.W_OK, "write"), (os.X_OK, "search")))
        if missing:
            return self._stop(parent, f"no {' or '.join(missing)} permission on the directory")
        problem = _flag_problem(_dir_flags(self.parent_fd))
        if problem:
            return self._stop(parent, f"the directory is {problem}")
        pst = os.fstat(self.parent_fd)
        if not self._sticky_allows(pst.st_mode, pst.st_uid, st.st_uid):
            return self._stop(self.top_path, "owned by another user in a sticky directory")
        if not stat.S_ISDIR(st.st_mode):
            problem = _flag_problem(_statx_attributes(self.parent_fd, name))
            if problem:
                return self._stop(self.top_path, problem)
        return True

    def _sticky_allows(self, dir_mode: int, dir_uid: int, child_uid: int) -> bool:
        me = self.creds.uid
        return not dir_mode & stat.S_ISVTX or self.creds.fowner or child_uid == me or dir_uid == me

    def _stop(self, path: str, why: str) -> bool:
        if self.obstacle is None:
            self.obstacle = Obstacle(path, why, self.creds.user)
        self.close_all()
        return False

    def _here(self, name: str | None = None) -> str:
        parts = [frame.name for frame in self.stack[1:]] + ([name] if name else [])
        return os.path.join(self.top_path, *parts)

    # ------------------------------------------------------------ the walk's visits, without removing

    def _enter(self, name: str, fd: int) -> bool:
        problem = _flag_problem(_dir_flags(fd))
        missing = _missing_access(fd, ((os.R_OK, "read"), (os.W_OK, "write"), (os.X_OK, "search")))
        if problem or missing:
            return self._stop(self._here(name) if self.stack else self.top_path,
                              problem or f"no {' or '.join(missing)} permission")
        return True

    def _visit(self, fd: int, st: os.stat_result, child: str, is_dir: bool) -> bool:
        if not (st.st_mode & stat.S_ISVTX or not is_dir):
            return True
        try:
            cst = os.stat(child, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return True
        except OSError as exc:
            return self._stop(self._here(child), exc.strerror or "cannot stat")
        if not self._sticky_allows(st.st_mode, st.st_uid, cst.st_uid):
            return self._stop(self._here(child), "owned by another user in a sticky directory")
        problem = _flag_problem(_statx_attributes(fd, child)) if not is_dir and stat.S_ISREG(cst.st_mode) else None
        return self._stop(self._here(child), problem) if problem else True

    def _leave(self, top: _Dir, parent_fd: int) -> None:
        return None  # nothing is removed

    def _unlink(self, dir_fd: int, name: str) -> None:
        return None  # a symlink or file that replaced a directory: removable like any (its dir was checked)

    def _fail(self, code: int | None, message: str | None, rel: str) -> None:
        where = os.path.join(self.top_path, rel) if self.stack else self.top_path
        self._stop(where, message or os.strerror(code or errno.EIO))
