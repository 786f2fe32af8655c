"""Shared holding: a reader's record beside a run it reads (:class:`ReaderRecord`) and the live readers of a run.

Why (issue 37 item 3): a migration or reshard that reads checkpoint C of run OUT must keep a prune
of OUT from deleting C while it reads, yet two readers of one run never exclude each other, and a
reader must not wait for the run's exclusive lock (a training job's own saves go on beside it).
So a reader takes no lock: it leaves a record, ``.<OUT name>.fvconsole-reader.<host>-<key>-<pid>-<rand>``
beside OUT's real path (:mod:`.naming`), naming who reads (a :class:`~.holder.Holder`: host
identity, pid, start time, command), the operation and the checkpoint, for as long as it runs,
and withdraws it when done. :func:`live_readers` lists a run's readers as the lock judges a holder
(:meth:`~.holder.Holder.judge`): a reader of this host whose pid is gone (or reused) is stale and
left out; one of another host or container cannot be judged from here and counts as live. A
prune treats a live reader's checkpoint as held.

One record per reader, each published whole (temp file, then rename) and removed only while it
names its writer, so readers never contend; a reader's own identity cleans its dead runs' records
when it writes its next one. Listing never changes what it lists.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from dataclasses import dataclass

from fvconsole.core.shared import reasons
from fvconsole.core.shared.host import current_identity, pid_alive
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.interrupts import deferred
from fvconsole.core.shared.locks.holder import Holder, HolderRecord, Judgement, Liveness, read_record
from fvconsole.core.shared.locks.interface import Lock, LockMode, LockProbe, LockState
from fvconsole.core.shared.locks.naming import real_directory
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.untrusted import UntrustedError
from fvconsole.core.shared.walk import listing

READER_TAG = ".fvconsole-reader"
READER_FORMAT = "fvconsole-reader/v1"
#: Records read per listing: a run read by more at once is said to be (the rest are not judged).
MAX_READERS = 256
_SUFFIX = re.compile(r"(?P<label>[A-Za-z0-9._-]{1,40})-(?P<key>[0-9a-f]{12})-(?P<pid>\d+)-[0-9a-f]{8}")


def _beside(directory: str) -> tuple[str, str]:
    """(the real parent of ``directory``, the prefix of its readers' record names)."""
    parent, name = os.path.split(real_directory(directory).rstrip(os.sep) or os.sep)
    return parent, f".{name}{READER_TAG}."


@dataclass(frozen=True)
class Reader:
    """One live reader of a run: who, doing what, reading which checkpoint, and how sure it is alive."""

    holder: Holder
    operation: str
    #: The name of what it reads inside the run's directory (``checkpoint-100``).
    item: str
    #: Its record's path.
    record: str
    judgement: Judgement

    @property
    def judged_alive(self) -> bool:
        """True: seen running on this host; False: another host or container, which counts as live."""
        return self.judgement.state is Liveness.ALIVE

    def describe(self) -> str:
        """``migrate (pid P on host H since T) reads checkpoint-100``, safe to print."""
        return f"{self.operation} ({self.holder.describe()}) reads {self.item}"

    def to_json(self) -> dict[str, object]:
        # Hand-written: the holder's public fields flattened beside the reader's own (no token).
        holder = self.holder
        return {"operation": self.operation, "item": self.item, "record": self.record, "host": holder.host,
                "pid": holder.pid, "user": holder.user, "since": holder.since_text, "command": holder.command,
                "alive": self.judgement.state.value, "why": self.judgement.reason}


@dataclass(frozen=True)
class Readers:
    """A run's live readers, and the records that could not be judged (damaged, or beyond the cap)."""

    readers: tuple[Reader, ...] = ()
    problems: tuple[Reason, ...] = ()

    def of(self, item: str) -> tuple[Reader, ...]:
        """The live readers of ``item`` (a checkpoint's name in the run's directory)."""
        return tuple(r for r in self.readers if r.item == item)


class ReaderRecord(Lock):
    """A reader's record of ``item`` in ``directory`` (a checkpoint of a run), held shared.

    ``acquire()`` publishes it and never waits or refuses (readers never exclude one another);
    when it cannot be written (the run's parent is read-only to this user) the state says so
    (``held`` False and ``problem``: a prune will not see this reader). ``release()`` withdraws it.
    """

    mode = LockMode.SHARED

    def __init__(self, directory: str, item: str, *, operation: str, command: str | None = None) -> None:
        if not item or "/" in item or item in (".", ".."):
            raise ValueError(f"{item!r}: a reader's item is a name inside the directory it reads")
        self.directory = real_directory(directory)
        self.item = item
        self.operation = operation
        parent, prefix = _beside(self.directory)
        me = current_identity()
        self.path = os.path.join(parent, f"{prefix}{me.label}-{me.key}-{os.getpid()}-{secrets.token_hex(4)}")
        self._record = HolderRecord(self.path)
        self._command = command

    @classmethod
    def of_checkpoint(cls, checkpoint: str, *, operation: str, command: str | None = None) -> ReaderRecord:
        """The record of a reader of ``checkpoint``, beside the run (its real parent) that holds it."""
        real = real_directory(checkpoint)
        return cls(os.path.dirname(real), os.path.basename(real), operation=operation, command=command)

    def probe(self, *, break_stale: bool = False) -> LockProbe:
        """Readers never refuse one another: nothing to say."""
        return LockProbe()

    def acquire(self, wait: float = 0.0, *, break_stale: bool = False) -> LockState:
        """Publish the record (see the class docstring); ``wait`` and ``break_stale`` change nothing."""
        started = time.monotonic()
        _clean_dead_records(self.path)
        with deferred():  # the record is whole and known as ours before a signal acts
            problem = self._record.publish(Holder.current(self._command),
                                           {"record_format": READER_FORMAT, "operation": self.operation,
                                            "item": self.item})
        if problem is not None:
            unwritten = reasons.reason("lock.reader_unwritten", "lock", file=self.path, why=problem.value("why"),
                                       operation=self.operation, item=self.item, directory=self.directory)
            return LockState(False, time.monotonic() - started, unwritten, mode=LockMode.SHARED)
        return LockState(True, time.monotonic() - started, mode=LockMode.SHARED)

    def release(self) -> Reason | None:
        """Withdraw the record (only while it is still ours). Never raises."""
        return self._record.withdraw()


def _clean_dead_records(path: str) -> None:
    """Remove the records (and temp records) of this identity's readers whose pid is gone: a reader
    killed before it withdrew its record leaves one (its staleness is judged by every lister anyway)."""
    parent, name = os.path.split(path)
    prefix = name[: name.rindex(READER_TAG) + len(READER_TAG) + 1]
    key = current_identity().key
    try:
        with listing(parent) as listed:
            names = [item.name for item in listed if item.name.startswith(prefix)]
    except OSError:
        return
    for entry in names:
        match = _SUFFIX.match(entry[len(prefix):])
        if match and match.group("key") == key and not pid_alive(int(match.group("pid"))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(parent, entry))


def live_readers(directory: str) -> Readers:
    """The live readers of ``directory`` (a run), read-only: stale records (a dead reader of this host)
    are left out, not removed; another host's or container's count as live."""
    parent, prefix = _beside(directory)
    try:
        with listing(parent) as listed:
            names = sorted(item.name for item in listed
                           if item.name.startswith(prefix) and not item.name.endswith(".tmp"))
    except OSError:
        return Readers()
    found: list[Reader] = []
    problems: list[Reason] = []
    me = current_identity()
    for name in names[:MAX_READERS]:
        path = os.path.join(parent, name)
        try:
            holder, fields = read_record(path)
            operation, item = fields.str("operation", max_len=200), fields.str("item", max_len=4096)
        except FileNotFoundError:
            continue  # withdrawn since the listing
        except (OSError, ValueError, UntrustedError) as exc:
            problems.append(reasons.reason("lock.reader_damaged", "lock", file=path, why=exc))
            continue
        judgement = holder.judge(me)
        if judgement.state is not Liveness.DEAD:
            found.append(Reader(holder, operation, item, path, judgement))
    if len(names) > MAX_READERS:
        problems.append(reasons.reason("lock.readers_beyond_cap", "lock", directory=real_directory(directory),
                                       count=len(names), records=plural(len(names), "reader record"),
                                       limit=MAX_READERS))
    return Readers(tuple(found), tuple(problems))
