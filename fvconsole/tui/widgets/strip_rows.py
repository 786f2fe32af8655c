"""How ``StripTable`` draws a row: its cells' segments, as Textual's ``DataTable`` draws them
(padding, the text fitted to its column, fill, padding; each in the row's style with the cell's
own styles over it and the cursor's over both), the row extended to the view's width, and the
cut edge marked. Plain functions of plain data: ``tui/widgets/strip_table.py`` keeps the rows,
the cursor and the scrolling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from fvconsole.tui.widgets.cells import FittedCell

#: The components a table draws with: the header, the rows (zebra stripes), the cursor's row,
#: the row under the mouse (and the header under it).
COMPONENTS = ("table--header", "table--even-row", "table--odd-row", "table--cursor", "table--hover",
              "table--header-hover")

#: ``DataTable``'s look (Textual 8), for the components a ``StripTable`` draws.
TABLE_CSS = """
    StripTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .table--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark {
            & > .table--even-row {
                background: $surface-darken-1 40%;
            }
        }
        & > .table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .table--odd-row {
        }
        & > .table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .table--header-hover {
            background: $accent 30%;
        }
        & > .table--hover {
            background: $block-hover-background;
        }
    }
"""


def cell_text(value: Any) -> Text:
    """What a cell shows, as one line of Text: a string as written (never markup: a view stores
    ``plain.table_cell``'s, printable), a float with two decimals, None as nothing."""
    if isinstance(value, Text):
        text = value
    elif value is None:
        return Text(no_wrap=True, end="")
    elif isinstance(value, float):
        text = Text(f"{value:.2f}", no_wrap=True, end="")
    else:
        text = Text(str(value), no_wrap=True, end="")
    if "\n" in text.plain:
        text = text.split("\n")[0]
    if "\t" in text.plain:
        text = text.copy()
        text.expand_tabs()
    return text


class FrameStyles(NamedTuple):
    """The styles one frame draws with, looked up once per frame (and part of a row's cache key,
    so a change of focus or theme draws every row again)."""

    base: Style
    header: Style
    even: Style
    odd: Style
    cursor: Style
    hover: Style
    header_hover: Style


def cell_segments(text: Text, inner: int, pad: int, pre: Style, post: Style, console: Console) -> list[Segment]:
    """One cell: padding, the text fitted to ``inner`` cells (its own styles over ``pre``), fill,
    padding; ``post`` (the cursor's colour) over every segment."""
    fitted = FittedCell(text).fitted(inner) if inner > 0 else Text()
    if fitted.cell_len > inner:
        fitted = fitted.copy()
        fitted.truncate(inner)
    if fitted.spans:
        line = [Segment(part, pre + style if style else pre) for part, style, _c in fitted.render(console)]
    elif fitted.style:
        line = [Segment(fitted.plain, pre + console.get_style(fitted.style))]
    else:
        line = [Segment(fitted.plain, pre)] if fitted.plain else []
    fill = inner - fitted.cell_len
    if fill:
        line.append(Segment(" " * fill, pre))
    if pad:
        line = [Segment(" " * pad, pre), *line, Segment(" " * pad, pre)]
    if post:
        line = [Segment(part, style + post if style else post) for part, style, _c in line]
    return line


def draw_row(cells: Sequence[Any], widths: Sequence[int], pad: int, width: int, row_index: int, row_style: Style,
             component: Style, console: Console) -> Strip:
    """A whole row (``row_index`` -1: the header): each cell in its column's width and ``pad``
    cells each side, then blanks to ``width`` (the view's) in the row's style. Every segment
    carries the row and column it shows (``meta``), which a click reads."""
    post = Style.from_color(color=component.color)
    segments: list[Segment] = []
    for column_index, (value, inner) in enumerate(zip(cells, widths, strict=True)):
        pre = row_style + Style.from_meta({"row": row_index, "column": column_index}) + component
        segments += cell_segments(cell_text(value), inner, pad, pre, post, console)
    room = max(0, width - sum(inner + 2 * pad for inner in widths))
    extend = row_style + component + Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})
    segments.append(Segment(" " * room, extend))
    return Strip(segments)


def mark_cut(strip: Strip, full: Strip, widths: Sequence[int], scroll_x: int, shown: int) -> Strip:
    """``strip`` (a line of ``full`` from ``scroll_x``, ``shown`` cells in view; ``widths``: the
    columns' with padding) with ``…`` in its last shown cell when the view's right edge cuts a
    cell and text of it lies beyond (left of a vertical scrollbar, which covers the rest)."""
    edge = scroll_x + shown
    if sum(widths) <= edge or shown < 2:
        return strip
    start = 0
    for cell_width in widths:  # the cell the edge cuts
        if start + cell_width > edge:
            break
        start += cell_width
    else:
        return strip
    if not full.crop(edge, start + cell_width).text.strip():
        return strip  # only the cell's padding (or blanks) is beyond: nothing is hidden
    last = list(strip.crop(shown - 1, shown))
    style = last[0].style if last else None
    return Strip([*strip.crop(0, shown - 1), Segment("…", style), *strip.crop(shown, strip.cell_length)],
                 strip.cell_length)
