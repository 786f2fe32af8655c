"""The console in a real terminal: `fvconsole demo DIR` under a pseudo-terminal shows its first
screen and quits on `q` with exit 0 (the same driver CI uses for the README's first command)."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

import pytest
from console_apps import read_until
from signal_defaults import DEFAULTS

#: A real terminal, drawn within a timeout: never beside another such test (tests/conftest.py).
pytestmark = pytest.mark.serial
DRIVER = pathlib.Path(__file__).resolve().parents[2] / ".ci" / "pty_console.py"


def test_demo_opens_the_console_in_a_terminal_and_quits_on_q(tmp_path) -> None:
    root = tmp_path / "ws"
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--expect", "checkpoints,", "--expect", "Quit", "--timeout", "180",
         "--", sys.executable, "-m", "fvconsole", "demo", str(root)],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "quit on q with exit 0" in proc.stdout
    assert (root / "output" / "checkpoint-300").is_dir()


def test_the_driver_fails_when_the_screen_never_shows(tmp_path) -> None:
    # The check itself can fail: a command that never draws the console is reported, not passed.
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--expect", "Quit", "--timeout", "20", "--",
         sys.executable, "-c", "print('no console here')"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1 and "missing on screen: ['Quit']" in proc.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_console_and_restores_the_terminal(tmp_path, sig: signal.Signals) -> None:
    """Defect: `kill` (SIGTERM) left the terminal raw, without echo and in the alternate screen."""
    import os
    import termios

    from fvconsole.demo.workspace import build_demo_workspace

    ws = build_demo_workspace(str(tmp_path / "ws"))
    master, slave = os.openpty()
    os.set_blocking(master, False)
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fvconsole", "--config", ws.config_path, "--checkpoints", ws.output_dir,
         "--cache-root", ws.cache_root],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, preexec_fn=DEFAULTS,
    )
    try:
        shown = read_until(master, b"Quit", 60)
        assert b"Quit" in shown, shown[-2000:]
        proc.send_signal(sig)
        rest = read_until(master, b"\x1b[?1049l", 30)  # leaving the alternate screen
        code = proc.wait(timeout=30)
        mode = termios.tcgetattr(master)  # Linux: the pair's settings, as the console left them
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        os.close(slave)
    assert code == 128 + sig  # an orderly exit with the signal's code, not killed by it
    assert b"\x1b[?1049l" in rest
    assert mode[3] & termios.ICANON and mode[3] & termios.ECHO, "terminal left in raw mode"
