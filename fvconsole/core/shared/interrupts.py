"""SIGTERM and SIGHUP as an orderly interruption (like Ctrl-C), and sections that defer them.

Why: Slurm sends SIGTERM on ``scancel``, at a job's time limit and when ``srun`` tears a
step down; ``timeout(1)`` sends it too; a dropped ssh session sends SIGHUP. Python's default
for both is to die at once, without ``finally`` blocks: a migration left its lock file (the
next run was refused until ``--break-lock``) and its staging dir, an eviction its holder
record, nothing was journaled and the user saw nothing. Under :func:`handlers` these signals
(and Ctrl-C) raise :class:`Interrupted`, a KeyboardInterrupt, so every cleanup path written
for Ctrl-C runs for them too.

A few steps must not be cut in the middle: publishing a staged set (a rename, or two when
the filesystem cannot swap), taking and releasing a lock (the file and the object that
knows it must agree). :func:`deferred` marks such a section: a signal arriving inside is
remembered and acted on when the section ends. A flag rather than a blocked signal mask:
the kernel delivers a process-directed signal to any thread that does not block it, and
Python runs the handler in the main thread whichever thread received it.

Once a signal has been acted on, later ones (a second SIGTERM from srun, SIGHUP after
SIGTERM, an impatient second Ctrl-C) are ignored until the handlers are removed: the
cleanup they would interrupt is short, and SIGKILL still ends a process that hangs.

Only the main thread can install handlers; elsewhere (the console's worker threads)
:func:`handlers` installs nothing and :func:`deferred` costs a counter.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: What the front ends turn into an orderly interruption.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The process was asked to stop by ``signum``; unwinds like Ctrl-C.

    It carries its signal and nothing else: what an action had done when it stopped is the
    action's own record, which the one runner returns (``core/shared/operation.py``: ``Stop``).
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal_name(signum))
        self.signum = int(signum)

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (130 Ctrl-C, 129 SIGHUP, 143 SIGTERM), the shell's convention."""
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def as_interrupted(exc: BaseException) -> Interrupted:
    """``exc`` (a KeyboardInterrupt) as an :class:`Interrupted`: a plain KeyboardInterrupt (Python's own
    Ctrl-C handler, where ours is not installed) is one by SIGINT."""
    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


@dataclass
class _State:
    installed: bool = False
    depth: int = 0  # nesting of deferred sections
    pending: int | None = None  # a signal that arrived inside a deferred section
    fired: bool = False  # an Interrupted was raised: ignore later signals


_STATE = _State()
_LOCK = threading.Lock()


def _handle(signum: int, frame: Any) -> None:
    if _STATE.fired or _STATE.pending is not None:
        return
    if _STATE.depth:
        _STATE.pending = signum
        return
    _STATE.fired = True
    raise Interrupted(signum)


def _replaceable(signum: int, current: Any) -> bool:
    """Only where Python's default would end the process without cleanup (or raise KeyboardInterrupt)."""
    if signum == signal.SIGINT:
        return current is signal.default_int_handler
    return current == signal.SIG_DFL


@contextmanager
def handlers(signals: tuple[int, ...] = SIGNALS) -> Iterator[bool]:
    """Turn ``signals`` into :class:`Interrupted` while the block runs; yields whether installed.

    Installs nothing outside the main thread, when already installed (nested commands), or
    for a signal someone else handles (an embedding program, ``nohup``'s ignored SIGHUP).
    The previous handlers are restored afterwards.
    """
    if threading.current_thread() is not threading.main_thread() or _STATE.installed:
        yield False
        return
    saved: dict[int, Any] = {}
    for signum in signals:
        current = signal.getsignal(signum)
        if _replaceable(signum, current):
            saved[signum] = current
    with _LOCK:
        _STATE.installed, _STATE.depth, _STATE.pending, _STATE.fired = True, 0, None, False
    try:
        for signum in saved:
            signal.signal(signum, _handle)
        yield bool(saved)
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)
        with _LOCK:
            _STATE.installed, _STATE.depth, _STATE.pending, _STATE.fired = False, 0, None, False


class Section:
    """What :func:`deferred` yields: the signal that arrived inside it, if any (after the block)."""

    signum: int | None = None


@contextmanager
def deferred(*, reraise: bool = True) -> Iterator[Section]:
    """Run the block without being interrupted by the handled signals (see the module docstring).

    A signal that arrives inside is acted on when the outermost section ends normally:
    raised as :class:`Interrupted` (``reraise``), or left to the caller in ``section.signum``
    (for a caller that must first say what the section completed). When the block raises,
    its own exception goes on and the signal counts as acted on.
    """
    section = Section()
    with _LOCK:
        _STATE.depth += 1
    ok = False
    try:
        yield section
        ok = True
    finally:
        with _LOCK:
            _STATE.depth -= 1
            signum = _STATE.pending if _STATE.depth == 0 else None
            if signum is not None:
                _STATE.pending = None
                _STATE.fired = True
        if ok and signum is not None:
            section.signum = signum
            if reraise:
                raise Interrupted(signum)
