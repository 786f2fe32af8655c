"""Who runs this process, in terms that stay meaningful on a shared filesystem.

Why: a PID alone means nothing on another login node, or in another container on the same
node (another PID namespace numbers its processes from 1). Anything fvconsole leaves in a
shared directory that says "process P owns this" (a staging dir, a lock file) therefore
also says *where* P runs: the hostname, the kernel boot id (a rebooted or different machine
has another one) and the inode of the PID namespace (``/proc/self/ns/pid``; a container,
or ``unshare --pid``, has another one). Only a process of the same identity can judge
whether P is still alive; everyone else must leave the thing alone and report it.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from dataclasses import dataclass

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Longest host label put into a file name (the identity key disambiguates the rest).
LABEL_MAX = 40


@dataclass(frozen=True)
class HostIdentity:
    """Hostname + boot id + PID-namespace inode: the scope in which a PID means something."""

    hostname: str
    boot_id: str
    pidns: int

    @property
    def key(self) -> str:
        """12 hex digits naming this identity in file names (same identity, same key)."""
        text = f"{self.hostname}\n{self.boot_id}\n{self.pidns}"
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]

    @property
    def label(self) -> str:
        """The hostname reduced to characters that are safe in a file name (for humans only)."""
        return host_label(self.hostname)

    def same_machine(self, other: HostIdentity) -> bool:
        """Same hostname and boot: the same running kernel (maybe another PID namespace)."""
        return self.hostname == other.hostname and self.boot_id == other.boot_id


def node_names() -> dict[str, str | None]:
    """Which node a document comes from: its hostname and Slurm's name for it (None outside a job).

    Every per-node JSON document carries both, so a fleet's answers can be told apart.
    """
    return {"hostname": socket.gethostname(), "node": os.environ.get("SLURMD_NODENAME")}


def host_label(hostname: str) -> str:
    return _LABEL_UNSAFE.sub("_", hostname)[:LABEL_MAX] or "unknown"


def current_identity() -> HostIdentity:
    """This process's identity (read afresh: a forked child may live in a new namespace)."""
    return HostIdentity(socket.gethostname(), _read_boot_id(), _pid_namespace())


def _read_boot_id() -> str:
    try:
        with open(_BOOT_ID, encoding="ascii") as handle:
            return handle.read(64).strip()
    except (OSError, ValueError):
        return ""


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


# --------------------------------------------------------------------------- processes


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks after boot (``/proc/PID/stat`` field 22), or None.

    None when there is no such process, or it is a zombie (killed, not yet reaped): it can
    no longer act. Recorded beside a PID so that a reused PID is not taken for the holder.
    """
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read(4096)
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain ") ".
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        state, start = fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None
    return None if state in (b"Z", b"X") else start


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """Is ``pid`` (in *this* PID namespace) running, and is it the process that started at ``start_time``?

    Only meaningful for a PID recorded by a process of :func:`current_identity`.
    """
    if pid <= 0:
        return False
    now = process_start_time(pid)
    if now is None:
        if os.path.isdir("/proc/self"):
            return False
        try:  # no procfs: fall back to signal 0 (cannot see zombies or reuse)
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return start_time is None or now == start_time


def user_name() -> str:
    """This process's effective user, by name (its uid when the name is unknown): holders and journal lines."""
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())
