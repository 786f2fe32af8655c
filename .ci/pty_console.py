#!/usr/bin/env python3
"""Run a command under a real pseudo-terminal, wait for the console's first screen, press q.

    python .ci/pty_console.py [--expect TEXT]... [--timeout S] -- COMMAND [ARG...]

Exit 0 when every TEXT appeared on the screen and the command then exited 0 after `q`;
exit 1 otherwise, printing the end of what the terminal showed. Standard library only
(pty, termios), so it runs in a brand-new venv before anything is installed; COMMAND may
itself install things first (the README's first set-up command does).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

# CSI sequences (cursor moves, colours, modes), OSC strings, and other two-byte escapes.
_ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0e-\x1f]")


def screen_text(raw: bytes) -> str:
    """What was drawn, without escape sequences (enough to find words the console shows)."""
    return _ESCAPES.sub(b" ", raw).decode("utf-8", "replace")


def _spawn(argv: list[str], rows: int, cols: int) -> tuple[subprocess.Popen, int]:
    primary, replica = os.openpty()
    fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(os.environ, TERM=os.environ.get("TERM") if os.environ.get("TERM", "dumb") != "dumb" else "xterm-256color",
               COLUMNS=str(cols), LINES=str(rows))

    def controlling_tty() -> None:  # runs in the child after setsid: make the pty its terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, stdin=replica, stdout=replica, stderr=replica, env=env,
                            start_new_session=True, preexec_fn=controlling_tty, close_fds=True)
    os.close(replica)
    return proc, primary


def _read(fd: int, timeout: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: every process holding the terminal has exited
        return b""


def run(argv: list[str], expect: list[str], timeout: float, settle: float, rows: int, cols: int) -> int:
    proc, fd = _spawn(argv, rows, cols)
    raw = bytearray()
    deadline = time.monotonic() + timeout
    seen_at = None
    quit_sent = False
    try:
        while time.monotonic() < deadline:
            raw += _read(fd, 0.2)
            if proc.poll() is not None:
                raw += _read(fd, 0.2)
                break
            if seen_at is None and all(word in screen_text(bytes(raw[-200_000:])) for word in expect):
                seen_at = time.monotonic()
            if seen_at is not None and not quit_sent and time.monotonic() - seen_at >= settle:
                os.write(fd, b"q")
                quit_sent = True
        else:
            print(f"pty_console: timed out after {timeout:.0f}s "
                  f"({'q sent, console did not exit' if quit_sent else 'first screen not reached'})")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finally:
        os.close(fd)
    text = screen_text(bytes(raw))
    code = proc.wait()
    missing = [word for word in expect if word not in text]
    ok = not missing and quit_sent and code == 0
    if not ok:
        print("pty_console: last output on the terminal:\n" + text[-4000:])
        print(f"pty_console: exit code {code}; quit sent: {quit_sent}; missing on screen: {missing}")
    else:
        print(f"pty_console: first screen reached ({', '.join(expect)}); quit on q with exit 0")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--expect", action="append", default=[], help="text the first screen must show")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole run (default 600)")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait after the screen appeared")
    parser.add_argument("--size", default="40x120", help="ROWSxCOLS of the terminal (default 40x120)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not args.expect:
        parser.error("give --expect TEXT and a command after --")
    rows, cols = (int(n) for n in args.size.split("x"))
    return run(command, args.expect, args.timeout, args.settle, rows, cols)


if __name__ == "__main__":
    sys.exit(main())
