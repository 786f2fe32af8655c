"""The console's table (``tui/widgets/strip_table.py: StripTable``, a ``ScrollView`` on Textual's
public API) draws its header, rows, cursor and cut edge from the data it holds.

Every expected line below is written by hand from the data and the rules the module states:
each cell is padded by one cell on each side and fitted to its column by ``FittedCell``'s rule
(``plain.fit_cell``: a cell longer than its column keeps its start and ends with ``…``), a row
is extended to the view's width in its row's style, the cursor's row is drawn in the cursor's
colours, rows alternate between the even and odd styles, and a cell the view's right edge cuts
ends with ``…`` in the last column shown. The colours are the test app's own CSS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region

from fvconsole.tui.widgets.strip_table import StripTable

HEADER, CURSOR, EVEN, ODD, BASE, HOVER = "#0000ff", "#ff0000", "#222222", "#000000", "#000000", "#00ffff"
CSS = f"""
StripTable, StripTable:focus {{ width: 30; height: 8; background: {BASE}; color: #ffffff; background-tint: {BASE} 0%; }}
StripTable > .table--header, StripTable:focus > .table--header {{
    background: {HEADER}; color: #ffff00; text-style: bold; background-tint: {BASE} 0%; }}
StripTable > .table--cursor, StripTable:focus > .table--cursor {{ background: {CURSOR}; color: #00ff00; text-style: none; }}
StripTable > .table--even-row {{ background: {EVEN}; }}
StripTable > .table--odd-row {{ background: {ODD}; }}
StripTable > .table--hover {{ background: {HOVER}; }}
StripTable > .table--header-hover {{ background: {HOVER}; }}
"""


class One(App[None]):
    """One table; every message it posts is kept."""

    CSS = CSS
    AUTO_FOCUS = None

    def __init__(self, fill: Callable[[StripTable], None], **options: Any) -> None:
        super().__init__()
        self.fill = fill
        self.options = options
        self.said: list[tuple[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield StripTable(zebra_stripes=True, **self.options)

    def on_mount(self) -> None:
        self.fill(self.query_one(StripTable))

    def on_strip_table_row_highlighted(self, event: StripTable.RowHighlighted) -> None:
        self.said.append(("highlighted", event.cursor_row, event.row_key.value))

    def on_strip_table_row_selected(self, event: StripTable.RowSelected) -> None:
        self.said.append(("selected", event.cursor_row, event.row_key.value))

    def on_strip_table_header_selected(self, event: StripTable.HeaderSelected) -> None:
        self.said.append(("header", event.column_index, event.column_key.value))


def lines(table: StripTable) -> list[list[Segment]]:
    return [list(strip) for strip in table.render_lines(Region(0, 0, table.size.width, table.size.height))]


def text(line: list[Segment]) -> str:
    return "".join(segment.text for segment in line)


def backgrounds(line: list[Segment]) -> set[str]:
    """The background of every cell of the line."""
    return {segment.style.bgcolor.triplet.hex for segment in line if segment.text}


def run(fill: Callable[[StripTable], None], steps: Callable[[Any, StripTable], Awaitable[Any]],
        size: tuple[int, int] = (40, 10), **options: Any) -> Any:
    async def main() -> Any:
        app = One(fill, **options)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return await steps(pilot, app.query_one(StripTable))

    return asyncio.run(main())


def three_rows(table: StripTable) -> None:
    table.add_column("id", key="id", width=3)
    table.add_column("name", key="name", width=6)
    table.add_column("size-in-bytes", key="size", width=5)
    table.add_row("1", "alpha", "10", key="r0")
    table.add_row("2", "a-very-long-name", "2000", key="r1")
    table.add_row("3", Text("[b]x", style="underline"), 7, key="r2")


def test_the_header_and_the_rows_are_drawn_from_the_data() -> None:
    async def steps(pilot: Any, table: StripTable) -> list[list[Segment]]:
        return lines(table)

    drawn = run(three_rows, steps)
    assert [text(line) for line in drawn] == [
        " id   name    size… " + " " * 10,  # the header's label fitted too
        " 1    alpha   10    " + " " * 10,
        " 2    a-ver…  2000  " + " " * 10,
        " 3    [b]x    7     " + " " * 10,  # markup shown as written, a number as its digits
        *[" " * 30] * 4,
    ]
    header, first, second, third, *blank = drawn
    assert backgrounds(header) == {HEADER} and all(s.style.bold for s in header if s.text)
    assert backgrounds(first) == {CURSOR}  # the cursor's row, extension included
    assert {s.style.color.triplet.hex for s in first if s.text} == {"#00ff00"}
    assert backgrounds(second) == {ODD} and backgrounds(third) == {EVEN}
    assert [s.text for s in third if s.style.underline] == ["[b]x"]  # the cell's own style over the row's
    assert all(backgrounds(line) == {BASE} for line in blank)


def numbered(count: int) -> Callable[[StripTable], None]:
    def fill(table: StripTable) -> None:
        table.add_column("n", key="n", width=4)
        for r in range(count):
            table.add_row(str(r), key=f"r{r}")

    return fill


def test_the_cursor_moves_with_the_keys_and_the_table_says_where() -> None:
    async def steps(pilot: Any, table: StripTable) -> list[Any]:
        table.focus()
        seen = []
        for key in ("down", "pagedown", "pageup", "ctrl+end", "up", "ctrl+home", "enter"):
            await pilot.press(key)
            await pilot.pause()
            drawn = lines(table)
            cursor_lines = [y for y, line in enumerate(drawn) if backgrounds(line) == {CURSOR}]
            seen.append((key, table.cursor_row, text(drawn[1]).split()[0], cursor_lines))
        return [seen, pilot.app.said]

    seen, said = run(numbered(20), steps)
    # 8 lines: the header and 7 rows, so a page is 7 rows (DataTable's rule: the view scrolls a
    # page, the cursor moves as many rows).
    assert seen == [
        ("down", 1, "0", [2]),
        ("pagedown", 8, "7", [2]),
        ("pageup", 1, "0", [2]),
        ("ctrl+end", 19, "13", [7]),
        ("up", 18, "13", [6]),
        ("ctrl+home", 0, "0", [1]),
        ("enter", 0, "0", [1]),
    ]
    assert said == [("highlighted", 0, "r0"), ("highlighted", 1, "r1"), ("highlighted", 8, "r8"),
                    ("highlighted", 1, "r1"), ("highlighted", 19, "r19"), ("highlighted", 18, "r18"),
                    ("highlighted", 0, "r0"), ("selected", 0, "r0")]


def test_a_click_on_a_header_or_a_row() -> None:
    async def steps(pilot: Any, table: StripTable) -> list[Any]:
        await pilot.click(StripTable, offset=(8, 0))  # "name"
        await pilot.click(StripTable, offset=(2, 3))  # the third row
        await pilot.click(StripTable, offset=(25, 3))  # right of its cells: the same row again
        await pilot.pause()
        return [table.cursor_row, pilot.app.said]

    cursor, said = run(three_rows, steps)
    assert cursor == 2
    assert said == [("highlighted", 0, "r0"), ("header", 1, "name"), ("highlighted", 2, "r2"), ("selected", 2, "r2")]


def wide(table: StripTable) -> None:
    for c in range(5):
        table.add_column(f"c{c}", key=f"c{c}", width=8)
    table.add_row(*(letter * 8 for letter in "abcde"), key="r0")
    table.add_row("x", "y", "z", "", "w", key="r1")


def test_a_cell_the_view_cuts_ends_with_a_mark() -> None:
    async def steps(pilot: Any, table: StripTable) -> list[list[str]]:
        table.styles.width = 25
        await pilot.pause()
        shots = [[text(line) for line in lines(table)[:3]]]
        table.scroll_to(x=25, animate=False, immediate=True)
        await pilot.pause()
        shots.append([text(line) for line in lines(table)[:3]])
        return shots

    before, after = run(wide, steps)
    # columns 10 cells wide (8 and padding) in a 25-cell view: the edge cuts the third column
    assert before == [
        " c0       " + " c1       " + " c2  ",  # only the label's padding is beyond the edge: no mark
        " aaaaaaaa " + " bbbbbbbb " + " ccc…",
        " x        " + " y        " + " z   ",  # nothing of "z" lies beyond the edge
    ]
    # scrolled to the end (50 cells, 25 shown): the last two columns and the end of the third
    assert after == [
        "     " + " c3       " + " c4       ",
        "cccc " + " dddddddd " + " eeeeeeee ",
        "     " + " " * 10 + " w        ",
    ]


def test_a_changed_cell_is_drawn_again() -> None:
    async def steps(pilot: Any, table: StripTable) -> list[str]:
        before = text(lines(table)[2])
        table.update_cell("r1", "name", "beta")
        await pilot.pause()
        return [before, text(lines(table)[2]), table.get_row("r1"), table.get_cell_at((1, 1))]

    before, after, row, cell = run(three_rows, steps)
    assert before.startswith(" 2    a-ver…  2000")
    assert after.startswith(" 2    beta    2000")
    assert row == ["2", "beta", "2000"] and cell == "beta"


def test_the_row_under_the_mouse_is_marked_until_a_key_is_pressed() -> None:
    async def steps(pilot: Any, table: StripTable) -> list[list[set[str]]]:
        table.focus()
        shots = []
        for action in ("hover row", "hover header", "key"):
            if action == "hover row":
                await pilot.hover(StripTable, offset=(2, 2))  # the second row
            elif action == "hover header":
                await pilot.hover(StripTable, offset=(2, 0))
            else:
                await pilot.press("down")
            await pilot.pause()
            shots.append([backgrounds(line) for line in lines(table)[:4]])
        return shots

    row, header, key = run(three_rows, steps)
    assert row == [{HEADER}, {CURSOR}, {HOVER}, {EVEN}]
    assert header == [{HOVER}, {CURSOR}, {ODD}, {EVEN}]
    assert key == [{HEADER}, {EVEN}, {CURSOR}, {EVEN}]  # rows 0 and 2 even; the cursor moved to row 1
