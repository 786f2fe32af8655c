"""What a command has already changed on disk, for the dispatcher's exit code after a failure.

A write command calls :func:`record_write` the moment its write is complete (sidecars
published, entries evicted). Anything that fails after that point, such as printing the
result to a full disk or a closed pipe, is then exit 3 with this description on stderr,
never exit 1 ("refused, nothing written").
"""

from __future__ import annotations

from contextvars import ContextVar, Token

_DONE: ContextVar[str | None] = ContextVar("fvconsole_write_done", default=None)


def record_write(what: str) -> None:
    """Mark the current command's write as done; ``what`` completes "error: ...; <what>"."""
    _DONE.set(what)


def write_done() -> str | None:
    """The description given to :func:`record_write` by the current command, if any."""
    return _DONE.get()


def begin_command() -> Token:
    """Start a command with nothing written (main() may run several times in one process)."""
    return _DONE.set(None)


def end_command(token: Token) -> None:
    _DONE.reset(token)
