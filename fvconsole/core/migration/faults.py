"""Test-only fault hook: count the migration's file-system steps, SIGKILL or pause at one.

Why: crash consistency is only shown by killing a real run at every step and looking at
what is left (``tests/reliability/``). Every create, write, fsync, rename, unlink, rmdir
(and lock step) of an execution calls :func:`point` first.

``FVCONSOLE_FAULT_KILL_AT=N`` sends this process SIGKILL right before its N-th step.
``FVCONSOLE_FAULT_TRACE=<file>`` appends one line per step label to that file so a test can
learn how many points there are. ``FVCONSOLE_FAULT_PAUSE_AT`` (a step number, or a regular
expression searched in each step's label) with ``FVCONSOLE_FAULT_PAUSE_FILE=<file>`` pauses
right before the first such step: the process writes ``<pid> <label>`` to that file and waits
until the test deletes it (at most ``FVCONSOLE_FAULT_PAUSE_TIMEOUT`` seconds, default 120), so
a test can act "in between" (a second migration from another host, tampering with the
published set). Never set these in production; unset, :func:`point` returns at once.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

_LOCK = threading.Lock()
_COUNT = 0
_PAUSED = False
#: The hook's variables as read by the last reset() (None: read them at each step).
_SETTINGS: tuple[str | None, str | None, str | None] | None = None


def _settings() -> tuple[str | None, str | None, str | None]:
    get = os.environ.get
    return get("FVCONSOLE_FAULT_KILL_AT"), get("FVCONSOLE_FAULT_TRACE"), get("FVCONSOLE_FAULT_PAUSE_AT")


def reset() -> None:
    """Start counting from zero (one execution = one numbering of its steps).

    The environment is read here once for the execution's thousands of steps.
    """
    global _COUNT, _PAUSED, _SETTINGS
    with _LOCK:
        _COUNT = 0
        _PAUSED = False
        _SETTINGS = _settings()


def point(label: str) -> None:
    """Count one file-system step; SIGKILL or pause here if the environment says so."""
    global _COUNT, _PAUSED
    kill_at, trace, pause_at = _SETTINGS if _SETTINGS is not None else _settings()
    if not kill_at and not trace and not pause_at:
        return
    with _LOCK:  # held while paused: the other writer threads stop at their next step
        _COUNT += 1
        count = _COUNT
        if trace:
            with open(trace, "a", encoding="utf-8") as handle:
                handle.write(f"{count} {label}\n")
        if kill_at and kill_at.strip().isdigit() and count == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
        if pause_at and not _PAUSED and (
            count == int(pause_at) if pause_at.strip().isdigit() else re.search(pause_at, label)
        ):
            _PAUSED = True
            _pause(label)


def _pause(label: str) -> None:
    """Announce ``label`` in ``$FVCONSOLE_FAULT_PAUSE_FILE``, wait until the test deletes it."""
    path = os.environ.get("FVCONSOLE_FAULT_PAUSE_FILE")
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()} {label}\n")
    os.replace(tmp, path)  # the test never sees a half-written announcement
    deadline = time.monotonic() + float(os.environ.get("FVCONSOLE_FAULT_PAUSE_TIMEOUT", "120"))
    while os.path.lexists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
