"""The console's terminal: Textual's Linux driver, made safe for a terminal that vanishes or stops reading.

Textual writes through a queue of 30 writes drained by one thread. When the terminal hangs up
(its pty's other side closed: a killed tmux pane, a dropped ssh session) that thread dies on
EIO; when nobody reads the terminal it blocks in ``write`` for good. Either way the queue
fills, and the event loop waits in ``Queue.put`` forever, where none of the loop's own signal
handlers can run: the console survived its terminal and ignored SIGTERM (D40). Here:

- a hang-up (POLLHUP on the terminal, or a failed write) ends the console as SIGHUP does, and
  its output is dropped from then on;
- once the app stops (``q``, a signal, a hang-up) every wait for the terminal is bounded by
  ``EXIT_GRACE`` seconds, then the rest of the output is dropped: a live terminal still gets its
  modes restored and leaves the alternate screen, a stuck one cannot hold the exit;
- ``gone`` tells the launcher that the process must end with ``os._exit``: the interpreter's
  normal exit would flush ``stderr`` into the dead terminal (exit 120), or wait on the lock of
  ``stderr`` that the stuck output thread holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import select
import termios
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver

from fvconsole.tui.widgets.textual_private import driver_output_thread, queue_output, wrap_driver_output

#: Seconds a stopping console waits for its terminal to take the last output (a live
#: terminal takes it in milliseconds).
EXIT_GRACE = 2.0
#: How often a blocked write looks again whether it should give up, in seconds.
_SLICE = 0.1
#: Seconds the output thread always gets at the close for what is queued (a live terminal's
#: restored modes), even when the deadline has passed.
_LAST_WRITES = 0.5
#: poll(2) flags that mean the terminal is gone (reported whatever was asked for).
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


class _Terminal:
    """The file Textual's output thread writes to: a write that fails (EIO from a hung-up
    terminal, a closed file) reports the hang-up and is dropped, instead of killing the thread
    with a traceback and leaving Textual's queue to fill."""

    def __init__(self, file: IO[str], gone: Callable[[], None]) -> None:
        self._file = file
        self._gone = gone
        self.lost = False

    def _do(self, step: Callable[..., object], *args: str) -> None:
        if self.lost:
            return
        try:
            step(*args)
        except (OSError, ValueError):
            self.lost = True
            self._gone()

    def write(self, text: str) -> None:
        self._do(self._file.write, text)

    def flush(self) -> None:
        self._do(self._file.flush)

    def fileno(self) -> int:
        return self._file.fileno()


class ConsoleDriver(LinuxDriver):
    """Textual's Linux driver with bounded output and hang-up detection (see the module).

    The few driver internals this needs (its output file, its output thread and that thread's
    queue) are reached through ``tui/widgets/textual_private.py``; everything else here is the
    driver's public API or this class's own state. The app learns of its driver through
    ``app.terminal_attached(driver)``, when the app has it."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._console_app = app
        self._terminal = wrap_driver_output(self, lambda file: _Terminal(file, self.hung_up))
        self._lost = False
        self._deadline: float | None = None
        #: The event loop the app runs on (set when application mode starts), for the hang-up call.
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._watching = threading.Event()
        self._watcher: threading.Thread | None = None
        #: Called (on the event loop) once the terminal hung up.
        self.on_hang_up: Callable[[], None] | None = getattr(app, "terminal_hung_up", None)
        attached = getattr(app, "terminal_attached", None)
        if attached is not None:
            attached(self)

    # ------------------------------------------------------------ state

    def output_abandoned(self) -> bool:
        """The terminal is gone, or the stopping console has waited for it long enough."""
        return self._lost or (self._deadline is not None and time.monotonic() >= self._deadline)

    def time_left(self) -> float:
        """Seconds left before output is abandoned (``EXIT_GRACE`` when no deadline is set)."""
        if self._lost:
            return 0.0
        if self._deadline is None:
            return EXIT_GRACE
        return max(0.0, self._deadline - time.monotonic())

    def stopping(self) -> None:
        """The app is stopping: from now on, wait at most ``EXIT_GRACE`` seconds for the terminal.
        Safe in a signal handler (one assignment)."""
        if self._deadline is None:
            self._deadline = time.monotonic() + EXIT_GRACE

    @property
    def gone(self) -> bool:
        """The terminal hung up, or the output thread is still stuck in a write."""
        thread = driver_output_thread(self)
        return self._lost or (thread is not None and thread.is_alive())

    def hung_up(self) -> None:
        """The terminal is gone: drop all output, and end the console as a hang-up does."""
        if self._lost:
            return
        self._lost = True
        callback, loop = self.on_hang_up, self._event_loop
        if callback is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(callback)

    def restore_modes(self) -> None:
        """Put back the terminal's modes as they were before the console (the last resort:
        nothing is written, which a stuck terminal could not take)."""
        if self.attrs_before is not None:
            with contextlib.suppress(termios.error, OSError, ValueError):
                termios.tcsetattr(self.fileno, termios.TCSANOW, self.attrs_before)

    # ------------------------------------------------------------ Textual's driver

    def start_application_mode(self) -> None:
        """Start (or, after ctrl+z, resume): no deadline until the app stops again."""
        self._event_loop = asyncio.get_running_loop()
        self._deadline = None
        super().start_application_mode()
        self._watch_for_hang_up()

    def write(self, data: str) -> None:
        """Queue output for the terminal. While the queue is full, wait as long as the terminal
        is there, but once the app stops no longer than the deadline: a live terminal drains
        the queue in milliseconds and loses nothing."""
        thread = driver_output_thread(self)
        assert thread is not None, "Driver must be in application mode"
        while not self._lost:
            try:
                queue_output(thread, data, _SLICE)
                return
            except queue.Full:
                if not thread.is_alive():
                    self.hung_up()
                elif self.output_abandoned():
                    return

    def stop_application_mode(self) -> None:
        if not self._console_app.is_running:  # exiting, not suspending (ctrl+z)
            self.stopping()
        super().stop_application_mode()

    def close(self) -> None:
        """Stop the output thread, waiting for it no longer than the deadline allows."""
        self.stopping()
        self._watching.set()
        thread = driver_output_thread(self)
        if thread is not None:
            self.write(None)  # type: ignore[arg-type]  # the thread's stop mark
            thread.join(timeout=0.0 if self._lost else max(self.time_left(), _LAST_WRITES))

    def _watch_for_hang_up(self) -> None:
        """A thread that sees the terminal hang up even while the console is idle (Textual's
        input thread then reads end-of-file in a busy loop and tells nobody)."""
        fds = {self.fileno}
        with contextlib.suppress(AttributeError, OSError, ValueError):
            fds.add(self._terminal.fileno())
        poller = select.poll()
        for fd in fds:
            poller.register(fd, 0)  # no events asked for: only hang-up and errors are reported

        def watch() -> None:
            while not self._watching.is_set():
                try:
                    events = poller.poll(250)
                except OSError:
                    events = [(-1, select.POLLERR)]
                if any(flags & _GONE for _fd, flags in events):
                    self.hung_up()
                    return

        previous = self._watcher
        if previous is not None:  # a resume after ctrl+z: the suspend's close() stopped it
            previous.join(timeout=1.0)
        self._watching.clear()
        self._watcher = threading.Thread(target=watch, name="fvconsole-hangup-watch", daemon=True)
        self._watcher.start()
