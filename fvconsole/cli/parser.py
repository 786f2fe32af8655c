"""The argument parser every fvconsole (sub)command uses, so usage errors follow the error contract.

argparse's own error path prints the usage block and `prog: error: ...` over several lines
and exits by itself. Here every parser (subparsers inherit the class) raises
:class:`CliUsageError` instead; the dispatcher prints one ``error:`` line, a ``try: ... --help``
hint and, under ``--json``, ``{"error": ...}`` on stdout, then exits 2.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterator, Sequence

from fvconsole.core.shared import flags


class CliUsageError(Exception):
    """A usage error found while parsing: the message and the parser it belongs to."""

    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message)
        self.message = message
        self.parser = parser

    @property
    def hint(self) -> str:
        return usage_hint(self.parser.prog)


def usage_hint(prog: str) -> str:
    """The line under every usage error (exit 2), whether argparse or a command found it."""
    return f"try: {prog} --help"


#: The namespace attribute naming the (sub)command parsed, for usage errors found after parsing.
PROG_ATTR = "_fvconsole_prog"


def parsed_prog(args: argparse.Namespace | None) -> str:
    """``fvconsole cache evict`` for a parsed `cache evict` command line (``fvconsole`` if unknown)."""
    return getattr(args, PROG_ATTR, None) or "fvconsole"


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are raised (one line, with a suggestion), never printed.

    ``entered``: set by :func:`parse_command_line` on every parser of the tree for one parse,
    the parsers entered so far, outermost first; the last one is the (sub)command whose
    options an unrecognized argument was meant for.
    """

    entered: list[argparse.ArgumentParser] | None = None

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self.entered is not None:
            self.entered.append(self)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # type: ignore[override]
        raise CliUsageError(" ".join(message.split()), self)

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # Same check as argparse's; a rejected choice (a subcommand or --sort value) gets a suggestion.
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            hint = did_you_mean(str(value), [str(c) for c in action.choices or ()])
            if not hint:
                raise
            raise argparse.ArgumentError(action, f"{exc.message}{hint}") from None


def did_you_mean(word: str, candidates: Sequence[str]) -> str:
    """`` (did you mean X?)`` for the closest candidate, or "" when none is close.

    Leading dashes are not compared: every option shares them, so ``--json`` would otherwise
    look close to ``--version``.
    """
    by_name = {c.lstrip("-"): c for c in candidates if c.lstrip("-")}
    close = difflib.get_close_matches(word.lstrip("-"), list(by_name), n=1, cutoff=0.6)
    return f" (did you mean {by_name[close[0]]}?)" if close else ""


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings]


def _is_known_option(token: str, parsers: Sequence[argparse.ArgumentParser]) -> bool:
    name = token.split("=", 1)[0]
    for parser in parsers:
        options = _option_strings(parser)
        if name in options or (name.startswith("--") and any(o.startswith(name) for o in options)):
            return True
    return False


def _unknown_options(argv: Sequence[str], parsers: Sequence[argparse.ArgumentParser]) -> list[str]:
    """Option-looking tokens of ``argv`` that no entered parser knows (``--`` ends options)."""
    unknown = []
    for token in argv:
        if token == "--":
            break
        if token.startswith("-") and len(token) > 1 and not token[1:2].isdigit() and not _is_known_option(token, parsers):
            unknown.append(token)
    return unknown


def _parser_at(token: str, argv: Sequence[str], parsers: Sequence[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The parser whose options are valid where ``token`` first stands in ``argv``.

    Options given before a subcommand's name belong to the parser above it: an option of
    another level is no valid suggestion (`demo --json` must not suggest the top's --version).
    """
    words = [p.prog.split()[-1] for p in parsers[1:]]  # the command word that enters each parser
    level = 0
    for item in argv:
        if item == token:
            break
        if level < len(words) and item == words[level]:
            level += 1
    return parsers[min(level, len(parsers) - 1)]


def _suggestion(unknown: Sequence[str], parsers: Sequence[argparse.ArgumentParser],
                argv: Sequence[str]) -> tuple[str, str]:
    """(token, " (did you mean X?)") for the first unknown option close to an option valid
    where it stands; ("", "") when none is close."""
    for token in unknown:
        name = token.split("=", 1)[0]
        hint = did_you_mean(name, _option_strings(_parser_at(token, argv, parsers)))
        if hint:
            return token, hint
    return "", ""


def _tree(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subparser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases name one parser twice
                yield from _tree(sub)


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv``; raises CliUsageError (with a suggestion where one is close) on any usage error."""
    entered: list[argparse.ArgumentParser] = []
    parsers = [p for p in _tree(parser) if isinstance(p, CliParser)]
    for p in parsers:
        p.entered = entered
    try:
        try:
            args, extras = parser.parse_known_args(list(argv))
        except CliUsageError as exc:
            entered = entered or [parser]
            unknown, hint = _suggestion(_unknown_options(argv, entered), entered, argv)
            if hint and exc.message.startswith("the following arguments are required"):
                raise CliUsageError(f"{exc.message}; unrecognized: {unknown}{hint}", exc.parser) from None
            if hint and exc.message.startswith("argument COMMAND: invalid choice"):
                # `--confg X`: argparse took the misspelled option's value for the command;
                # the misspelling is the error the user made.
                raise CliUsageError(f"unrecognized arguments: {unknown}{hint}", exc.parser) from None
            raise
        entered = entered or [parser]
        if extras:
            _, hint = _suggestion(_unknown_options(extras, entered), entered, argv)
            raise CliUsageError(f"unrecognized arguments: {' '.join(extras)}{hint}", entered[-1])
        setattr(args, PROG_ATTR, entered[-1].prog)
        return args
    finally:
        for p in parsers:
            p.entered = None


def json_requested(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or an abbreviation argparse accepts) is on the command line."""
    for token in argv:
        if token == "--":
            return False
        if len(token) >= 4 and flags.JSON.startswith(token):
            return True
    return False
