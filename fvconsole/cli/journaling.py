"""The journal from the command line: ``--journal PATH`` / ``--no-journal``, and reporting a failed append.

Each write command builds its record with :mod:`fvconsole.core.journal.log` after its action
and hands it here. A journal that cannot be written is a warning on stderr (and
``journal.written: false`` in JSON); the action and the exit code stand.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from fvconsole.cli.common import warn
from fvconsole.core.journal import ENV_JOURNAL, JournalRecord, JournalWrite, append_record, journal_path


def add_journal_args(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: not given here, `fvconsole --journal PATH migrate ...` (given before the
    # command, as for the console) still counts instead of being reset to None.
    parser.add_argument("--journal", metavar="PATH", default=argparse.SUPPRESS,
                        help=f"append what --yes did to this journal (default ${ENV_JOURNAL}, else "
                             "$XDG_STATE_HOME/fvconsole/journal.jsonl, i.e. ~/.local/state/fvconsole/)")
    parser.add_argument("--no-journal", action="store_true", help="do not write a journal line")


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
