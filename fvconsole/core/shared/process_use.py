"""Which files live processes on this node hold open or memory-mapped: the one door to /proc/<pid>/fd|maps.

FastVideo refreshes a cache entry's mtimes only after a load succeeded, and a cold load of a
large model takes many minutes: during it the only evidence of use is the process state.
One pass over ``/proc`` builds a map (st_dev, st_ino) -> holders (and real path -> holders,
for filesystems whose maps device differs from ``st_dev``), so a scan asks it per entry
without touching ``/proc`` again. Every read is bounded: at most ``max_processes``
processes, ``max_fds`` descriptors and ``MAX_MAPS_BYTES`` of maps per process. What could
not be read (another user's process without the privilege, a cap reached) makes the check
``partial``, which callers show as a scan-level warning. A PID means nothing on another
host: the answer is about this node only. Pure reading, never an open of the held files.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.untrusted import MAX_PID, Fields
from fvconsole.core.shared.walk import TreeSize, tree_size

PROC = "/proc"
#: Caps on one pass (a node runs a few thousand processes; a hostile one cannot make us read forever).
MAX_PROCESSES = 32_768
MAX_FDS = 1_000_000
MAX_MAPS_BYTES = 16 * 2**20
MAX_COMMAND = 64

OPEN, MAPPED = "open", "mapped"
#: A process whose working directory lies in a tree holds it too (a shell ``cd``-ed into a
#: checkpoint, a job started there): the directory is its (st_dev, st_ino), like a file's.
CWD = "working directory"


@dataclass(frozen=True, order=True)
class Holder:
    """A live process holding a file: its pid, its command (``/proc/<pid>/comm``, untrusted) and how."""

    pid: int
    command: str
    how: str  # OPEN, MAPPED or CWD

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_json(cls, doc: Any, shown: str, what: str) -> Holder:
        """A holder as :meth:`to_json` wrote it (another node's ``cache ls --json``): UntrustedError naming the field."""
        f = Fields(doc, shown, what)
        return cls(f.int("pid", min=1, max=MAX_PID), f.str("command", max_len=4096), f.str("how", max_len=64))


@dataclass(frozen=True)
class ProcessUse:
    """The result of one pass over /proc: who holds which file, and whether the pass saw everything."""

    by_inode: dict[tuple[int, int], frozenset[Holder]] = field(default_factory=dict)
    by_path: dict[str, frozenset[Holder]] = field(default_factory=dict)
    processes: int = 0
    unreadable: int = 0
    #: Why the pass did not see every process (None: it did).
    partial: str | None = None

    def holders(self, directory: str, listing: Iterable[tuple[str, os.stat_result]]) -> tuple[Holder, ...]:
        """Holders of any regular file of ``listing`` ((name, lstat) pairs of the real path ``directory``), sorted."""
        found: set[Holder] = set()
        by_inode, by_path = self.by_inode, self.by_path
        for name, st in listing:
            if not stat.S_ISREG(st.st_mode):
                continue
            held = by_inode.get((st.st_dev, st.st_ino))
            if held:
                found |= held
            if by_path:
                found |= by_path.get(f"{directory}/{name}", frozenset())
        return tuple(sorted(found))

    def held_in(self, walked: TreeSize) -> set[Holder]:
        """Holders of what a walk made with ``watch=self.by_inode`` met (any file or directory of the tree)."""
        found: set[Holder] = set()
        for key in walked.watched:
            found |= self.by_inode.get(key, frozenset())
        return found

    def tree_holders(self, path: str) -> tuple[Holder, ...]:
        """Live processes holding anything in the tree ``path`` (never followed), by inode whatever path
        they used (a bind mount, another mount namespace) and by real path: sorted."""
        found = self.held_in(tree_size(path, watch=self.by_inode)) if self.by_inode else set()
        real = os.path.realpath(path)
        for held in self.under(real).by_path.values():
            found |= held
        found |= self.by_path.get(real, frozenset())
        return tuple(sorted(found))

    def under(self, directory: str) -> ProcessUse:
        """The same answer, its path table cut to what lies below ``directory`` (a scan asks only about those)."""
        prefix = directory.rstrip("/") + "/"
        paths = {path: held for path, held in self.by_path.items() if path.startswith(prefix)}
        return ProcessUse(by_inode=self.by_inode, by_path=paths, processes=self.processes,
                          unreadable=self.unreadable, partial=self.partial)


def holders_text(holders: tuple[Holder, ...]) -> tuple[str, str, str, str]:
    """(how, pid, command, more) for the ``skip.in_use_process`` reason: the first holder, then a count."""
    first = holders[0]
    pids = {h.pid for h in holders}
    rest = len(pids) - 1
    more = f" and {plural(rest, 'more process', 'more processes')}" if rest else ""
    return first.how, str(first.pid), first.command, more


def scan_processes(*, proc: str = PROC, max_processes: int = MAX_PROCESSES, max_fds: int = MAX_FDS) -> ProcessUse:
    """One bounded pass over every process's fds and maps (this process excluded)."""
    me = os.getpid()
    by_inode: dict[tuple[int, int], set[Holder]] = {}
    by_path: dict[str, set[Holder]] = {}
    try:
        pids = sorted(int(name) for name in os.listdir(proc) if name.isdigit())
    except OSError as exc:
        return ProcessUse(partial=f"process check skipped: cannot list {proc} ({exc.strerror})")
    seen = 0
    unseen: list[tuple[int, str, str]] = []  # (pid, command, what of it could not be read)
    fds_left = max_fds
    capped = None
    for pid in pids:
        if pid == me:
            continue
        if seen >= max_processes:
            capped = f"stopped after {max_processes} processes"
            break
        seen += 1
        base = f"{proc}/{pid}"
        command = _command(base)
        if command is None:
            continue  # exited since the listing
        fd_ok, fds_left = _read_fds(base, Holder(pid, command, OPEN), by_inode, by_path, fds_left)
        _read_cwd(base, Holder(pid, command, CWD), by_inode, by_path)
        maps_ok = _read_maps(base, Holder(pid, command, MAPPED), by_inode, by_path)
        if fds_left <= 0 and capped is None:
            capped = f"stopped after {max_fds} file descriptors"
        if not (fd_ok and maps_ok) and os.path.exists(base):  # one that exited meanwhile holds nothing
            unseen.append((pid, command, "maps" if fd_ok else "open files" if maps_ok else "open files and maps"))
        if capped:
            break
    freeze = {k: frozenset(v) for k, v in by_inode.items()}
    return ProcessUse(by_inode=freeze, by_path={k: frozenset(v) for k, v in by_path.items()},
                      processes=seen, unreadable=len(unseen), partial=partial_text(unseen, capped))


def partial_text(unseen: list[tuple[int, str, str]], capped: str | None) -> str | None:
    """One line saying what the pass did not see: which processes, which part of each, and (not
    root) that they are other users'; None when it saw everything."""
    if not unseen and not capped:
        return None
    parts = []
    if len(unseen) == 1:
        pid, command, what = unseen[0]
        parts.append(f"the {what} of pid {pid} ({command}) could not be read")
    elif unseen:
        named = ", ".join(f"{pid} ({command})" for pid, command, _what in unseen[:3])
        more = f" and {len(unseen) - 3} more" if len(unseen) > 3 else ""
        parts.append(f"{len(unseen)} processes could not be read: pids {named}{more}")
    if unseen and os.geteuid() != 0:
        parts[-1] += " (other users' processes are seen only by root)"
    if capped:
        parts.append(capped)
    return f"process check partial: {'; '.join(parts)}; files held there are not seen"


def _command(base: str) -> str | None:
    try:
        with open(f"{base}/comm", "rb") as fh:
            raw = fh.read(MAX_COMMAND)
    except FileNotFoundError:
        return None
    except OSError:
        return "?"
    return raw.decode("utf-8", "replace").rstrip("\n") or "?"


def _read_fds(base: str, holder: Holder, by_inode: dict[tuple[int, int], set[Holder]],
              by_path: dict[str, set[Holder]], budget: int) -> tuple[bool, int]:
    """(readable, budget left): each fd that names a file is stat'ed through its magic link."""
    try:
        fds = os.listdir(f"{base}/fd")
    except FileNotFoundError:
        return True, budget  # gone, or a zombie
    except OSError:
        return False, budget
    for fd in fds:
        if budget <= 0:
            break
        budget -= 1
        link = f"{base}/fd/{fd}"
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if not target.startswith("/"):
            continue  # socket:[..], pipe:[..], anon_inode:..: not a file
        try:
            st = os.stat(link)  # the open file itself, even when deleted or renamed since
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            _note(holder, (st.st_dev, st.st_ino), target, by_inode, by_path)
    return True, budget


def _read_cwd(base: str, holder: Holder, by_inode: dict[tuple[int, int], set[Holder]],
              by_path: dict[str, set[Holder]]) -> None:
    """The working directory, by identity (stat through the magic link) and path (another user's
    process without the privilege: unseen, as its fds are, and already counted as partial)."""
    link = f"{base}/cwd"
    try:
        target = os.readlink(link)
        st = os.stat(link)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        _note(holder, (st.st_dev, st.st_ino), target, by_inode, by_path)


#: What the kernel appends to the path of an fd's or a mapping's file that was unlinked or
#: renamed over since it was opened (``/proc/<pid>/fd/N`` links and ``/proc/<pid>/maps`` lines).
DELETED = " (deleted)"


def _note(holder: Holder, inode: tuple[int, int], path: str, by_inode: dict[tuple[int, int], set[Holder]],
          by_path: dict[str, set[Holder]]) -> None:
    """The one rule for a held file, whether by a descriptor or a mapping: its (device, inode),
    and its path without the kernel's `` (deleted)`` suffix. A shard replaced (renamed over) while
    a process reads it is no longer the entry's inode, but the process still reads that entry:
    its path says so (the descriptor was missed, and evicted, while the mapping was kept)."""
    by_inode.setdefault(inode, set()).add(holder)
    if path.startswith("/"):
        by_path.setdefault(path.removesuffix(DELETED), set()).add(holder)


def _read_maps(base: str, holder: Holder, by_inode: dict[tuple[int, int], set[Holder]],
               by_path: dict[str, set[Holder]]) -> bool:
    """File-backed mappings: ``addr perms offset major:minor inode path`` per line."""
    try:
        with open(f"{base}/maps", "rb") as fh:
            data = fh.read(MAX_MAPS_BYTES)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for line in data.split(b"\n"):
        parts = line.split(None, 5)
        if len(parts) < 6 or parts[4] == b"0":
            continue
        try:
            major, minor = (int(x, 16) for x in parts[3].split(b":"))
            inode = int(parts[4])
        except ValueError:
            continue
        _note(holder, (os.makedev(major, minor), inode), parts[5].decode("utf-8", "surrogateescape"),
              by_inode, by_path)
    return True
