"""A prune's hidden leftovers: how a checkpoint being pruned is named, and whose such a name is.

Why a format of its own: a checkpoint being pruned is first renamed out of FastVideo's
``checkpoint-<step>`` pattern (its ``latest``, its cleanup and a resume never see a half-deleted
one). The hidden name must be parsed back exactly (a checkpoint called ``checkpoint-7\\n``,
which FastVideo's ``^checkpoint-(\\d+)$`` accepts, must still leave a name the next prune
recognises), must fit in 255 bytes whatever the step (a 240-digit step is a name of 251), and
must say whose it is (a leftover whose owner still runs on this host is no leftover at all).
So the name is ``.fvconsole-pruning-<digest>-<host>-<key>-<pid>`` (the digest: 16 hex digits
of the sha256 of the original name), and the original name, with the owner's start time, is
recorded inside it in ``.fvconsole-pruning.json`` right before the removal starts, so a
report can name it. Names of the old way (``.checkpoint-<step>.fvconsole-pruning-<host>-<key>-<pid>``)
are still parsed, so the next prune finishes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass

from fvconsole.core.checkpoints.listing import CHECKPOINT_RE
from fvconsole.core.shared.atomic import atomic_write_bytes
from fvconsole.core.shared.host import HostIdentity, current_identity, pid_alive, process_start_time
from fvconsole.core.shared.untrusted import MAX_PID, Fields, UntrustedError, load_file

PRUNING_TAG = ".fvconsole-pruning-"
#: The record inside a leftover naming what it was (written right before its removal starts).
RECORD_NAME = ".fvconsole-pruning.json"
MAX_RECORD_BYTES = 64 * 1024
_OWNER = r"(?P<host>[A-Za-z0-9._-]{1,40})-(?P<key>[0-9a-f]{12})-(?P<pid>[1-9][0-9]{0,9})"
#: The leftover name of this version: bounded (at most 19 + 17 + 40 + 1 + 12 + 1 + 10 = 100 bytes).
LEFTOVER_RE = re.compile(re.escape(PRUNING_TAG) + r"(?P<digest>[0-9a-f]{16})-" + _OWNER)
#: The old way (versions before the digest): the original name in the hidden one, a trailing
#: newline included (``checkpoint-7\n``, which the old loose match never found again).
OLD_LEFTOVER_RE = re.compile(r"\.(?P<name>checkpoint-[0-9]+\n?)" + re.escape(PRUNING_TAG) + _OWNER)


@dataclass(frozen=True)
class LeftoverName:
    """What a leftover's name says: the original name when it holds it (the old way), its owner."""

    #: The original ``checkpoint-<step>`` name (None: only the record inside knows it).
    original: str | None
    digest: str
    host: str
    key: str
    pid: int


def name_digest(name: str) -> str:
    return hashlib.sha256(os.fsencode(name)).hexdigest()[:16]


def pruning_name(step_name: str, me: HostIdentity | None = None, pid: int | None = None) -> str:
    """The hidden name a checkpoint dir called ``step_name`` is renamed to before it is removed."""
    me = me or current_identity()
    return f"{PRUNING_TAG}{name_digest(step_name)}-{me.label}-{me.key}-{os.getpid() if pid is None else pid}"


def parse_leftover(name: str) -> LeftoverName | None:
    """The leftover ``name`` describes, either way it was named (None: not a prune's leftover)."""
    match = LEFTOVER_RE.fullmatch(name)
    if match is not None:
        return LeftoverName(None, match["digest"], match["host"], match["key"], int(match["pid"]))
    match = OLD_LEFTOVER_RE.fullmatch(name)
    if match is not None:
        return LeftoverName(match["name"], name_digest(match["name"]), match["host"], match["key"], int(match["pid"]))
    return None


@dataclass(frozen=True)
class LeftoverRecord:
    """The record inside a leftover: the original name and the owner's start time."""

    name: str
    start_time: int | None


def write_record(hidden: str, original: str) -> int:
    """Record ``original`` inside the renamed victim ``hidden`` (the removal that follows takes it too);
    the bytes written (0: not written), which the removal's count of freed bytes leaves out.

    Best effort: without it a leftover is still finished, only named by its hidden name.
    """
    doc = {"name": original, "pid": os.getpid(), "start_time": process_start_time(os.getpid())}
    data = (json.dumps(doc, sort_keys=True) + "\n").encode("utf-8")
    try:
        atomic_write_bytes(os.path.join(hidden, RECORD_NAME), data, sync_dir=False)
    except OSError:
        return 0
    return len(data)


def read_record(hidden: str) -> LeftoverRecord | None:
    """The record of the leftover ``hidden`` (None: absent, unreadable or not one of ours: never an error)."""
    path = os.path.join(hidden, RECORD_NAME)
    try:
        doc = load_file(path, "prune leftover record", MAX_RECORD_BYTES)
        f = Fields(doc, path, "prune leftover record")
        name = f.str("name", max_len=4096)
        start = doc.get("start_time") if isinstance(doc, dict) else None
        start_time = f.int("start_time", min=0, max=2**63 - 1) if start is not None else None
    except (OSError, UntrustedError):
        return None
    if not CHECKPOINT_RE.match(name) or "/" in name:
        return None
    return LeftoverRecord(name, start_time)


def owner_running(parsed: LeftoverName, record: LeftoverRecord | None, me: HostIdentity | None = None) -> bool:
    """Does the process that named this leftover still run here (this identity, its pid alive)?

    Only a process of the same identity can tell; another host's leftover is judged by the lock
    the caller holds (a prune works under the output dir's lock, so its owner is not working).
    """
    me = me or current_identity()
    if parsed.key != me.key or parsed.pid > MAX_PID:
        return False
    if parsed.pid == os.getpid():
        return False  # our own (a retry in this very process): not another owner
    return pid_alive(parsed.pid, record.start_time if record is not None else None)


def original_name(parsed: LeftoverName, record: LeftoverRecord | None) -> str | None:
    """The name the leftover had as a checkpoint: from its record, or from an old-way name."""
    if record is not None and name_digest(record.name) == parsed.digest:
        return record.name
    return parsed.original


def step_of(name: str | None) -> int | None:
    match = CHECKPOINT_RE.match(name) if name is not None else None
    return int(match.group(1)) if match else None
