"""A reader's record: "this process reads that checkpoint", left beside it while it reads (issue 37 item 3).

Why: a migration or a reshard reads a checkpoint of a training run (its DCP metadata, its
sidecars; a view links to its files) and publishes a set made for it elsewhere; a prune of that
run, under the run's own lock, must not delete the checkpoint meanwhile. The migration locks
only its own output dir, so the run's lock cannot say it. A reader's record can: a shared hold
(:attr:`LockMode.SHARED`: any number of readers at once, none refused) that an exclusive holder
of the run (a prune) treats as holding what it reads.

The record is ``<run>/.fvconsole-reader-<digest>-<host>-<key>-<pid>`` in the checkpoint's real
parent directory (``<digest>``: 16 hex digits of the sha256 of the checkpoint's name, as a
prune's leftovers are named: bounded whatever the step), a holder record (:mod:`.holder`:
host identity, pid, start time, user, time, the operation's command line) with ``reads``, the
checkpoint's name. It is published whole and withdrawn only while it still names its writer;
a reader whose pid is provably gone (this host identity) is ignored, one of another host is
taken as alive (it cannot be judged from here).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from fvconsole.core.shared.host import current_identity
from fvconsole.core.shared.locks.holder import Holder, HolderRecord, Judgement, Liveness, read_record
from fvconsole.core.shared.locks.interface import Lock, LockMode, LockProbe, LockState
from fvconsole.core.shared.locks.naming import real_directory
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.walk import listing

READER_TAG = ".fvconsole-reader-"
READER_RE = re.compile(re.escape(READER_TAG) + r"(?P<digest>[0-9a-f]{16})-(?P<host>[A-Za-z0-9._-]{1,40})"
                       r"-(?P<key>[0-9a-f]{12})-(?P<pid>[1-9][0-9]{0,9})")
#: Reader records read per directory (a run has a handful at a time; more is not ours).
MAX_READERS = 1000


def name_digest(name: str) -> str:
    return hashlib.sha256(os.fsencode(name)).hexdigest()[:16]


class ReaderRecord(Lock):
    """The shared hold of one reader on ``checkpoint`` (a directory), for as long as it is acquired."""

    mode = LockMode.SHARED

    def __init__(self, checkpoint: str, *, operation: str | None = None) -> None:
        real = real_directory(checkpoint)
        self.directory, self.reads = os.path.split(real.rstrip(os.sep) or os.sep)
        me = current_identity()
        self.path = os.path.join(self.directory,
                                 f"{READER_TAG}{name_digest(self.reads)}-{me.label}-{me.key}-{os.getpid()}")
        self.operation = operation
        self._record = HolderRecord(self.path)

    def probe(self, *, break_stale: bool = False) -> LockProbe:
        """Readers never refuse each other: nothing to say."""
        return LockProbe()

    def acquire(self, wait: float = 0.0, *, break_stale: bool = False) -> LockState:
        """Publish the record; ``held`` False with the problem when it cannot be written (the caller warns:
        a prune of the run will not see this reader)."""
        problem = self._record.publish(Holder.current(self.operation), {"reads": self.reads})
        return LockState(held=problem is None, waited=0.0, problem=problem, mode=self.mode)

    def release(self) -> Reason | None:
        return self._record.withdraw()


@dataclass(frozen=True)
class Reader:
    """A live (or unjudgeable) reader of a checkpoint, as its record names it."""

    path: str
    #: The name of the checkpoint it reads, in the record's directory.
    reads: str
    holder: Holder
    judgement: Judgement


def readers_in(directory: str) -> tuple[Reader, ...]:
    """The readers whose records are in ``directory`` and may still run (dead ones and damaged records left out)."""
    found: list[Reader] = []
    me = current_identity()
    try:
        with listing(directory) as entries:
            names = [e.name for e in entries if e.name.startswith(READER_TAG) and READER_RE.fullmatch(e.name)]
    except OSError:
        return ()
    for name in sorted(names)[:MAX_READERS]:
        path = os.path.join(directory, name)
        try:
            holder, doc = read_record(path)
        except (OSError, ValueError):
            continue
        reads = doc.get("reads")
        if not isinstance(reads, str) or READER_RE.fullmatch(name)["digest"] != name_digest(reads):  # type: ignore[index]
            continue
        judgement = holder.judge(me)
        if judgement.state is not Liveness.DEAD:
            found.append(Reader(path, reads, holder, judgement))
    return tuple(found)
