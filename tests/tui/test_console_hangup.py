"""A console whose terminal vanished or stopped reading exits, within seconds, without a traceback.

Defect D40: a console left in a tmux session survived its pty going away and then ignored
SIGTERM: its output thread had died on the dead terminal (or sat in a write nobody would ever
read), Textual's bounded output queue filled, and the main thread waited forever in
``Queue.put``, where no signal handler of the event loop could run. Each test runs the real
console in a real pseudo-terminal, the way a terminal multiplexer does.

The console runs under a small wrapper that records every traceback Python would print
(``sys.excepthook``, ``threading.excepthook``, ``sys.unraisablehook``) into a file: a dead
terminal cannot show one, so the file is where one would have gone.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from console_apps import read_until
from signal_defaults import DEFAULTS

#: A real terminal, drawn within a timeout: never beside another such test (tests/conftest.py).
pytestmark = pytest.mark.serial

#: Seconds the console has to exit after its terminal vanished or after a signal.
EXIT_WITHIN = 6.0

WRAPPER = r"""
import sys, threading, traceback
log = open(sys.argv.pop(1), "a", encoding="utf-8")
def record(kind, text):
    log.write(f"--- {kind}\n{text}\n")
    log.flush()
sys.excepthook = lambda t, v, tb: record("excepthook", "".join(traceback.format_exception(t, v, tb)))
threading.excepthook = lambda a: record(f"thread {a.thread.name if a.thread else '?'}",
    "".join(traceback.format_exception(a.exc_type, a.exc_value, a.exc_traceback)))
sys.unraisablehook = lambda u: record(f"unraisable {u.err_msg or ''} {u.object!r}",
    "".join(traceback.format_exception(u.exc_type, u.exc_value, u.exc_traceback)))
from fvconsole.cli import main
sys.exit(main())
"""


def _start(demo_ws, tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    """The console on the demo in a new pseudo-terminal (80×24, not its controlling terminal:
    nothing but the test sends it a signal); its first screen read. → (process, master, log)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    log = tmp_path / "tracebacks.log"
    wrapper = tmp_path / "console_wrapper.py"
    wrapper.write_text(WRAPPER)
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="80", LINES="24")
    proc = subprocess.Popen(
        [sys.executable, str(wrapper), str(log), "--config", demo_ws.config_path, "--checkpoints",
         demo_ws.output_dir, "--cache-root", demo_ws.cache_root],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, preexec_fn=DEFAULTS,
    )
    os.close(slave)
    shown = read_until(master, b"Quit", 90)
    if b"Quit" not in shown:
        proc.kill()
        os.close(master)
        pytest.fail(f"the console's first screen never showed: {shown[-2000:]!r}")
    return proc, master, log


def _burst(master: int) -> None:
    """Keys that make the console redraw many times (switching views), read before what follows."""
    os.write(master, b"31" * 40)
    time.sleep(0.3)


def _keep_redrawing(master: int, seconds: float) -> None:
    """One key every 50 ms, each a redraw of its own (far more than Textual's 30 queued writes)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for key in (b"3", b"1"):
            os.write(master, key)
            time.sleep(0.05)


def _exit_code(proc: subprocess.Popen, seconds: float) -> int | None:
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def _tracebacks(log: Path) -> str:
    return log.read_text(encoding="utf-8") if log.exists() else ""


@pytest.mark.parametrize("sig", [None, signal.SIGHUP, signal.SIGTERM], ids=["no-signal", "SIGHUP", "SIGTERM"])
def test_a_console_whose_terminal_vanished_exits(demo_ws, tmp_path, sig: signal.Signals | None) -> None:
    """The terminal closed under the console (its master side gone, as when tmux kills a pane):
    the console exits by itself (as on a hang-up), and a SIGHUP or SIGTERM sent afterwards
    cannot find it stuck."""
    proc, master, log = _start(demo_ws, tmp_path)
    try:
        _burst(master)
        os.close(master)
        master = -1
        time.sleep(1.0)  # the redraws the keys asked for meet the dead terminal
        if sig is not None and proc.poll() is None:
            proc.send_signal(sig)
        code = _exit_code(proc, EXIT_WITHIN)
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code is not None, "the console did not exit after its terminal vanished"
    assert code in {128 + signal.SIGHUP, 128 + (sig or signal.SIGHUP)}, code
    assert _tracebacks(log) == ""


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_console_whose_terminal_stopped_reading_exits_on_a_signal(demo_ws, tmp_path, sig: signal.Signals) -> None:
    """The terminal is still open but nobody reads it (a hung multiplexer): the console's output
    blocks for good once the terminal's buffer is full. A signal still ends it, within seconds,
    with the signal's exit code."""
    proc, master, log = _start(demo_ws, tmp_path)
    try:
        _keep_redrawing(master, 3.0)  # the terminal's 4 KiB fill at once: nobody reads them any more
        assert proc.poll() is None
        proc.send_signal(sig)
        code = _exit_code(proc, EXIT_WITHIN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert code == 128 + sig, code
    assert _tracebacks(log) == ""
