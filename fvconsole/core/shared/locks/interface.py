"""The one lock interface every kind of lock implements: :class:`Lock`, its records and its refusal.

Why one interface: the migration's lock file, the evictor's root lock and a reader's record
answered the same questions four ways (notes as a list of strings or a state record; a problem
as a reason, a string or nothing; a probe as a record or a holder). Here, as filelock's
``BaseFileLock`` owns the API and each platform lock fills it in, every kind answers alike:

``probe(break_stale=False)`` → :class:`LockProbe`
    Read-only: the refusal (or the note) ``acquire`` would give now, and the holder it names
    (dry runs and previews never lock).
``acquire(wait=0.0, break_stale=False)`` → :class:`LockState`
    Takes the lock, waiting up to ``wait`` seconds (:func:`wait_for`: polling, never blocking in
    the kernel, so a console thread stays cancellable), or raises :class:`LockBusy` (exit 1), a
    :class:`~fvconsole.core.shared.reasons.Reason` of the catalogue naming the holder's host, pid
    and operation. ``break_stale`` (``migrate --break-lock``): also take a lock whose holder
    cannot be judged from here; a lock the kernel drops with its holder is never stale.
``release()`` → a problem (a ``Reason``) or None
    Never raises; a context manager releases in every path.

``mode`` is :attr:`LockMode.EXCLUSIVE` (one holder) or :attr:`LockMode.SHARED` (a reader's
record: any number of readers at once, and an exclusive holder of the same directory treats
what they read as held; :mod:`.readers`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from fvconsole.core.shared import reasons
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.locks.holder import Holder
from fvconsole.core.shared.reasons import Reason

T = TypeVar("T")


class LockMode(Enum):
    """How a lock is held: alone, or beside other readers."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"


class LockBusy(FvError):
    """Someone else holds the lock: exit 1, one line naming the holder and the lock file.

    ``code`` (a ``lock.*`` code of :mod:`fvconsole.core.shared.reasons`) says why it is not taken;
    ``values`` are what that code names beyond the subject, the holder and the lock file;
    ``who`` replaces the holder description when there is no holder record; ``field`` is the
    request field the refusal concerns (a migration's ``output_dir``). The reason names the holder's
    ``host``, ``pid`` and ``operation`` (its command line) as values, for whoever words it.
    """

    kind = "lock_busy"

    def __init__(self, subject: str, what: str, path: str | None, holder: Holder | None,
                 code: str = "lock.alive", *, who: str | None = None, field: str = "lock", **values: Any) -> None:
        if who is None:
            where = f"lock file {path}" if path else ""
            who = "; ".join(p for p in ((holder.describe() if holder else ""), where) if p)
            who = f" ({who})" if who else ""
        named = {"host": holder.host, "pid": holder.pid, "operation": holder.command} if holder else {}
        why = reasons.reason(code, field, subject=subject, what=what, who=who, **named, **values)
        super().__init__(why.cli, details={"lock": {"path": path, "holder": holder.to_json() if holder else None}},
                         reason=why)
        self.holder = holder
        self.path = path


@dataclass(frozen=True)
class LockProbe:
    """What acquiring would do now, found without writing: refuse, or go ahead (maybe with a note)."""

    #: Why acquiring would be refused (None: it would not).
    reason: Reason | None = None
    #: What acquiring would do beside taking the lock (take over or break a stale one).
    note_reason: Reason | None = None
    #: Who holds it now, when a record says so (the refusal's holder, or the stale one a note names).
    holder: Holder | None = None

    @property
    def refusal(self) -> str | None:
        """The refusal in the command line's words."""
        return None if self.reason is None else self.reason.cli

    @property
    def note(self) -> str | None:
        """The note in the command line's words."""
        return None if self.note_reason is None else self.note_reason.cli


@dataclass(frozen=True)
class LockState:
    """How a run holds its lock: whether exclusion is in force, how long it waited, what it did beside."""

    held: bool
    waited: float
    #: Why it runs without exclusion (``held`` False: this filesystem cannot lock): worth a warning.
    problem: Reason | None = None
    #: The holder record could not be written (the lock still holds).
    record_problem: Reason | None = None
    #: A stale lock (or a dead holder's record) taken over, or a lock broken: warnings and a journal note.
    notes: tuple[Reason, ...] = ()
    mode: LockMode = LockMode.EXCLUSIVE

    @property
    def took_over(self) -> str | None:
        """The notes in the command line's words (None: there were none)."""
        return "; ".join(n.cli for n in self.notes) or None

    def to_json(self) -> dict[str, object]:
        return fields_json(self, omit=("waited", "problem", "record_problem", "notes", "mode"),
                           problem=_cli(self.problem), record_problem=_cli(self.record_problem),
                           took_over=self.took_over, waited_seconds=round(self.waited, 3))


def _cli(why: Reason | None) -> str | None:
    return None if why is None else why.cli


class Lock(ABC):
    """One lock of one directory, whatever its kind (see the module docstring)."""

    mode: LockMode = LockMode.EXCLUSIVE

    @abstractmethod
    def probe(self, *, break_stale: bool = False) -> LockProbe:
        """Read-only: the refusal or note :meth:`acquire` would give now."""

    @abstractmethod
    def acquire(self, wait: float = 0.0, *, break_stale: bool = False) -> LockState:
        """Take the lock (waiting up to ``wait`` s) or raise :class:`LockBusy` / FvError naming why not."""

    @abstractmethod
    def release(self) -> Reason | None:
        """Give the lock up; a problem for the operator, or None. Never raises."""

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def wait_for(
    attempt: Callable[[], T | None], wait: float, *, interval: float = 0.05, max_interval: float = 1.0
) -> T | None:
    """``attempt()`` until it returns non-None or ``wait`` seconds passed (at least one call)."""
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        result = attempt()
        if result is not None:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(interval, remaining))
        interval = min(interval * 2, max_interval)
