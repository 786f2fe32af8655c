"""Run one srun process: read its output incrementally, bounded in time and bytes.

stdout and stderr are read as they arrive (one ``selectors`` loop, no thread per pipe) into
a :class:`~fvconsole.core.fleet.demux.StepDemux`, never with ``communicate()`` (which would
hold a node's whole output, however large, in memory). srun runs in its own session; at the
deadline, when a one-node step goes over its byte budget, or on Ctrl-C its process group is
sent SIGTERM (srun then cancels the step on the nodes), then SIGKILL.
"""

from __future__ import annotations

import math
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fvconsole.core.fleet.demux import StepDemux

KILL_GRACE = 5.0
#: Once every node of a step has answered, srun gets this long to exit on its own before it is stopped.
SETTLE_GRACE = 2.0
_READ = 1 << 16


@dataclass
class SrunResult:
    """How one srun ended, with its demultiplexed output."""

    demux: StepDemux
    exit_code: int | None
    timed_out: bool = False
    start_error: str | None = None  # srun could not be started at all


def terminate(proc: subprocess.Popen, grace: float = KILL_GRACE) -> None:
    """SIGTERM the process group of ``proc`` (started in its own session; srun then cancels the
    step on the nodes), then, ``grace`` seconds later, SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


class Running:
    """The srun processes in flight, so an interrupted run can stop them all (they run in
    their own sessions and would not see the terminal's Ctrl-C)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.stopping = False

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)
        if self.stopping:
            terminate(proc)

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        self.stopping = True
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            terminate(proc)


def read_pipes(feeds: Mapping[int, Callable[[bytes], None]], until: float | None = None,
               stop: Callable[[], bool] = lambda: False) -> bool:
    """Hand what each pipe brings to its feed until all close, ``until`` (a monotonic time; None:
    no limit) passes or ``stop()``; True if they closed. One selectors loop, no thread per pipe."""
    with selectors.DefaultSelector() as sel:
        for fd in feeds:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            remaining = math.inf if until is None else until - time.monotonic()
            if remaining <= 0 or stop():
                return False
            for key, _ in sel.select(timeout=min(remaining, 0.5)):
                try:
                    data = os.read(key.fd, _READ)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fd)
                    continue
                feeds[key.fd](data)
    return True


def _pump(proc: subprocess.Popen, demux: StepDemux, until: float, stop: Callable[[], bool]) -> bool:
    """Feed srun's stdout and stderr to ``demux`` (:func:`read_pipes`)."""
    return read_pipes({proc.stdout.fileno(): demux.feed_stdout, proc.stderr.fileno(): demux.feed_stderr},
                      until, stop)


def run_srun(argv: Sequence[str], demux: StepDemux, deadline: float, running: Running | None = None) -> SrunResult:
    """Run one srun for at most ``deadline`` seconds; never raises for what srun or a node does."""
    if running is not None and running.stopping:
        return SrunResult(demux, None, start_error="not started: interrupted")
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return SrunResult(demux, None, start_error=f"cannot start srun: {exc.strerror or exc}")
    if running is not None:
        running.add(proc)
    until = time.monotonic() + deadline
    timed_out = False
    try:
        closed = _pump(proc, demux, until, lambda: demux.settled)
        settled = demux.settled
        wait = max(0.0, until - time.monotonic())
        try:
            proc.wait(timeout=min(wait, SETTLE_GRACE) if settled and not closed else wait)
            if not closed:
                _pump(proc, demux, time.monotonic() + 0.5, lambda: False)  # srun's last words, if any
        except subprocess.TimeoutExpired:
            timed_out = not settled
            terminate(proc)
            _pump(proc, demux, time.monotonic() + KILL_GRACE, lambda: False)  # what was already on its way
    except BaseException:
        terminate(proc)
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        if running is not None:
            running.discard(proc)
    demux.finish()
    return SrunResult(demux, proc.returncode, timed_out=timed_out)
