"""The console's tables draw what Textual's DataTable draws, segment for segment.

``tui/widgets/textual_private.py: LineCachedTable`` draws one-line cells without Rich's render pipeline,
looks styles up once per frame and keeps a row's lines while the cursor moves elsewhere. The
oracle here is Textual's own ``DataTable`` holding the same cells: both tables sit side by side
in one app, are walked through the same cursor, hover, scroll and focus states, and every line
of the two must be the same segments (text, style, meta). The walk goes back to rows drawn
before, so a line kept from an earlier cursor position that should have changed fails too.

That drawing uses Textual's private API (the one module that may, ``tui/widgets/textual_private.py``):
``tests/tui/test_textual_internals.py`` names each private member it relies on that a newer
Textual moved, renamed or gave other parameters.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.widgets import DataTable

from fvconsole.tui.plain import table_cell
from fvconsole.tui.widgets.cells import FittedCell
from fvconsole.tui.widgets.tables import FastTable
from fvconsole.tui.widgets.textual_private import LineCachedTable

#: Every kind of cell the console stores, and a few it does not (numbers, None, tabs, newlines,
#: justified Text: those take DataTable's own path), in columns narrower than many of them.
CELLS: list[Any] = [
    "", "abc", "[/]s52", "/lustre/fsw/runs/wan-t2v-14b/output/checkpoint-300", "日本語のテキスト", "x" * 40,
    "esc \x1b[31m", Text("complete", style="green"), Text("invalid*", style="bold red"), Text("", style="green"),
    Text.assemble(("a", "red"), "b", ("ccc", "underline"), end=""), Text("right", justify="right"),
    Text("two\nlines"), Text("tab\tx"), 3.5, 12, None, Text("éñ longer than its column for sure", style="cyan"),
    Text("1023.9 GiB", style="bold", justify="default"),
]
WIDTHS = (1, 3, 8, 12, 20)


class _SameCells:
    """Cells stored and wrapped as FastTable stores them (plain, fitted), for both tables."""

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        return super().add_row(*(table_cell(c) for c in cells), **kwargs)  # type: ignore[misc]

    def _compute_row_renderables(self, row_index: int) -> Any:
        row = super()._compute_row_renderables(row_index)  # type: ignore[misc]
        return type(row)(row.label, [FittedCell(cell) for cell in row.cells])


class Oracle(_SameCells, DataTable):
    """Textual's DataTable, drawing its own way."""


class Drawn(_SameCells, LineCachedTable):
    """The console's drawing."""


class Solo(App[None]):
    """One table filling the screen, focused or not for the whole walk (a focus change clears
    DataTable's caches, which would hide a line kept when it should not be)."""

    AUTO_FOCUS = None

    def __init__(self, table: type[DataTable], focused: bool, labels: bool = False, **options: Any) -> None:
        super().__init__()
        self.table = table(**options)
        self.focus_table = focused
        self.labels = labels

    def compose(self) -> ComposeResult:
        yield self.table

    def on_mount(self) -> None:  # before the first frame (a fixed row must exist when drawn)
        table = self.table
        for i, width in enumerate(WIDTHS):
            table.add_column(f"c{i}", key=f"c{i}", width=width)
        for r in range(len(CELLS) * 3):
            table.add_row(*(CELLS[(r + 3 * k) % len(CELLS)] for k in range(len(WIDTHS))), key=f"r{r}",
                          label=f"L{r}" if self.labels and r % 3 == 0 else None)
        self.set_focus(table if self.focus_table else None)


KINDS = {
    "row cursor, zebra": dict(cursor_type="row", zebra_stripes=True),
    "cell cursor": dict(cursor_type="cell"),
    "column cursor, zebra": dict(cursor_type="column", zebra_stripes=True),
    "no cursor": dict(cursor_type="none"),
    "fixed rows and columns": dict(cursor_type="row", fixed_rows=2, fixed_columns=1),
    "cell cursor, fixed columns": dict(cursor_type="cell", fixed_columns=2),
    "no header": dict(cursor_type="row", show_header=False),
    "row labels, no padding": dict(cursor_type="row", cell_padding=0, labels=True),
}

#: (cursor row, cursor column, hover row or None, scroll x, scroll y): there and back again.
WALK = [(0, 0, None, 0, 0), (5, 2, None, 0, 3), (6, 3, 6, 4, 3), (5, 2, 9, 4, 3), (6, 3, None, 4, 3),
        (20, 1, None, 0, 10), (40, 4, 41, 9, 30), (20, 1, None, 0, 10), (21, 1, 20, 0, 10), (0, 0, None, 0, 0)]


#: A screen narrower than the columns (the walk scrolls sideways too), and one they fit in.
NARROW, WIDE = (50, 20), (80, 20)


def _lines(table: DataTable) -> list[list[Any]]:
    table._styles_cache.clear()
    return [list(strip) for strip in table.render_lines(Region(0, 0, table.size.width, table.size.height))]


async def _walk(table: type[DataTable], focused: bool, options: dict[str, Any],
                size: tuple[int, int] = NARROW) -> list[list[list[Any]]]:
    """Every line the table draws at each step of the walk."""
    app = Solo(table, focused, **options)
    drawn = []
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for row, column, hover, x, y in WALK:
            app.table.move_cursor(row=row, column=column, animate=False)
            app.table.scroll_to(x, y, animate=False, immediate=True)
            app.table._show_hover_cursor = hover is not None
            app.table.hover_coordinate = Coordinate(hover or 0, 1)
            await pilot.pause()
            assert app.table.has_focus == focused
            drawn.append(_lines(app.table))
    return drawn


def _differences(oracle: list[list[list[Any]]], drawn: list[list[list[Any]]]) -> list[str]:
    assert len(oracle) == len(drawn) == len(WALK)
    assert all(len(lines) > 10 for lines in drawn)
    return [f"step {step} {WALK[step]} line {y}:\n  oracle {a}\n  drawn  {b}"
            for step, (theirs, mine) in enumerate(zip(oracle, drawn, strict=True))
            for y, (a, b) in enumerate(zip(theirs, mine, strict=True)) if a != b]


@pytest.mark.parametrize("focused", [True, False], ids=["focused", "unfocused"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_console_draws_a_table_as_textual_does(kind: str, focused: bool) -> None:
    oracle = asyncio.run(_walk(Oracle, focused, dict(KINDS[kind])))
    drawn = asyncio.run(_walk(Drawn, focused, dict(KINDS[kind])))
    if kind not in ("no header", "row labels, no padding"):  # those fit the narrow screen
        assert drawn[0][0] != drawn[-4][0]  # the header scrolled sideways
    differences = _differences(oracle, drawn)
    assert not differences, "\n".join(differences[:3])


@pytest.mark.parametrize("kind", ["row cursor, zebra", "no header", "row labels, no padding"])
def test_fast_table_draws_its_cells_as_textual_does(kind: str) -> None:
    # FastTable itself: its cells (a string as Text without the markup parse) and its drawing,
    # where its columns fit (a table wider than its view marks the cut cell, which DataTable does not).
    oracle = asyncio.run(_walk(Oracle, True, dict(KINDS[kind]), WIDE))
    drawn = asyncio.run(_walk(FastTable, True, dict(KINDS[kind]), WIDE))
    differences = _differences(oracle, drawn)
    assert not differences, "\n".join(differences[:3])


def test_fast_table_draws_through_the_line_cached_drawing() -> None:
    assert issubclass(FastTable, LineCachedTable)
    assert FastTable.render_line is not DataTable.render_line
