"""One locked operation: lock, plan again under the locks, execute, release, journal, and a signal.

Why one runner: every action that changes something (a cache eviction, a fleet eviction, a
migration or reshard, a prune) goes through the same cycle, and the copies of it drifted (a
signal that arrived while a prune released its lock was dropped). Each action is an
:class:`Operation` value that says only what is its own: its locks, its checks before them,
its plan under them, its execution, what a signal stopped, its journal line. :func:`run_locked`
does the rest, the same way for all of them, and returns a :class:`Run` (a value, never an
attribute set on an exception):

    prepare ─► lock 1..n ─► plan ─► execute ─► release n..1 ─► journal ─► Run
    (checks,   (fixed     (again,  (progress,  └─ deferred: a signal waits ─┘
    nothing    order)     under    reports a
    written)              them)    Stop)

A signal (SIGINT, SIGTERM, SIGHUP: :mod:`.interrupts`) before execution ends the run with
nothing changed; during execution the operation reports what it had done (:class:`Stop`) and
stops; during release and journaling it waits until both are done. Either way the locks are
released, the journal gets a line exactly when something was changed, and the signal comes
back in ``Run.stop`` for the front end to report (128 + signal, or 3 after a change).
A failure part-way (:class:`~.errors.PartialFailure` raised by execution) is journaled and
returned in ``Run.failure``. A refusal (FvError before execution: a lock held, a re-check)
releases what was taken and is raised: nothing was changed, there is nothing to journal.

Nothing here knows a domain or the journal's format: the operation builds its line and the
caller says where it goes (``journal``: a callable that appends a record). Blocking (the
console calls it from a thread worker, where no signal handler is installed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from fvconsole.core.shared.errors import EXIT_PARTIAL, PartialFailure
from fvconsole.core.shared.interrupts import as_interrupted, deferred, signal_name
from fvconsole.core.shared.locks import Lock

P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Stop:
    """A signal that stopped a run, and what the operation had done by then.

    ``account``: the operation's own record of it (an eviction's ``StoppedEviction``, a prune's
    ``PruneResult``, a migration's ``MigrationFailure``; None: stopped before it began);
    ``done``: what was changed, in words (None: nothing was); ``note``: what the cleanup did
    when nothing was changed.
    """

    signum: int
    account: Any = None
    done: str | None = None
    note: str | None = None

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    @property
    def changed(self) -> bool:
        return self.done is not None

    @property
    def exit_code(self) -> int:
        """3 once something was changed, else the shell's 128 + signal (130, 143, 129)."""
        return EXIT_PARTIAL if self.changed else 128 + self.signum

    @property
    def message(self) -> str:
        """``interrupted by SIGTERM; <what was done, or what the cleanup did>``."""
        after = self.done or self.note
        return f"interrupted by {self.name}" + (f"; {after}" if after else "")


class Operation(Protocol[P, R]):
    """What an action says of itself; :func:`run_locked` does the rest."""

    def prepare(self) -> None:
        """Checks before any lock is taken (nothing written yet); raises a refusal."""

    def locks(self) -> Sequence[Lock]:
        """Its locks (``core/shared/locks/``: ``acquire(wait, break_stale=) -> LockState``, ``release() -> problem
        or None``), in the order they are taken (released in reverse); none for the fleet's login side."""

    def plan(self) -> P:
        """The plan under the locks: planned again, or the confirmed one re-checked (the operation's policy)."""

    def execute(self, plan: P, progress: Any, on_stop: Callable[[Stop], None]) -> R:
        """Do it; stopped by a signal, first tell ``on_stop`` what was done, then let the signal go on."""

    def finished(self, plan: P, result: R, signum: int) -> Stop:
        """A signal that came once execution had finished: the run stands, in words."""

    def record(self, run: Run[P, R]) -> Any:
        """Its journal line for ``run`` (released, however far it got), or None when nothing was changed."""


@dataclass(frozen=True)
class Run(Generic[P, R]):
    """What one run did: the plan it executed, its result, the locks, the journal line and any signal.

    ``result``: what execution returned, None when it did not finish (``stop`` or ``failure`` says
    how far it got; a signal that came after it finished leaves it and adds ``stop``);
    ``held``: each lock's state as ``acquire`` returned it, in order; ``problems``: what releasing
    them reported; ``journal``: what the journal callable returned (None: none asked for, or
    nothing was changed).
    """

    plan: P | None = None
    result: R | None = None
    stop: Stop | None = None
    failure: PartialFailure | None = None
    held: tuple[Any, ...] = ()
    problems: tuple[Any, ...] = ()
    journal: Any = None


def run_locked(operation: Operation[P, R], *, wait: float = 0.0, break_stale: bool = False,
               journal: Callable[[Any], Any] | None = None, progress: Any = None) -> Run[P, R]:
    """Run ``operation`` through the cycle of the module docstring; returns its :class:`Run`.

    ``journal``: appends the operation's record (None: no line). Refusals before execution
    (a held lock, a re-check under the lock) are raised once every lock taken is released.
    """
    taken: list[Lock] = []
    held: list[Any] = []
    stops: list[Stop] = []
    run: Run[P, R] = Run()
    try:
        operation.prepare()
        for lock in operation.locks():
            taken.append(lock)  # released whatever happens in acquire (releasing a lock not held does nothing)
            held.append(lock.acquire(wait, break_stale=break_stale))  # signal-safe: the locks door's own sections
        run = replace(run, held=tuple(held))
        plan = operation.plan()
        run = replace(run, plan=plan)
        result = operation.execute(plan, progress, stops.append)
        run = replace(run, result=result)
    except PartialFailure as failure:
        run = replace(run, failure=failure)
    except KeyboardInterrupt as exc:  # SIGINT, SIGTERM, SIGHUP: what was done so far, as the operation said
        signum = as_interrupted(exc).signum
        stop = replace(stops[-1], signum=signum) if stops else Stop(signum)
        run = replace(run, held=tuple(held), stop=stop)
    except BaseException:  # a refusal before execution (or a defect): nothing to journal
        with deferred():  # a signal while releasing is not lost: it is raised instead (nothing was changed)
            _release(taken)
        raise
    return _finish(operation, run, taken, journal)


def _release(taken: list[Lock]) -> tuple[Any, ...]:
    """Release in reverse order; the problems reported (never raises)."""
    problems = (lock.release() for lock in reversed(taken))
    return tuple(p for p in problems if p is not None)


def _finish(operation: Operation[P, R], run: Run[P, R], taken: list[Lock],
            journal: Callable[[Any], Any] | None) -> Run[P, R]:
    """Release, then journal how the run ended; a signal arriving meanwhile waits and is added to the run."""
    with deferred(reraise=False) as tail:
        run = replace(run, problems=_release(taken))
    if tail.signum is not None and run.stop is None:
        run = _late_stop(operation, run, tail.signum)
    with deferred(reraise=False) as writing:
        record = operation.record(run) if journal is not None else None
        if record is not None:
            run = replace(run, journal=journal(record))
    if writing.signum is not None and run.stop is None:
        run = _late_stop(operation, run, writing.signum)
    return run


def _late_stop(operation: Operation[P, R], run: Run[P, R], signum: int) -> Run[P, R]:
    """A signal after execution finished (or failed): the run stands; it is reported as stopped."""
    if run.result is not None and run.plan is not None:
        return replace(run, stop=operation.finished(run.plan, run.result, signum))
    if run.failure is not None:  # failed part-way, then the signal: what was done is the failure's
        return replace(run, stop=Stop(signum, done=run.failure.message))
    return replace(run, stop=Stop(signum))

