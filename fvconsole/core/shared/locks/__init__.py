"""The locks door: every lock fvconsole takes, behind one interface, each saying whose it is.

Why: two fvconsole runs acting on the same directory (two ``migrate --yes`` to one output dir
from two login nodes; a cron evictor and an operator on one cache root; a prune and a
migration of one run) must not run at once, and the one that is refused must be told *who*
holds the lock: host, pid and operation. A PID alone cannot say that on a shared filesystem,
so every lock records a :class:`Holder` (:mod:`.holder`), and only a process of the holder's own
identity takes over a lock whose holder it proves dead; another host's lock is broken only on
the operator's word (``break_stale``, ``--break-lock``).

One interface (:mod:`.interface`: :class:`Lock` with ``probe`` → :class:`LockProbe`,
``acquire(wait, break_stale)`` → :class:`LockState`, ``release()`` → a
:class:`~fvconsole.core.shared.reasons.Reason` or None; every refusal a :class:`LockBusy` or an
``FvError`` carrying a reason of the catalogue), implemented by each kind:

- :class:`FileLock` (:mod:`.lock_file`): a lock file beside a directory other hosts share (a
  migration's and a prune's output dir);
- :class:`RootLock` (:mod:`.root_lock`): the evictor's lock of a cache root, an OFD write lock
  (:class:`OwnerLock`, :mod:`.owner_lock`) inside it composed with a :class:`HolderRecord` beside it;
- :class:`ReaderRecord` (:mod:`.readers`), held shared: a reader's record beside a run it reads (a
  migration reading one of its checkpoints); :func:`live_readers` lists a run's live readers, which
  a prune treats as holding what they read.

A directory's lock is named from its one real path (:mod:`.naming`: ``~`` expanded, every symlink
resolved), so each path that reaches it takes the same lock. Beside them, the journal's brief
append lock on an open file (:mod:`.append_lock`).
"""

from __future__ import annotations

from fvconsole.core.shared.locks.append_lock import lock_open_file, unlock_open_file
from fvconsole.core.shared.locks.holder import (
    LOCK_FORMAT,
    MAX_LOCK_BYTES,
    Holder,
    HolderRecord,
    Judgement,
    Liveness,
    clean_dead_temps,
    read_holder,
    record_bytes,
    temp_record_path,
)
from fvconsole.core.shared.locks.interface import Lock, LockBusy, LockMode, LockProbe, LockState, wait_for
from fvconsole.core.shared.locks.lock_file import FileLock
from fvconsole.core.shared.locks.naming import lock_file_beside, real_directory
from fvconsole.core.shared.locks.owner_lock import (
    LockFileRefused,
    OwnerLock,
    is_write_locked,
    lock_holder_pids,
)
from fvconsole.core.shared.locks.readers import READER_TAG, Reader, ReaderRecord, Readers, live_readers
from fvconsole.core.shared.locks.root_lock import RootLock, RootLockKind

__all__ = [
    "FileLock",
    "Holder",
    "HolderRecord",
    "Judgement",
    "LOCK_FORMAT",
    "Liveness",
    "Lock",
    "LockBusy",
    "LockFileRefused",
    "LockMode",
    "LockProbe",
    "LockState",
    "MAX_LOCK_BYTES",
    "OwnerLock",
    "READER_TAG",
    "Reader",
    "ReaderRecord",
    "Readers",
    "RootLock",
    "RootLockKind",
    "clean_dead_temps",
    "is_write_locked",
    "live_readers",
    "lock_file_beside",
    "lock_holder_pids",
    "lock_open_file",
    "read_holder",
    "real_directory",
    "record_bytes",
    "temp_record_path",
    "unlock_open_file",
    "wait_for",
]
