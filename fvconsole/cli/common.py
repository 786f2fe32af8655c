"""Helpers shared by the headless commands: JSON output, human text, sizes, ages, plain tables.

Human text reaches the terminal only through :func:`say` (and the usage errors of
``cli.parser.CliParser``): every untrusted string in it (file names, config keys and values,
dataset ids, DCP keys) shows its control characters escaped (``core.shared.terminal_text``). JSON output
(:func:`emit_json`) stays exact.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fvconsole.cli.streams import flush_stdout, write_err, write_out, write_status
from fvconsole.core.shared import EXIT_PARTIAL, FvError, PartialFailure, human_bytes, printable


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


def warn(*messages: str) -> None:
    """One ``warning: ...`` line per message, on stderr, for every command alike: a warning is a
    diagnostic, so a pipe or a file of the command's output (``cache ls > listing``) holds the
    result only. stdout is flushed first, so on a terminal the warning follows what came before."""
    if not messages:
        return
    flush_stdout()
    say(*(f"warning: {m}" for m in messages), err=True)


def emit_json(payload: Any) -> None:
    """Print exactly one JSON object on stdout."""
    write_out(json.dumps(payload, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


#: ``json.dumps(obj, sort_keys=True, default=str)`` is ``JSONEncoder(sort_keys=True, default=str).encode(obj)``.
_SORTED_ENCODER = json.JSONEncoder(sort_keys=True, default=str)


def json_chunks(head: dict[str, Any], key: str, items: Iterable[Any], batch: int = 512,
                encode: Callable[[Any], str] | None = None) -> Iterable[str]:
    """``json.dumps({**head, key: [*items]}, sort_keys=True, default=str) + "\n"``, byte for byte, in pieces.

    The list is encoded item by item as it is produced, so a listing of 200,000 entries never
    exists as one giant dict or string (``cache ls --json``). ``encode``: what turns one item
    into its text, where the caller has a faster equal one (``CacheEntry.json_text``).
    """
    if encode is None:
        encode = _SORTED_ENCODER.encode  # what json.dumps(sort_keys=True, default=str) builds anew for every call
    keys = sorted({*head, key})
    yield "{"
    for i, name in enumerate(keys):
        yield (", " if i else "") + json.dumps(name) + ": "
        if name != key:
            yield json.dumps(head[name], sort_keys=True, default=str)
            continue
        yield "["
        pending: list[str] = []
        first = True
        for item in items:
            pending.append(encode(item))
            if len(pending) >= batch:
                yield ("" if first else ", ") + ", ".join(pending)
                first, pending = False, []
        if pending:
            yield ("" if first else ", ") + ", ".join(pending)
        yield "]"
    yield "}\n"


def emit_json_stream(head: dict[str, Any], key: str, items: Iterable[Any],
                     encode: Callable[[Any], str] | None = None) -> None:
    """Print one JSON object on stdout whose ``key`` list is written as ``items`` come (:func:`json_chunks`)."""
    for chunk in json_chunks(head, key, items, encode=encode):
        write_out(chunk)
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


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = (), *,
                 width: int | None = None, droppable: Sequence[str] = (), wrap: str | None = None) -> Block:
    """A plain aligned text table (no colour: it must read well in logs and srun output).

    Every cell is sanitised (``printable``) before it is measured, so columns stay aligned
    and no cell can move the cursor, retitle the terminal or break the table into lines.

    With ``width`` (a terminal's, see :func:`terminal_width`) a table wider than that fits
    it: the ``wrap`` column (named by header) is wrapped onto continuation lines, after the
    ``droppable`` columns (low value first) are left out while that column would be narrower
    than :data:`MIN_WRAP`. Nothing is cut: a left-out column that held anything is named on
    a last line, with ``--wide`` to show it.
    """
    cells = [[printable(h) for h in headers]] + [["" if c is None else printable(c) for c in row] for row in rows]
    names = list(cells[0])
    right_names = {names[i] for i in right if i < len(names)}
    hidden: list[str] = []
    if width is not None:
        cells, hidden = _fit(cells, width, droppable, wrap)
    widths = [max(len(line) for row in cells for line in row[i].split("\n")) for i in range(len(cells[0]))]
    lines = []
    for row in cells:
        parts = [cell.split("\n") for cell in row]
        for depth in range(max(len(p) for p in parts)):
            line = [p[depth] if depth < len(p) else "" for p in parts]
            line = [c.rjust(widths[i]) if cells[0][i] in right_names else c.ljust(widths[i]) for i, c in enumerate(line)]
            lines.append("  ".join(line).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    if hidden:
        lines.append(f"(not shown at this width: {', '.join(hidden)}; --wide shows every column)")
    return Block("\n".join(lines))


#: The narrowest a wrapped column is made before low-value columns are left out instead.
MIN_WRAP = 24


def _fit(cells: list[list[str]], width: int, droppable: Sequence[str], wrap: str | None) -> tuple[list[list[str]], list[str]]:
    """``cells`` narrowed to ``width`` (see :func:`format_table`); also the left-out columns that held text."""
    import textwrap

    def total(rows: list[list[str]]) -> int:
        return sum(max(len(r[i]) for r in rows) for i in range(len(rows[0]))) + 2 * (len(rows[0]) - 1)

    hidden = []
    names = cells[0]
    flex = names.index(wrap) if wrap in names else None
    for name in droppable:
        if total(cells) <= width or name not in cells[0]:
            continue
        if flex is not None:
            others = total(cells) - max(len(r[flex]) for r in cells)
            if width - others >= MIN_WRAP:
                break
        i = cells[0].index(name)
        if any(r[i] for r in cells[1:]):
            hidden.append(name)
        cells = [r[:i] + r[i + 1:] for r in cells]
        flex = cells[0].index(wrap) if flex is not None else None
    if flex is not None and total(cells) > width:
        room = max(MIN_WRAP, len(cells[0][flex]), width - (total(cells) - max(len(r[flex]) for r in cells)))
        cells = [cells[0]] + [
            [("\n".join(textwrap.wrap(c, room, break_on_hyphens=False)) or c) if i == flex else c for i, c in enumerate(r)]
            for r in cells[1:]
        ]
    return cells, hidden


def same_terminal() -> bool:
    """Whether stdout and stderr are one terminal: a line printed on both would be read twice there.

    Compared by the device each descriptor is open on, so ``2>&1`` to a file, or two terminals, is not one.
    """
    import os

    try:
        if not (sys.stdout.isatty() and sys.stderr.isatty()):
            return False
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (AttributeError, ValueError, OSError):
        return False
    return (out.st_dev, out.st_ino, out.st_rdev) == (err.st_dev, err.st_ino, err.st_rdev)


def terminal_width() -> int | None:
    """The terminal's width when stdout is one (``$COLUMNS`` first, as shutil does); None when piped.

    Piped output (logs, ``| grep``, srun) stays one table row per line, whatever its width.
    """
    import shutil

    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return max(40, shutil.get_terminal_size().columns)


def progress_printer(label: str, *, plain_lines: bool = False, in_bytes: bool = False) -> Callable[[int, int, str], None]:
    """A thread-safe progress callback writing to stderr.

    On a TTY one line is rewritten in place. Otherwise (logs, srun) nothing is printed,
    or, with ``plain_lines``, at most about ten plain lines (one per tenth of the work).
    ``in_bytes``: done and total are bytes, shown as sizes (``1.8 MiB/3.6 MiB``).
    """
    def amount(n: int) -> str:
        return human_bytes(n) if in_bytes else str(n)

    tty = sys.stderr.isatty()
    lock = threading.Lock()
    last = {"decile": -1}

    def show(done: int, total: int, message: str) -> None:
        message = printable(message)  # messages name files
        with lock:
            if tty:
                shown = message if len(message) <= 70 else message[:69] + "…"
                write_status(f"{label} {amount(done)}/{amount(total)}  {shown}", final=bool(total) and done >= total)
            elif plain_lines:
                decile = done * 10 // max(total, 1)
                if decile == last["decile"]:
                    return
                last["decile"] = decile
                write_err(f"progress: {amount(done)}/{amount(total)} {message}\n")
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


#: --wait and --watch: more than a day is a typo, not a plan.
MAX_SECONDS = 86400.0


def seconds(flag: str, *, positive: bool = False) -> Callable[[str], float]:
    """An argparse ``type`` for ``--wait``/``--watch`` (``cache`` and ``fleet cache`` word it alike)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
        low_ok = value > 0 if positive else value >= 0
        if not math.isfinite(value) or not low_ok or value > MAX_SECONDS:
            bound = "> 0" if positive else ">= 0"
            raise argparse.ArgumentTypeError(f"must be {bound} and at most {MAX_SECONDS:g} seconds, got {text!r}")
        return value + 0.0

    parse.__name__ = flag  # argparse names the type in its error message
    return parse
