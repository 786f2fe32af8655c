"""Untrusted text in the console: always plain (never markup), control characters shown escaped.

File names, config keys and values, dataset ids, DCP keys and error messages are data. In the
console they must not be parsed as Rich/Textual markup (a dataset id ``[/]s52`` raised
``MarkupError`` and crashed the app; ``[link=...]x[/link]`` became a link) and must not reach
the terminal raw (Rich passes ESC through, so an OSC sequence retitled the terminal).

The console's choke points use these helpers, all built on ``core.shared.terminal_text``:

- :class:`PlainText` composes text from data (views build their panels with it);
- :func:`plain_content` is what :class:`~fvconsole.tui.widgets.PlainStatic` shows;
- :func:`table_cell` is what :class:`~fvconsole.tui.widgets.FastTable` stores;
- :class:`ControlPictures` shows the controls of an input's value, which must stay exact.
"""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.text import Text

from fvconsole.core.shared import clipped, pictured, printable

#: Characters that markup parsing would change: tags (``[``), emoji codes (``:name:``).
MARKUP_CHARACTER = re.compile(r"[\[:]")


class PlainText(Text):
    """A Rich ``Text`` whose every appended string is shown printable (``\\x1b``, ``\\u202e``).

    Rich on its own drops BEL, CR and a few others and passes ESC to the terminal. Newlines
    are kept: the line structure of text a view composes is the view's own.
    """

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(printable(text, keep_newlines=True), *args, **kwargs)

    def append(self, text: str | Text, style: Any = None) -> PlainText:
        text = printable(text, keep_newlines=True) if isinstance(text, str) else safe_text(text)
        super().append(text, style)
        return self

    def append_text(self, text: Text) -> PlainText:
        super().append_text(safe_text(text))
        return self


def safe_text(text: Text) -> Text:
    """``text`` with its control characters escaped and every style kept on what it styled."""
    if printable(text.plain, keep_newlines=True) == text.plain:
        return text
    cuts = sorted({span.start for span in text.spans} | {span.end for span in text.spans})
    out = text.blank_copy()
    for piece in text.divide(cuts):  # within a piece every span covers all of it
        clean = Text(printable(piece.plain, keep_newlines=True))
        for span in piece.spans:
            if span.end > span.start:
                clean.stylize(span.style)
        out.append_text(clean)
    return out


def plain_content(content: Any) -> Any:
    """What a widget showing data renders: a string as plain escaped text, a Text escaped."""
    if isinstance(content, str):
        return PlainText(content)
    if isinstance(content, Text):
        return safe_text(content)
    return content


def table_cell(value: Any) -> Any:
    """A table cell: a string that holds a control character, or that markup would change
    (should it ever reach a markup parser), becomes plain Text of its printable form. Others
    stay strings (cheap: thousands of rank rows are refilled at once)."""
    if isinstance(value, str):
        shown = printable(value)
        if shown == value and not MARKUP_CHARACTER.search(value):
            return value
        return Text(shown, end="", no_wrap=True)
    if isinstance(value, Text):
        return safe_text(value)
    return value


class ControlPictures(Highlighter):
    """Shows an input's control characters as ␛ ␇ … (and C1, bidi, invisible characters, bad bytes as �).

    An input's value is an exact path the operator may run with, so it is never rewritten;
    only what is drawn changes, character for character.
    """

    def highlight(self, text: Text) -> None:
        shown = pictured(text.plain)
        if shown != text.plain:
            text.plain = shown


#: The fewest cells of a partly fitting component worth showing (``…ation/output``, not ``…n/output``).
MIN_PARTIAL = 3


def fit_path(path: str, width: int) -> str:
    """``path`` in at most ``width`` cells: whole if it fits, else its middle elided, never its end.

    The end of a path says what it is and which run it belongs to, so it keeps as many of its
    last components as fit whole, then the end of the next one in the room left, with a leading
    ``…`` (``…-finetune-ablation/output``): the run's name, not ``/tmp/…/output``. The first
    component only when no part of another is left to show (``/lustre/…/checkpoint-300``).
    With no room for even the last component, its tail with a leading ellipsis. Every place of
    the console that shortens a path (paths line, unfocused path fields, table cells) uses this.
    """
    if width <= 0:
        return ""
    if cell_len(path) <= width:
        return path
    absolute = path.startswith("/")
    parts = path.split("/")
    head = "/".join(parts[:2]) if absolute else parts[0]
    rest = parts[2:] if absolute else parts[1:]
    tail: list[str] = []
    for part in reversed(rest):
        if cell_len("…/" + "/".join([part, *tail])) > width:
            break
        tail.insert(0, part)
    if not tail:
        return "…" + _tail_cells(path, width - 1)
    end = "/" + "/".join(tail)
    before = path[: len(path) - len(end)]  # what the whole components leave out: its end is the next one
    room = width - cell_len(end) - 1
    if room >= MIN_PARTIAL and before:
        return "…" + _tail_cells(before, room) + end
    if before != head and cell_len(head + "/…" + end) <= width:
        return head + "/…" + end
    return "…" + end


def fitted(path: str, width: int) -> str:
    """``path`` printable and fitted (:func:`fit_path`) into a ``width``-cell line: a path on a
    line of a panel (``FitStatic``) that would wrap mid-name. At least the last component's
    tail is kept (``…ckpoint-300``)."""
    return fit_path(printable(path), max(width, MIN_PARTIAL + 1))


def fit_cell(text: str, width: int) -> str:
    """The one rule for a table cell wider than its column: a path (it has a ``/``) loses its
    middle and keeps its end (:func:`fit_path`); anything else keeps its start and ends with ``…``.
    Never cut without a mark: ``sample-00028`` for ``sample-000284`` reads as another id."""
    if cell_len(text) <= width:
        return text
    if width <= 0:
        return ""
    if "/" in text.strip("/"):
        return fit_path(text, width)
    out = ""
    for char in text:
        if cell_len(out + char) > width - 1:
            break
        out += char
    return out + "…"


def _tail_cells(text: str, width: int) -> str:
    """The longest end of ``text`` that fits in ``width`` cells."""
    out = ""
    for char in reversed(text):
        if cell_len(char + out) > width:
            break
        out = char + out
    return out


def one_line(text: str, width: int = 78) -> str:
    """``text`` on one line of at most ``width`` characters (reasons can be paragraphs)."""
    return clipped(" ".join(str(text).split()), width)
