"""A lock *file* beside the directory it protects: :class:`FileLock` (a migration's and a prune's lock).

Why a file, for directories other hosts write to (an output dir on a shared filesystem): it is
created whole or not at all by writing the holder JSON (:mod:`.holder`) to a unique temp file,
fsyncing it and ``link()``-ing it to ``path`` (atomic and exclusive, also on NFS; on filesystems
without hard links an ``O_CREAT|O_EXCL`` create, write and fsync). A lock whose holder is
provably dead is always taken over, with a note (as Mercurial does with its repository lock on
the same host), so a run killed by the OOM killer or ``scancel --signal=KILL`` needs no manual
step; with ``break_stale`` (``--break-lock``, on the operator's word) also one whose holder
cannot be judged from here (another host, container or boot), never a holder seen alive. Either
way it is renamed aside, re-read and compared, so that two breakers cannot remove a fresh lock.
``release()`` removes the file only while it still holds our token. ``step(label)`` is called
before every file-system operation (the migration passes its test-only fault hook).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable

from fvconsole.core.shared import reasons
from fvconsole.core.shared.atomic import fsync_dir, write_all
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.host import current_identity
from fvconsole.core.shared.interrupts import deferred
from fvconsole.core.shared.locks.holder import (
    Holder,
    Judgement,
    Liveness,
    clean_dead_temps,
    read_holder,
    record_bytes,
    temp_record_path,
)
from fvconsole.core.shared.locks.interface import Lock, LockBusy, LockProbe, LockState, wait_for
from fvconsole.core.shared.locks.naming import lock_file_beside
from fvconsole.core.shared.reasons import Reason

_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}


class FileLock(Lock):
    """An exclusive lock file beside the directory it protects; see the module docstring."""

    def __init__(
        self,
        path: str,
        *,
        subject: str,
        what: str = "another run holds the lock",
        step: Callable[[str], None] | None = None,
        holder: Holder | None = None,
        field: str = "lock",
    ) -> None:
        self.path = os.path.abspath(path)
        self.parent = os.path.dirname(self.path)
        self.subject = subject
        self.what = what
        #: The request field its refusals concern, the same for the probe and acquire.
        self.field = field
        self._step = step or (lambda label: None)
        self._holder = holder
        self.held: Holder | None = None
        #: What the last :meth:`acquire` did beside taking the lock (a stale lock taken over or broken).
        self.notes: tuple[Reason, ...] = ()

    @classmethod
    def beside(cls, directory: str, tag: str, *, what: str, step: Callable[[str], None] | None = None,
               field: str = "lock") -> FileLock:
        """The lock of ``directory``: the file ``.<name><tag>`` beside its real path (:mod:`.naming`), so
        every path that reaches one directory (a symlink, ``~``) takes the one lock; a refusal names the
        directory as given (``~`` expanded)."""
        subject = os.path.abspath(os.path.expanduser(directory))
        return cls(lock_file_beside(directory, tag), subject=subject, what=what, step=step, field=field)

    # ---------------------------------------------------------------- judging

    def probe(self, *, break_stale: bool = False) -> LockProbe:
        """Read-only: the refusal (or the note) :meth:`acquire` would give right now."""
        try:
            holder = read_holder(self.path)
        except (FileNotFoundError, NotADirectoryError):  # no lock (or no parent dir yet)
            return LockProbe()
        except (OSError, ValueError) as exc:
            damaged = self._damaged(exc)
            return LockProbe(reason=damaged.reason)
        judgement = holder.judge()
        code = _takeover_code(judgement, break_stale)
        if code is not None:
            note = reasons.reason(code, "lock", file=self.path, holder=holder.describe(), why=judgement.reason)
            return LockProbe(note_reason=note, holder=holder)
        busy = self._busy(holder, judgement, break_stale)
        return LockProbe(reason=busy.reason, holder=holder)

    def _busy(self, holder: Holder, judgement: Judgement, break_stale: bool) -> LockBusy:
        if judgement.state is Liveness.ALIVE:
            code = "lock.alive_not_broken" if break_stale else "lock.alive"
        else:  # DEAD is always taken over, UNKNOWN with break_stale: only UNKNOWN is refused here
            code = "lock.unknown"
        return LockBusy(self.subject, self.what, self.path, holder, code, why=judgement.reason, file=self.path,
                        field=self.field)

    def _damaged(self, exc: BaseException) -> LockBusy:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return LockBusy(self.subject, self.what, None, None, "lock.damaged", why=why, file=self.path,
                        field=self.field)

    # ---------------------------------------------------------------- acquire / release

    def acquire(self, wait: float = 0.0, *, break_stale: bool = False) -> LockState:
        """Take the lock or raise :class:`LockBusy`; the state's ``notes`` say what was done beside
        (a stale lock taken over or broken), also kept in ``notes`` here.

        Each attempt runs in a deferred section (:func:`~fvconsole.core.shared.interrupts.deferred`): the
        lock file exists exactly when this object knows it holds it, so a signal that arrives while it is
        created is acted on once ``held`` is set (and ``release`` removes the file); a signal while
        waiting between attempts ends the wait at once."""
        if self.held is not None:
            raise RuntimeError(f"{self.path}: lock already held by this object")
        started = time.monotonic()
        holder = self._holder or Holder.current()
        notes: list[Reason] = []
        refusal: list[FvError] = []
        try:
            clean_dead_temps(self.path, self._step)

            def attempt() -> bool | None:
                with deferred():
                    return take()

            def take() -> bool | None:
                refusal.clear()
                for _ in range(3):  # the lock may vanish between our create and our read
                    if self._create(holder):
                        self.held, self.notes = holder, tuple(notes)
                        return True
                    try:
                        current = read_holder(self.path)
                    except FileNotFoundError:
                        continue
                    except (OSError, ValueError) as exc:
                        refusal.append(self._damaged(exc))
                        return None
                    judgement = current.judge()
                    code = _takeover_code(judgement, break_stale, done=True)
                    if code is not None:
                        if self._break(current):
                            notes.append(reasons.reason(code, "lock", file=self.path, holder=current.describe(),
                                                        why=judgement.reason))
                        continue
                    refusal.append(self._busy(current, judgement, break_stale))
                    return None
                return None

            taken = wait_for(attempt, wait)
        except OSError as exc:
            raise FvError.of(reasons.reason("lock.cannot_take", self.field, subject=self.subject, file=self.path,
                                            why=exc.strerror or exc)) from None
        if not taken:
            raise refusal[0] if refusal else LockBusy(self.subject, self.what, self.path, None, "lock.changing",
                                                      field=self.field)
        return LockState(True, time.monotonic() - started, notes=self.notes)

    def release(self) -> Reason | None:
        """Remove the lock file if it is still ours; returns a problem for the operator, never raises."""
        holder, self.held = self.held, None
        if holder is None:
            return None
        try:
            current = read_holder(self.path)
        except FileNotFoundError:
            return reasons.reason("lock.gone_at_release", self.field, file=self.path)
        except (OSError, ValueError) as exc:
            return reasons.reason("lock.unreadable_at_release", self.field, file=self.path, why=exc)
        if current.token != holder.token:
            return reasons.reason("lock.taken_at_release", self.field, file=self.path, holder=current.describe())
        try:
            self._step(f"unlink {self.path}")
            os.unlink(self.path)
        except OSError as exc:
            return reasons.reason("lock.not_removed", self.field, file=self.path, why=exc.strerror)
        with contextlib.suppress(OSError):
            self._fsync_parent()
        return None

    # ---------------------------------------------------------------- file operations

    def _create(self, holder: Holder) -> bool:
        """Make ``path`` hold ``holder``'s JSON, whole, unless it exists. True if we made it."""
        data = record_bytes(holder)
        tmp = temp_record_path(self.path, holder.identity)
        self._step(f"create {tmp}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            self._step(f"write {tmp}")
            write_all(fd, data)
            self._step(f"fsync {tmp}")
            os.fsync(fd)
            self._step(f"link {tmp} -> {self.path}")
            try:
                os.link(tmp, self.path)
                made = True
            except OSError as exc:
                # NFS may report failure for a link that was made: the temp's link count tells.
                made = os.fstat(fd).st_nlink == 2
                if not made and exc.errno in _NO_HARDLINKS:
                    made = self._create_direct(data)
                elif not made and exc.errno != errno.EEXIST:
                    raise
        finally:
            os.close(fd)
            self._step(f"unlink {tmp}")
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if made:
            self._fsync_parent()
        return made

    def _create_direct(self, data: bytes) -> bool:
        """Filesystems without hard links: ``O_CREAT|O_EXCL``, write, fsync."""
        self._step(f"create {self.path}")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            return False
        try:
            write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise
        finally:
            os.close(fd)
        return True

    def _break(self, judged: Holder) -> bool:
        """Remove the lock of ``judged`` (provably dead). False if the lock turned out to be another's."""
        aside = temp_record_path(self.path, current_identity())
        self._step(f"rename {self.path} -> {aside}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        try:
            moved: Holder | None = read_holder(aside)
        except (OSError, ValueError):
            moved = None
        if moved is not None and moved.token == judged.token:
            self._step(f"unlink {aside}")
            os.unlink(aside)
            self._fsync_parent()
            return True
        # Someone took the lock between our judgement and the rename: give it back unchanged.
        try:
            os.link(aside, self.path)
        except OSError:
            raise FvError.of(reasons.reason("lock.moved", self.field, subject=self.subject, aside=aside,
                                            file=self.path)) from None
        os.unlink(aside)
        return False

    def _fsync_parent(self) -> None:
        self._step(f"fsync {self.parent}")
        fsync_dir(self.parent)


def _takeover_code(judgement: Judgement, break_stale: bool, *, done: bool = False) -> str | None:
    """The note's code when a lock so judged is taken over (``done``: it was), else None (refused).

    Provably dead: always. Unknown (another host, container or boot): only on the operator's
    word (``break_stale``). Alive: never.
    """
    if judgement.state is Liveness.DEAD:
        return "lock.took_over" if done else "lock.will_take_over"
    if judgement.state is Liveness.UNKNOWN and break_stale:
        return "lock.broke" if done else "lock.will_break"
    return None
