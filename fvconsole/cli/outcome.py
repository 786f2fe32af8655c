"""What one command has done, where it is journalled and how it ended, kept with that command, never in module state.

A write command calls :func:`record_write` on its parsed arguments the moment its write is
complete (sidecars published, entries evicted). Anything that fails after that point, such
as printing the result to a full disk or a closed pipe, is then exit 3 with this description
on stderr, never exit 1 ("refused, nothing written"). The dispatcher returns a
:class:`CommandOutcome` (``fvconsole.cli.run``): the exit code and the refusal as data, which
the fleet's node runner sends along. ``main()`` may run several times in one process (the node
runner, tests): each run has its own namespace, so nothing carries over.

The journal from the command line: ``--journal PATH`` / ``--no-journal``
(:func:`add_journal_args`, :func:`journal_target`). Each write command builds its record in the
core after its action; a journal that cannot be written is a warning on stderr (and
``journal.written: false`` in JSON); the action and the exit code stand.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fvconsole.cli.common import warn
from fvconsole.cli.options import add_journal
from fvconsole.core.journal import ENV_JOURNAL, JournalRecord, JournalWrite, append_record, journal_path
from fvconsole.core.shared import flags

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.shared import Reason

#: A journal line must stay short (core.journal.log.LINE_MAX): a longer command line is cut here.
COMMAND_MAX = 1000
#: Namespace attributes: the command line as given, and what the command has written.
_ARGV = "_fvconsole_argv"
_DONE = "_fvconsole_write_done"


@dataclass(frozen=True)
class CommandOutcome:
    """How one command ended: its exit code and, for a refusal that has one, the reason as data."""

    exit_code: int
    reason: Reason | None = None


def begin_command(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Remember the command line of the command ``args`` was parsed from (for the journal)."""
    setattr(args, _ARGV, tuple(argv))


def record_write(args: argparse.Namespace, what: str) -> None:
    """Mark the command's write as done; ``what`` completes "error: ...; <what>"."""
    setattr(args, _DONE, what)


def write_done(args: argparse.Namespace | None) -> str | None:
    """The description given to :func:`record_write` by this command, if any."""
    return getattr(args, _DONE, None)


def command_line(args: argparse.Namespace) -> str:
    """``fvconsole <the command's arguments>``, shell-quoted and bounded (for the journal)."""
    text = shlex.join(["fvconsole", *getattr(args, _ARGV, ())])
    return text if len(text) <= COMMAND_MAX else text[: COMMAND_MAX - 3] + "..."


# ---------------------------------------------------------------- the journal


def add_journal_args(parser: argparse.ArgumentParser) -> None:
    add_journal(parser, f"append what --yes did to this journal (default ${ENV_JOURNAL}, else "
                        "$XDG_STATE_HOME/fvconsole/journal.jsonl, i.e. ~/.local/state/fvconsole/)")
    parser.add_argument(flags.NO_JOURNAL, action="store_true", help="do not write a journal line")


def journal_target(args: argparse.Namespace) -> str | None:
    """The journal this command appends to, or None with --no-journal."""
    if getattr(args, "no_journal", False):
        return None
    return journal_path(getattr(args, "journal", None))


def warn_if_unwritten(result: JournalWrite | None) -> None:
    if result is not None and not result.written:
        warn(f"journal {result.path}: {result.error}; the action itself is done and stands")


def write_journal(args: argparse.Namespace, build: Callable[[], JournalRecord]) -> JournalWrite | None:
    """Append the record ``build()`` makes, unless --no-journal; warn on stderr when it fails."""
    path = journal_target(args)
    if path is None:
        return None
    result = append_record(build(), path)
    warn_if_unwritten(result)
    return result


def journal_json(result: JournalWrite | None) -> dict[str, object] | None:
    return result.to_json() if result is not None else None
