"""What one command has done, where it is journalled and how it ended: one context passed to it, never module state.

The dispatcher makes one :class:`Invocation` per command line and passes it to the command
(``func(args, invocation)``): its command line (for the journal), where its journal goes and
what it has written. A write command calls :meth:`Invocation.record_write` the moment its write
is complete (sidecars published, entries evicted). Anything that fails after that point, such
as printing the result to a full disk or a closed pipe, is then exit 3 with this description
on stderr, never exit 1 ("refused, nothing written"). A command returns its exit code, or an
:class:`Interruption` (the runner's ``Stop`` and the command's JSON fields) for the dispatcher
to report. The dispatcher returns a :class:`CommandOutcome` (``fvconsole.cli.run``): the exit
code and the refusal as data, which the fleet's node runner sends along. ``main()`` may run
several times in one process (the node runner, tests): each run has its own invocation, so
nothing carries over.

The journal from the command line: ``--journal PATH`` / ``--no-journal``
(:func:`add_journal_args`, :func:`journal_target`). Each write command builds its record in the
core after its action; a journal that cannot be written is a warning on stderr (and
``journal.written: false`` in JSON); the action and the exit code stand.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fvconsole.cli.common import warn
from fvconsole.cli.options import add_journal
from fvconsole.core.journal import ENV_JOURNAL, JournalWrite, journal_path
from fvconsole.core.shared import flags

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.shared import Reason, Stop

#: A journal line must stay short (core.journal.log.LINE_MAX): a longer command line is cut here.
COMMAND_MAX = 1000


@dataclass(frozen=True)
class CommandOutcome:
    """How one command ended: its exit code and, for a refusal that has one, the reason as data."""

    exit_code: int
    reason: Reason | None = None


@dataclass(frozen=True)
class Interruption:
    """A command stopped by a signal, as it returns it: the runner's ``Stop`` and the command's JSON fields."""

    stop: Stop
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Invocation:
    """One command line's run: what the command is given (its command line, its journal) and what it wrote.

    Made by the dispatcher for each run and passed to the command: the CLI keeps no module state.
    """

    argv: tuple[str, ...]
    #: The journal this command appends to (None: --no-journal, or a command without one).
    journal: str | None = None
    #: What the command has written so far, completing "error: ...; <written>" (None: nothing yet).
    written: str | None = None

    @classmethod
    def of(cls, args: argparse.Namespace, argv: Sequence[str]) -> Invocation:
        """The invocation of ``argv`` parsed into ``args`` (the journal: ``--journal``, ``--no-journal``, the default)."""
        return cls(tuple(argv), journal_target(args))

    def record_write(self, what: str) -> None:
        """Mark the command's write as done; ``what`` completes "error: ...; <what>"."""
        self.written = what

    @property
    def command_line(self) -> str:
        """``fvconsole <the command's arguments>``, shell-quoted and bounded (for the journal)."""
        text = shlex.join(["fvconsole", *self.argv])
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


def journal_json(result: JournalWrite | None) -> dict[str, object] | None:
    return result.to_json() if result is not None else None
