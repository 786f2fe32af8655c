"""Children that a test signals start with that signal's default disposition.

Why: an ignored signal is inherited across fork and exec. The suite run as ``nohup python -m
pytest ... &`` (a common way to run it on a login node) ignores SIGHUP, and a script's
``... &`` ignores SIGINT; a child started from it would then ignore the very signal the test
sends, and fvconsole leaves a signal that someone else already handles alone (docs/cli.md,
Interruptions), so the test would fail for a reason of its runner's. Every ``Popen``/``run`` of
a process that a test signals passes ``preexec_fn=DEFAULTS`` (a fork that runs fvconsole in-process
calls :func:`python_defaults`); ``tests/architecture/test_signal_defaults.py`` holds every test module
that signals a child to it, and runs one of them under ``nohup`` and a script's ``&``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

#: The signals tests send to their children (SIGKILL, SIGSTOP and SIGCONT cannot be ignored).
SENT = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)


def defaults(*signals: int) -> Callable[[], None]:
    """A ``preexec_fn`` that gives ``signals`` (all of :data:`SENT` by default) their default disposition."""
    chosen = signals or SENT

    def reset() -> None:
        for signum in chosen:
            signal.signal(signum, signal.SIG_DFL)

    return reset


#: The ``preexec_fn`` for a child the test signals.
DEFAULTS = defaults()


def python_defaults() -> None:
    """In a forked child that runs fvconsole in-process (no exec): Python's own start-up dispositions,
    SIGINT raising KeyboardInterrupt and the others default, as a fresh interpreter would have them."""
    DEFAULTS()
    signal.signal(signal.SIGINT, signal.default_int_handler)
