"""Helpers shared by the headless commands: JSON output, human text, sizes, ages, plain tables.

Human text reaches the terminal only through :func:`say` (and the usage errors of
``cli.parser.CliParser``): every untrusted string in it (file names, config keys and values,
dataset ids, DCP keys) shows its control characters escaped (``core.printable``). JSON output
(:func:`emit_json`) stays exact.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fvconsole.cli.streams import write_err, write_out
from fvconsole.core.errors import EXIT_PARTIAL, FvError, PartialFailure
from fvconsole.core.printable import printable


class Block(str):
    """Multi-line human text whose line structure is ours and whose content is already printable.

    Built only by :func:`block` and :func:`format_table`. Any other string handed to
    :func:`say` counts as one line whose every control character (newlines included) is
    escaped, so an untrusted value can neither drive the terminal nor forge a line.
    """


def block(lines: Iterable[str]) -> Block:
    """Join lines into a :class:`Block`; a line that is not already a Block is sanitised whole."""
    return Block("\n".join(line if isinstance(line, Block) else printable(line) for line in lines))


def say(*lines: str, err: bool = False) -> None:
    """Print lines of human text on stdout (stderr with ``err``); no argument prints an empty line."""
    (write_err if err else write_out)(block(lines) + "\n")


def emit_json(payload: Any) -> None:
    """Print exactly one JSON object on stdout."""
    write_out(json.dumps(payload, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def command_failed(code: int, message: str, payload: dict[str, Any] | None = None) -> FvError:
    """The error a command raises when it ran but failed (exit ``code``: 1, or 3 part-way).

    Raised instead of returning the code, so the dispatcher words it the one way: the
    ``error:`` line on stderr and, under --json, ``payload`` with ``"error"`` as the one
    JSON object (the command must not have printed its own).
    """
    if code == EXIT_PARTIAL:
        return PartialFailure(message, report=payload)
    return FvError(message, details=payload)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> Block:
    """A plain aligned text table (no colour: it must read well in logs and srun output).

    Every cell is sanitised (``printable``) before it is measured, so columns stay aligned
    and no cell can move the cursor, retitle the terminal or break the table into lines.
    """
    cells = [[printable(h) for h in headers]] + [["" if c is None else printable(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(parts).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return Block("\n".join(lines))




def progress_printer(label: str, *, plain_lines: bool = False) -> Callable[[int, int, str], None]:
    """A thread-safe progress callback writing to stderr.

    On a TTY one line is rewritten in place. Otherwise (logs, srun) nothing is printed,
    or, with ``plain_lines``, at most about ten plain lines (one per tenth of the work).
    """
    tty = sys.stderr.isatty()
    lock = threading.Lock()
    last = {"decile": -1}

    def show(done: int, total: int, message: str) -> None:
        message = printable(message)  # messages name files
        with lock:
            if tty:
                end = "\n" if total and done >= total else ""
                write_err(f"\r\x1b[K{label} {done}/{total}  {message[:70]}{end}")
            elif plain_lines:
                decile = done * 10 // max(total, 1)
                if decile == last["decile"]:
                    return
                last["decile"] = decile
                write_err(f"progress: {done}/{total} {message}\n")
            else:
                return
            sys.stderr.flush()

    return show


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for integers >= ``minimum``, so every integer flag words its error alike."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse

