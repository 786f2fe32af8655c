"""The console in a real terminal: `fvconsole demo DIR` under a pseudo-terminal shows its first
screen and quits on `q` with exit 0 (the same driver CI uses for the README's first command)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

DRIVER = pathlib.Path(__file__).resolve().parent.parent / ".ci" / "pty_console.py"


def test_demo_opens_the_console_in_a_terminal_and_quits_on_q(tmp_path) -> None:
    root = tmp_path / "ws"
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--expect", "checkpoint(s)", "--expect", "Quit", "--timeout", "180",
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
