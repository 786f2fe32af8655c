"""The console's table on Textual's public API: a ``ScrollView`` that draws its header and the
rows in view as ``Strip`` s from plain data, as Toolong's log view draws a log.

Why not Textual's ``DataTable``: a page of rows not drawn before (``pagedown`` on the 4096-rank
plan, the 2,000-entry cache) took 50-66 ms through it, over the 50 ms target, and getting it
under meant overriding its private drawing methods (issue 35 item 6). This table does what the
console uses: one-line rows with keys, columns of fixed widths, a row cursor, a header that
can be clicked, zebra stripes, sideways scrolling. A row is drawn once to a ``Strip`` (kept
while its cells, its place and the cursor on it stay the same; ``tui/widgets/strip_rows.py``
draws it, as ``DataTable`` does), then cropped to the view.

Its API is the part of ``DataTable``'s the console and its tests use, with Textual's public
``Column``, ``Row``, ``RowKey`` and ``ColumnKey`` records, and the messages ``RowHighlighted``,
``RowSelected`` and ``HeaderSelected`` (``on_strip_table_row_highlighted`` and so on).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import zip_longest
from typing import Any, ClassVar, Literal

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.reactive import Reactive, var
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets.data_table import (
    CellDoesNotExist,
    CellKey,
    Column,
    ColumnKey,
    DuplicateKey,
    Row,
    RowDoesNotExist,
    RowKey,
)

from fvconsole.tui.widgets.strip_rows import COMPONENTS, TABLE_CSS, FrameStyles, draw_row, mark_cut

CursorType = Literal["row", "none"]


class StripTable(ScrollView, can_focus=True):
    """A table of one-line rows drawn as ``Strip`` s (see the module's doc)."""

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "Top", show=False),
        Binding("ctrl+end", "scroll_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = set(COMPONENTS)
    DEFAULT_CSS = TABLE_CSS

    show_header: Reactive[bool] = Reactive(True)
    zebra_stripes: Reactive[bool] = Reactive(False)
    cursor_coordinate: Reactive[Coordinate] = Reactive(Coordinate(0, 0), repaint=False, always_update=True)
    hover_coordinate: Reactive[Coordinate] = Reactive(Coordinate(0, 0), repaint=False, always_update=True)
    #: Mark a cell that the view's right edge cuts with ``…`` (a table wider than its view).
    mark_cut_edge: var[bool] = var(True)

    class RowHighlighted(Message):
        """The cursor moved onto a row (or a first row appeared under it)."""

        def __init__(self, table: StripTable, cursor_row: int, row_key: RowKey) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row
            self.row_key = row_key

        @property
        def control(self) -> StripTable:
            return self.table

    class RowSelected(RowHighlighted):
        """Enter, or a click on the row the cursor is on."""

    class HeaderSelected(Message):
        """A click on a column's header."""

        def __init__(self, table: StripTable, column_key: ColumnKey, column_index: int, label: Text) -> None:
            super().__init__()
            self.table = table
            self.column_key = column_key
            self.column_index = column_index
            self.label = label

        @property
        def control(self) -> StripTable:
            return self.table

    def __init__(self, *, show_header: bool = True, zebra_stripes: bool = False, cursor_type: CursorType = "row",
                 cell_padding: int = 1, name: str | None = None, id: str | None = None,
                 classes: str | None = None, disabled: bool = False) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        if cursor_type not in ("row", "none"):
            raise ValueError(f"a StripTable has a row cursor or none, not {cursor_type!r}")
        self.cursor_type: CursorType = cursor_type
        self.cell_padding = max(0, cell_padding)
        self.show_cursor = True
        #: Metadata about the columns, by key, in the order they are drawn.
        self.columns: dict[ColumnKey, Column] = {}
        #: Metadata about the rows, by key, in the order they are drawn.
        self.rows: dict[RowKey, Row] = {}
        self._cells_by_row: dict[RowKey, dict[ColumnKey, Any]] = {}
        self._row_keys: list[RowKey] = []
        self._row_indexes: dict[RowKey, int] = {}
        self._row_versions: dict[RowKey, int] = {}  # bumped by update_cell: that row is drawn again
        self._layout_version = 0  # bumped by a change of the columns or of their widths and labels
        self._drawn_rows: LRUCache[tuple[Any, ...], Strip] = LRUCache(1024)
        self._frame: FrameStyles | None = None
        self._hover_shown = False  # the mouse moved last (a key hides the hover highlight)
        self._size_stale = False
        self.show_header = show_header
        self.zebra_stripes = zebra_stripes

    # ------------------------------------------------------------ reading

    @property
    def row_count(self) -> int:
        return len(self._row_keys)

    @property
    def cursor_row(self) -> int:
        return self.cursor_coordinate.row

    @property
    def hover_row(self) -> int:
        return self.hover_coordinate.row

    @property
    def ordered_columns(self) -> list[Column]:
        return list(self.columns.values())

    def is_valid_row_index(self, row_index: int) -> bool:
        return 0 <= row_index < len(self._row_keys)

    def get_row_index(self, row_key: RowKey | str) -> int:
        if row_key not in self._row_indexes:
            raise RowDoesNotExist(f"No row exists for row_key={row_key!r}")
        return self._row_indexes[row_key]  # type: ignore[index]

    def get_row(self, row_key: RowKey | str) -> list[Any]:
        """The row's cells, in column order."""
        if row_key not in self._cells_by_row:
            raise RowDoesNotExist(f"Row key {row_key!r} is not valid.")
        cells = self._cells_by_row[row_key]  # type: ignore[index]
        return [cells.get(key) for key in self.columns]

    def get_row_at(self, row_index: int) -> list[Any]:
        if not self.is_valid_row_index(row_index):
            raise RowDoesNotExist(f"Row index {row_index!r} is not valid.")
        return self.get_row(self._row_keys[row_index])

    def get_cell(self, row_key: RowKey | str, column_key: ColumnKey | str) -> Any:
        try:
            return self._cells_by_row[row_key][column_key]  # type: ignore[index]
        except KeyError:
            raise CellDoesNotExist(f"No cell exists for row_key={row_key!r}, column_key={column_key!r}.") from None

    def coordinate_to_cell_key(self, coordinate: Coordinate | tuple[int, int]) -> CellKey:
        row, column = coordinate
        if not (self.is_valid_row_index(row) and 0 <= column < len(self.columns)):
            raise CellDoesNotExist(f"No cell exists at {coordinate!r}.")
        return CellKey(self._row_keys[row], list(self.columns)[column])

    def get_cell_at(self, coordinate: Coordinate | tuple[int, int]) -> Any:
        return self.get_cell(*self.coordinate_to_cell_key(coordinate))

    # ------------------------------------------------------------ changing

    def add_column(self, label: str | Text, *, width: int | None = None, key: str | None = None,
                   default: Any = None) -> ColumnKey:
        """A column ``width`` cells wide (without padding; None: its label's width)."""
        column_key = ColumnKey(key)
        if column_key in self.columns:
            raise DuplicateKey(f"The column key {key!r} already exists.")
        text = Text(label) if isinstance(label, str) else label
        self.columns[column_key] = Column(column_key, text, text.cell_len if width is None else width,
                                          content_width=text.cell_len)
        for cells in self._cells_by_row.values():
            cells[column_key] = default
        self.columns_changed()
        return column_key

    def add_row(self, *cells: Any, key: str | None = None) -> RowKey:
        """A one-line row at the bottom."""
        row_key = RowKey(key)
        if row_key in self._row_indexes:
            raise DuplicateKey(f"The row key {row_key!r} already exists.")
        if len(cells) > len(self.columns):
            raise ValueError("More values provided than there are columns.")
        self._row_indexes[row_key] = len(self._row_keys)
        self._row_keys.append(row_key)
        self._cells_by_row[row_key] = dict(zip_longest(self.columns, cells))
        self.rows[row_key] = Row(row_key, 1)
        self._size_changed()
        if self.row_count == 1 and self.columns and self._cursor_shown:
            self._note_highlight(0)
        return row_key

    def add_rows(self, rows: Iterable[Iterable[Any]]) -> list[RowKey]:
        return [self.add_row(*row) for row in rows]

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: Any) -> None:
        """Change one cell: its row is drawn again (the column keeps its width)."""
        if row_key not in self._cells_by_row or column_key not in self.columns:
            raise CellDoesNotExist(f"No cell exists for row_key={row_key!r}, column_key={column_key!r}.")
        index = self._row_indexes[row_key]  # type: ignore[index]
        key = self._row_keys[index]
        self._cells_by_row[key][ColumnKey(column_key) if isinstance(column_key, str) else column_key] = value
        self._row_versions[key] = self._row_versions.get(key, 0) + 1
        self.refresh_row(index)

    def clear(self, columns: bool = False) -> StripTable:
        """Every row gone (and every column, with ``columns``); the cursor and the scroll back at the top."""
        self._cells_by_row.clear()
        self.rows.clear()
        self._row_keys.clear()
        self._row_indexes.clear()
        self._row_versions.clear()
        self._drawn_rows.clear()
        if columns:
            self.columns.clear()
        self._layout_version += 1
        self._size_changed()
        self.cursor_coordinate = Coordinate(0, 0)
        self.hover_coordinate = Coordinate(0, 0)
        self.refresh()
        self.scroll_x = self.scroll_y = 0
        self.scroll_target_x = self.scroll_target_y = 0
        return self

    def columns_changed(self) -> None:
        """Columns were added, or their widths or labels changed in place: draw every row again."""
        self._layout_version += 1
        self._size_changed()
        self.refresh()

    # ------------------------------------------------------------ the cursor

    @property
    def _cursor_shown(self) -> bool:
        return self.show_cursor and self.cursor_type != "none"

    def validate_cursor_coordinate(self, value: Coordinate) -> Coordinate:
        row = min(max(value.row, 0), max(self.row_count - 1, 0))
        return Coordinate(row, 0)

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        if old == new:
            return
        self.refresh_row(old.row)
        if self._cursor_shown:
            self._note_highlight(new.row)
        self._scroll_cursor_into_view()

    def watch_hover_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        if old.row != new.row:
            self.refresh_row(old.row)
            self.refresh_row(new.row)

    def watch_show_header(self) -> None:
        self.columns_changed()

    def watch_zebra_stripes(self) -> None:
        self.refresh()

    def move_cursor(self, *, row: int | None = None, animate: bool = False, scroll: bool = True) -> None:
        """Put the cursor on ``row``."""
        if scroll:
            self._scroll_cursor_into_view(animate=animate, row=row)
        self.cursor_coordinate = Coordinate(self.cursor_row if row is None else row, 0)

    def refresh_row(self, row_index: int) -> None:
        """Draw a row again (if in view)."""
        if self.is_valid_row_index(row_index) or row_index == -1:
            self.refresh_line(row_index + self._header_lines)

    def _note_highlight(self, row_index: int) -> None:
        self.refresh_row(row_index)
        if self.is_valid_row_index(row_index):
            self.post_message(self.RowHighlighted(self, row_index, self._row_keys[row_index]))

    @property
    def _header_lines(self) -> int:
        return 1 if self.show_header else 0

    def _scroll_cursor_into_view(self, animate: bool = False, row: int | None = None) -> None:
        self._sync_size()
        row = self.cursor_row if row is None else min(max(row, 0), max(self.row_count - 1, 0))
        region = Region(int(self.scroll_x), row + self._header_lines, self._table_width(), 1)
        self.scroll_to_region(region, animate=animate, spacing=Spacing(self._header_lines, 0, 0, 0), force=True)

    # ------------------------------------------------------------ size

    def _table_width(self) -> int:
        return sum(column.get_render_width(self) for column in self.columns.values())  # type: ignore[arg-type]

    def _size_changed(self) -> None:
        """The virtual size is set once after a burst of changes (a refill adds thousands of rows)."""
        if not self._size_stale:
            self._size_stale = True
            self.call_later(self._sync_size)

    def _sync_size(self) -> None:
        if self._size_stale:
            self._size_stale = False
            self.virtual_size = Size(self._table_width(), self.row_count + self._header_lines)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn_rows.clear()
        self.refresh()

    # ------------------------------------------------------------ drawing

    def render_lines(self, crop: Region) -> list[Strip]:
        self._sync_size()
        self._frame = FrameStyles(
            self.rich_style, self.get_component_styles("table--header").rich_style,
            self.get_component_styles("table--even-row").rich_style,
            self.get_component_styles("table--odd-row").rich_style,
            self.get_component_rich_style("table--cursor"), self.get_component_rich_style("table--hover"),
            self.get_component_rich_style("table--header-hover"))
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        frame = self._frame or FrameStyles(self.rich_style, *([Style()] * 6))
        width = self.size.width
        scroll_x, scroll_y = (int(v) for v in self.scroll_offset)
        header = self._header_lines
        row_index = -1 if y < header else y - header + scroll_y
        if row_index >= self.row_count:  # (the header is drawn even without columns, as DataTable draws it)
            return Strip.blank(width, frame.base)
        full = self._drawn_row(row_index, frame, width)
        strip = full.crop(scroll_x, scroll_x + width)
        if strip.cell_length < width:
            strip = Strip([*strip, Segment(" " * (width - strip.cell_length), frame.base)], width)
        strip = strip.simplify()
        if not self.mark_cut_edge:
            return strip
        widths = [column.get_render_width(self) for column in self.columns.values()]  # type: ignore[arg-type]
        return mark_cut(strip, full, widths, scroll_x, self.scrollable_content_region.width)

    def _drawn_row(self, row_index: int, frame: FrameStyles, width: int) -> Strip:
        """Row ``row_index`` (-1: the header), every column, extended to the view's width."""
        key = self._row_keys[row_index] if row_index >= 0 else None
        cursor = self._cursor_shown and row_index >= 0 and row_index == self.cursor_row
        hover = self._cursor_shown and self._hover_shown and row_index == self.hover_row
        cache_key = (key, row_index, self._row_versions.get(key, 0) if key is not None else 0, cursor, hover,
                     frame, width, self._layout_version)
        strip = self._drawn_rows.get(cache_key)
        if strip is None:
            if row_index == -1:
                row_style, cells = frame.header, [column.label for column in self.columns.values()]
            else:
                row_style = (frame.odd if row_index % 2 else frame.even) if self.zebra_stripes else frame.base
                values = self._cells_by_row[key]  # type: ignore[index]
                cells = [values.get(column_key) for column_key in self.columns]
            component = Style()
            if hover:
                component += frame.hover + (frame.header_hover if row_index == -1 else Style())
            if cursor:
                component += frame.cursor
            strip = draw_row(cells, [c.width for c in self.columns.values()], self.cell_padding, width,
                             row_index, row_style, component, self.app.console)
            self._drawn_rows[cache_key] = strip
        return strip

    # ------------------------------------------------------------ keys

    def action_cursor_up(self) -> None:
        self._hide_hover()
        if self._cursor_shown:
            self.cursor_coordinate = Coordinate(self.cursor_row - 1, 0)
        else:
            self.scroll_up()

    def action_cursor_down(self) -> None:
        self._hide_hover()
        if self._cursor_shown:
            self.cursor_coordinate = Coordinate(self.cursor_row + 1, 0)
        else:
            self.scroll_down()

    def _page_height(self) -> int:
        return self.scrollable_content_region.height - self._header_lines

    def action_page_down(self) -> None:
        """A page down: the view and the cursor move by the rows a page shows (DataTable's rule)."""
        self._hide_hover()
        height = self._page_height()
        if not self._cursor_shown:
            self.scroll_relative(y=height, animate=False, force=True)
            return
        rows = min(height + 1, self.row_count - self.cursor_row)
        self.scroll_relative(y=height, animate=False, force=True)
        self.move_cursor(row=self.cursor_row + max(rows, 1) - 1, scroll=False)

    def action_page_up(self) -> None:
        self._hide_hover()
        height = self._page_height()
        if not self._cursor_shown:
            self.scroll_relative(y=-height, animate=False)
            return
        rows = min(height + 1, self.cursor_row + 1)
        self.scroll_relative(y=-height, animate=False)
        self.move_cursor(row=self.cursor_row - rows + 1, scroll=False)

    def action_scroll_top(self) -> None:
        self._hide_hover()
        if self._cursor_shown:
            self.cursor_coordinate = Coordinate(0, 0)
        else:
            self.scroll_home(animate=False)

    def action_scroll_bottom(self) -> None:
        self._hide_hover()
        if self._cursor_shown:
            self.cursor_coordinate = Coordinate(self.row_count - 1, 0)
        else:
            self.scroll_end(animate=False)

    def action_scroll_home(self) -> None:
        self._hide_hover()
        self.scroll_x = 0

    def action_scroll_end(self) -> None:
        self._hide_hover()
        self.scroll_x = self.max_scroll_x

    def action_select_cursor(self) -> None:
        self._hide_hover()
        if self._cursor_shown and self.row_count:
            self.post_message(self.RowSelected(self, self.cursor_row, self._row_keys[self.cursor_row]))

    # ------------------------------------------------------------ mouse

    def _hide_hover(self) -> None:
        if self._hover_shown:
            self._hover_shown = False
            self.refresh_row(self.hover_row)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        meta = event.style.meta
        self._hover_shown = bool(meta)
        if meta and self._cursor_shown and "row" in meta:
            self.hover_coordinate = Coordinate(meta["row"], 0)
        self.refresh_row(self.hover_row)

    def on_leave(self) -> None:
        self._hide_hover()

    def on_click(self, event: events.Click) -> None:
        self._hover_shown = True
        meta = event.style.meta
        if "row" not in meta or "column" not in meta:
            return
        row, column = meta["row"], meta["column"]
        if row == -1:
            if not meta.get("out_of_bounds") and 0 <= column < len(self.columns):
                column_meta = self.ordered_columns[column]
                self.post_message(self.HeaderSelected(self, column_meta.key, column, column_meta.label))
        elif self._cursor_shown and self.is_valid_row_index(row):
            again = row == self.cursor_row
            self.cursor_coordinate = Coordinate(row, 0)
            if again:
                self.action_select_cursor()
            self._scroll_cursor_into_view(animate=True)
            event.stop()
