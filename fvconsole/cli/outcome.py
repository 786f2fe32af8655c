"""What a command has already changed on disk, for the dispatcher's exit code after a failure.

A write command calls :func:`record_write` the moment its write is complete (sidecars
published, entries evicted). Anything that fails after that point, such as printing the
result to a full disk or a closed pipe, is then exit 3 with this description on stderr,
never exit 1 ("refused, nothing written").
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from contextvars import ContextVar, Token

_DONE: ContextVar[str | None] = ContextVar("fvconsole_write_done", default=None)
_ARGV: ContextVar[tuple[str, ...]] = ContextVar("fvconsole_argv", default=())
#: A journal line must stay short (core.journal.LINE_MAX): a longer command line is cut here.
COMMAND_MAX = 1000


def record_write(what: str) -> None:
    """Mark the current command's write as done; ``what`` completes "error: ...; <what>"."""
    _DONE.set(what)


def write_done() -> str | None:
    """The description given to :func:`record_write` by the current command, if any."""
    return _DONE.get()


def begin_command(argv: Sequence[str] = ()) -> tuple[Token, Token]:
    """Start a command with nothing written (main() may run several times in one process)."""
    return _DONE.set(None), _ARGV.set(tuple(argv))


def end_command(tokens: tuple[Token, Token]) -> None:
    _DONE.reset(tokens[0])
    _ARGV.reset(tokens[1])


def command_line() -> str:
    """``fvconsole <the current command's arguments>``, shell-quoted and bounded (for the journal)."""
    text = shlex.join(["fvconsole", *_ARGV.get()])
    return text if len(text) <= COMMAND_MAX else text[: COMMAND_MAX - 3] + "..."
