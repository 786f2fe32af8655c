"""Every use of Textual's private API in the console, in one module behind a small interface.

Why there is any: the console's tables are Textual's ``DataTable``, and drawing a page of rows
not drawn before (``pagedown`` on the 4096-rank plan or the 2,000-entry cache) took 50-66 ms
through its public API, over the 50 ms target; reaching into its drawing got it to 26-30 ms
(issue 29, docs/performance.md). A public route (a ``ScrollView`` drawing ``Strip`` s in
``render_line``, as Toolong's log view does) draws a page faster still, but it means writing
the table again (cursor, hover, header clicks and their messages, fixed rows and columns,
horizontal scrolling, the ``DataTable`` API every view and test uses), so for now the private
parts are kept, here and nowhere else (``tests/architecture/test_textual_private.py`` fails on
a private Textual name anywhere else in the package).

The interface the rest of the console uses:

- :class:`PlainRowsTable`, the base of ``FastTable``: a ``DataTable`` that draws as
  ``DataTable`` does, segment for segment, for a fraction of the work (:class:`LineCachedTable`),
  fits every cell by :class:`~fvconsole.tui.widgets.cells.FittedCell`'s rule, makes a plain
  string cell Text without the markup parser, skips measuring fixed-width one-line rows, marks
  a cell cut at the view's right edge with ``…``; and two calls: :meth:`~PlainRowsTable.widths_changed`
  after changing column widths, :meth:`~PlainRowsTable.redraw` after changing labels.
- :class:`ConsolePalette`, Textual's command palette without two races.
- The output side of Textual's Linux driver, which ``tui/terminal.py: ConsoleDriver`` bounds:
  :func:`wrap_driver_output` (the file its output thread writes to), :func:`driver_output_thread`
  and :func:`queue_output` (a put that gives up after a timeout). Why: the driver has no public
  way to watch or bound its output; a terminal that hangs up or stops reading otherwise leaves
  the console stuck in ``Queue.put`` for good (D40).

Textual is pinned ``<9`` in pyproject. ``RELIED_ON`` names each private member used here with
its parameters; ``tests/tui/test_table_drawing.py`` checks them against the installed Textual
and compares every line drawn with ``DataTable``'s own, so a Textual that changed underneath
fails those tests loudly, naming what changed, instead of drawing something else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import chain
from typing import IO, Any, TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import work
from textual._segment_tools import line_crop
from textual.color import Color
from textual.command import CommandPalette
from textual.coordinate import Coordinate
from textual.css.query import NoMatches
from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets._data_table import RowRenderables, default_cell_formatter

from fvconsole.tui.plain import MARKUP_CHARACTER
from fvconsole.tui.widgets.cells import FittedCell

#: Textual's private members this module overrides or calls, by class, with their parameters
#: (checked against the installed Textual by ``tests/tui/test_table_drawing.py``).
RELIED_ON: dict[type, dict[str, tuple[str, ...]]] = {
    DataTable: {
        "_render_line": ("self", "y", "x1", "x2", "base_style"),
        "_render_line_in_row": ("self", "row_key", "line_no", "base_style", "cursor_location", "hover_location"),
        "_get_row_style": ("self", "row_index", "base_style"),
        "_render_cell": ("self", "row_index", "column_index", "base_style", "width", "cursor", "hover"),
        "_get_styles_to_render_cell": ("self", "is_header_cell", "is_row_label_cell", "is_fixed_style_cell", "hover",
                                       "cursor", "show_cursor", "show_hover_cursor", "has_css_foreground_priority",
                                       "has_css_background_priority"),
        "_compute_row_renderables": ("self", "row_index"),
        "_get_row_renderables": ("self", "row_index"),
        "_update_dimensions": ("self", "new_rows"),
        "_get_offsets": ("self", "y"),
        "_should_highlight": ("self", "cursor", "target_cell", "type_of_cursor"),
        "_clear_caches": ("self",),
    },
    CommandPalette: {
        "_action_command_list": ("self", "action"),
        "_gather_commands": ("self", "search_value"),
    },
}
#: Textual's private attributes read here: a DataTable's (set in its ``__init__`` or properties),
#: CommandPalette's worker group, the Linux driver's output file and thread, and that thread's queue.
RELIED_ON_ATTRIBUTES: dict[type, tuple[str, ...]] = {
    LinuxDriver: ("_file", "_writer_thread"),
    WriterThread: ("_queue",),
    DataTable: ("_row_locations", "_column_locations", "_line_cache", "_row_render_cache", "_cell_render_cache",
                "_data", "_show_hover_cursor", "_update_count", "_pseudo_class_state", "_labelled_row_exists",
                "_header_row_key", "_row_label_column_width", "_total_row_height", "_require_update_dimensions",
                "_should_render_row_labels"),
    CommandPalette: ("_GATHER_COMMANDS_GROUP",),
}


class LineCachedTable(DataTable):
    """A ``DataTable`` that draws its lines as ``DataTable`` does, segment for segment, for less work.

    A ``pagedown`` shows ~40 rows not drawn before. ``DataTable`` draws each of their cells through
    Rich (``Styled(Padding(cell))`` and ``Console.render_lines``: ~0.1 ms a cell, most of the
    frame), and each line looks the widget's style up three times, walking its ancestors every
    time. A one-row move redrew every line on screen, since its line caches are keyed by where the
    cursor is. This table

    - draws a one-line cell straight to its segments (:meth:`_render_cell`);
    - looks the widget's and its components' styles up once per frame (:meth:`render_lines`);
    - keys a row's lines (row cursor) by whether the cursor is on that row, not where it is, so a
      one-row move redraws two rows.

    The methods below ``render_line`` are ``DataTable``'s own (Textual 8), with only the cache
    keys and the style look-ups changed.
    """

    #: The styles looked up during the frame being drawn (None between frames).
    _frame_styles: dict[str | None, Style] | None = None

    def _frame_style(self, component: str | None = None) -> Style:
        """The widget's Rich style (``component`` None) or a component's, once per frame."""
        memo = self._frame_styles
        if memo is not None and component in memo:
            return memo[component]
        style = self.rich_style if component is None else self.get_component_styles(component).rich_style
        if memo is not None:
            memo[component] = style
        return style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame_styles = {}
        try:
            return super().render_lines(crop)
        finally:
            self._frame_styles = None

    def _cursor_key(self, row_key: Any) -> tuple[Any, Any]:
        """What of the cursor and hover positions a row's lines depend on: with a row cursor,
        only whether each is on this row; otherwise where they are."""
        if self.cursor_type != "row":
            return self.cursor_coordinate, self.hover_coordinate
        row_index = self._row_locations.get(row_key) if row_key in self._row_locations else -1
        return self.cursor_coordinate.row == row_index, self.hover_coordinate.row == row_index

    # ------------------------------------------------------------ DataTable's, re-keyed

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        fixed_rows_height = sum(self.get_row_height(self._row_locations.get_key(row_index))
                                for row_index in range(self.fixed_rows))
        if self.show_header:
            fixed_rows_height += self.get_row_height(self._header_row_key)
        if y >= fixed_rows_height:
            y += scroll_y
        return self._render_line(y, scroll_x, scroll_x + width, self._frame_style())

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        width = self.size.width
        try:
            row_key, y_offset_in_row = self._get_offsets(y)
        except LookupError:
            return Strip.blank(width, base_style)
        cache_key = (y, x1, x2, width, *self._cursor_key(row_key), base_style, self.cursor_type,
                     self._show_hover_cursor, self._update_count, self._pseudo_class_state)
        strip = self._line_cache.get(cache_key)
        if strip is not None:
            return strip
        fixed, scrollable = self._render_line_in_row(row_key, y_offset_in_row, base_style,
                                                     cursor_location=self.cursor_coordinate,
                                                     hover_location=self.hover_coordinate)
        fixed_width = sum(column.get_render_width(self) for column in self.ordered_columns[: self.fixed_columns])
        fixed_line: list[Segment] = list(chain.from_iterable(fixed)) if fixed else []
        scrollable_line: list[Segment] = list(chain.from_iterable(scrollable))
        segments = fixed_line + line_crop(scrollable_line, x1 + fixed_width, x2, width)
        length = Segment.get_line_length(segments)
        if length > width:
            strip = Strip(segments).adjust_cell_length(width, base_style).simplify()
        else:  # DataTable's adjust_cell_length and simplify, making one Strip instead of three
            if length < width:
                segments.append(Segment(" " * (width - length), base_style))
            strip = Strip(Segment.simplify(segments), width)
        self._line_cache[cache_key] = strip
        return strip

    def _render_line_in_row(self, row_key: Any, line_no: int, base_style: Style, cursor_location: Coordinate,
                            hover_location: Coordinate) -> tuple[Any, Any]:
        cursor_type = self.cursor_type
        cache_key = (row_key, line_no, base_style, *self._cursor_key(row_key), cursor_type, self.show_cursor,
                     self._show_hover_cursor, self._update_count, self._pseudo_class_state)
        cached = self._row_render_cache.get(cache_key)
        if cached is not None:
            return cached
        should_highlight = self._should_highlight
        render_cell = self._render_cell
        row_index = self._row_locations.get(row_key) if row_key in self._row_locations else -1
        ordered_columns = self.ordered_columns
        fixed_row = []
        if self._labelled_row_exists and self.show_row_labels:
            cell_location = Coordinate(row_index, -1)
            fixed_row.append(render_cell(row_index, -1, self._frame_style("datatable--header"),
                                         width=self._row_label_column_width,
                                         cursor=should_highlight(cursor_location, cell_location, cursor_type),
                                         hover=should_highlight(hover_location, cell_location, cursor_type))[line_no])
        if self.fixed_columns:
            if row_key is self._header_row_key:
                fixed_style = self._frame_style("datatable--header")
            else:
                fixed_style = self._frame_style("datatable--fixed") + Style.from_meta({"fixed": True})
            for column_index, column in enumerate(ordered_columns[: self.fixed_columns]):
                cell_location = Coordinate(row_index, column_index)
                fixed_row.append(render_cell(row_index, column_index, fixed_style, column.get_render_width(self),
                                             cursor=should_highlight(cursor_location, cell_location, cursor_type),
                                             hover=should_highlight(hover_location, cell_location,
                                                                    cursor_type))[line_no])
        row_style = self._get_row_style(row_index, base_style)
        scrollable_row = []
        for column_index, column in enumerate(ordered_columns):
            cell_location = Coordinate(row_index, column_index)
            scrollable_row.append(render_cell(row_index, column_index, row_style, column.get_render_width(self),
                                              cursor=should_highlight(cursor_location, cell_location, cursor_type),
                                              hover=should_highlight(hover_location, cell_location,
                                                                     cursor_type))[line_no])
        # Extending the styling out horizontally to fill the container
        table_width = (sum(column.get_render_width(self) for column in ordered_columns[self.fixed_columns:])
                       + self._row_label_column_width)
        remaining_space = max(0, self.size.width - table_width)
        if cursor_type == "row":
            extend_style, _ = self._get_styles_to_render_cell(
                row_index == -1, False, False,
                should_highlight(hover_location, Coordinate(row_index or 0, 0), cursor_type),
                row_index == cursor_location.row, self.show_cursor, self._show_hover_cursor, False, False)
            extend_style = row_style + extend_style
        elif row_style.bgcolor is not None:
            faded = Color.from_rich_color(row_style.bgcolor).blend(self.background_colors[1], factor=0.25)
            extend_style = Style.from_color(color=row_style.color, bgcolor=faded.rich_color)
        else:
            extend_style = Style.from_color(row_style.color, row_style.bgcolor)
        extend_style += Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})
        scrollable_row.append([Segment(" " * remaining_space, extend_style)])
        row_pair = (fixed_row, scrollable_row)
        self._row_render_cache[cache_key] = row_pair
        return row_pair

    def _get_row_style(self, row_index: int, base_style: Style) -> Style:
        if row_index == -1:
            return self._frame_style("datatable--header")
        if row_index < self.fixed_rows:
            return self._frame_style("datatable--fixed")
        if self.zebra_stripes:
            return self._frame_style("datatable--odd-row" if row_index % 2 else "datatable--even-row")
        return base_style

    # ------------------------------------------------------------ cells

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> Any:
        """A one-line body cell drawn straight to its segments: those ``Styled(Padding(cell))``
        gives through Rich's ``render_lines`` (pad, the text's segments, fill, pad; each styled
        base + meta + cursor component, then the post style). Anything else: DataTable's way."""
        if row_index < self.fixed_rows or column_index < self.fixed_columns:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        key = (row_key, self._column_locations.get_key(column_index), base_style, cursor, hover,
               self._show_hover_cursor, self._update_count, self._pseudo_class_state)
        lines = self._cell_render_cache.get(key)
        if lines is not None:
            return lines
        pad = self.cell_padding
        inner = width - 2 * pad
        row = self.rows.get(row_key)
        cell = self._get_row_renderables(row_index).cells[column_index] if row is not None else None
        text = cell.fitted(inner) if isinstance(cell, FittedCell) and row.height == 1 and inner > 0 else None
        if (not isinstance(text, Text) or text.justify not in (None, "default") or "\n" in text.plain
                or "\t" in text.plain or text.cell_len > inner):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        component, post = self._get_styles_to_render_cell(
            False, False, False, hover, cursor, self.show_cursor, self._show_hover_cursor,
            self.cursor_foreground_priority == "css", self.cursor_background_priority == "css")
        pre = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component
        if text.spans:
            line = [Segment(part, pre + style if style else pre) for part, style, _c in text.render(self.app.console)]
        elif text.style:
            line = [Segment(text.plain, pre + self.app.console.get_style(text.style))]
        else:
            line = [Segment(text.plain, pre)]
        fill = inner - text.cell_len
        if fill:
            line.append(Segment(" " * fill, pre))
        if pad:
            line = [Segment(" " * pad, pre), *line, Segment(" " * pad, pre)]
        if post:
            line = [Segment(part, style + post) for part, style, _c in line]
        lines = [line]
        self._cell_render_cache[key] = lines
        return lines


class PlainRowsTable(LineCachedTable):
    """``FastTable``'s base: every cell fitted and plain, rows of fixed width never measured, a
    cell cut at the view's edge marked (see the module's doc for why each is private)."""

    #: Mark a cell that the view's right edge cuts with ``…`` (a table wider than its view).
    mark_cut_edge = True

    def widths_changed(self) -> None:
        """Column widths were changed in place: measure the table again and redraw it."""
        self._require_update_dimensions = True
        self.redraw()

    def redraw(self) -> None:
        """Something every line shows changed (a header's label): draw every line again."""
        self._clear_caches()
        self.refresh()

    def _compute_row_renderables(self, row_index: int) -> Any:
        """Every cell (header included) drawn by the one fit rule (:class:`FittedCell`).

        A string cell is plain already (``plain.table_cell`` keeps a string only without a
        markup character), so in a one-line row it becomes Text as it is: DataTable would
        run it through Rich's markup parser (a tenth of drawing a page of new rows)."""
        row_key = self._row_locations.get_key(row_index) if row_index >= 0 else None
        meta = self.rows.get(row_key) if row_key is not None else None
        if meta is None or meta.height != 1 or self._should_render_row_labels:
            row = super()._compute_row_renderables(row_index)
            return type(row)(row.label, [FittedCell(cell) for cell in row.cells])
        values = self._data.get(row_key, {})
        return RowRenderables(None, [FittedCell(one_line_cell(values.get(column.key)))
                                     for column in self.ordered_columns])

    def render_line(self, y: int) -> Strip:
        """A line; when the table is wider than its view, a cell cut at the right edge ends with ``…``.

        A table with more columns than fit (the fleet's key × node matrix) scrolls sideways:
        the column at the edge is cut by the view, not by :class:`FittedCell`, so it gets its mark
        here, in the last column the view shows (left of a vertical scrollbar, which covers the rest).
        """
        strip = super().render_line(y)
        shown = self.scrollable_content_region.width
        scroll_x = int(self.scroll_offset.x)
        if (not self.mark_cut_edge or self.fixed_columns or self.virtual_size.width <= scroll_x + shown
                or shown < 2):
            return strip
        header = self.header_height if self.show_header else 0
        try:
            row_key, offset = self._get_offsets(y if y < header else y + int(self.scroll_offset.y))
            _fixed, cells = self._render_line_in_row(row_key, offset, self._frame_style(),
                                                     cursor_location=self.cursor_coordinate,
                                                     hover_location=self.hover_coordinate)
        except LookupError:
            return strip
        edge = scroll_x + shown
        start = 0
        for cell in cells:  # the cell the edge cuts, and whether text of it lies beyond the edge
            cell_width = sum(segment.cell_length for segment in cell)
            if start + cell_width > edge:
                break
            start += cell_width
        else:
            return strip
        if not Strip(cell).crop(edge - start, cell_width).text.strip():
            return strip  # only the cell's padding (or blanks) is beyond: nothing is hidden
        last = list(strip.crop(shown - 1, shown))
        style = last[0].style if last else None
        return Strip([*strip.crop(0, shown - 1), Segment("…", style), *strip.crop(shown, strip.cell_length)],
                     strip.cell_length)

    def _update_dimensions(self, new_rows: Any) -> None:
        """DataTable measures every cell of every new row on idle (4096 ranks × 7 columns took
        over a second on the event loop). With fixed column widths and one-line rows there is
        nothing to measure: only the virtual size is recomputed; otherwise DataTable's way."""
        new_rows = list(new_rows)
        if any(c.auto_width for c in self.columns.values()) or any(
            row.auto_height or row.label is not None for key in new_rows if (row := self.rows.get(key)) is not None
        ):
            super()._update_dimensions(new_rows)
            return
        width = sum(c.get_render_width(self) for c in self.columns.values()) + self._row_label_column_width
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)


def one_line_cell(value: Any) -> Any:
    """What DataTable's ``default_cell_formatter`` makes of a one-line row's cell, without its
    markup parse for a string that has no markup character (``plain.table_cell``'s)."""
    if isinstance(value, str) and not MARKUP_CHARACTER.search(value):
        return Text(value, no_wrap=True, end="")
    if value is None:
        return Text(no_wrap=True, end="")
    return default_cell_formatter(value, wrap=False, height=1) or Text(no_wrap=True, end="")


class ConsolePalette(CommandPalette):
    """Textual's command palette, minus a race: PgUp/PgDn typed before its list has been laid
    out looked up a line that does not exist yet (KeyError from OptionList). Then there is
    nothing to page through, so the key does nothing."""

    def _action_command_list(self, action: str) -> None:
        try:
            super()._action_command_list(action)
        except (KeyError, IndexError):
            if action not in ("page_up", "page_down"):
                raise

    @work(exclusive=True, group=CommandPalette._GATHER_COMMANDS_GROUP)
    async def _gather_commands(self, search_value: str) -> None:
        """Textual's search worker, minus a second race: a palette closed by a key typed while
        it searched has no command list left to fill (NoMatches); that search has no one to
        answer, so it ends quietly."""
        try:
            await CommandPalette._gather_commands.__wrapped__(self, search_value)
        except NoMatches:
            if self.is_attached and self.app.screen is self:
                raise


# ------------------------------------------------------------ the terminal driver's output

_Wrapped = TypeVar("_Wrapped")


def wrap_driver_output(driver: LinuxDriver, wrap: Callable[[IO[str]], _Wrapped]) -> _Wrapped:
    """Make the driver's output thread write to ``wrap(its file)``, and return that.

    Call it before application mode starts (the thread takes the file when it starts). Why
    private: Textual's output thread dies on the first failed write (EIO from a hung-up
    terminal) with a traceback, and nobody hears of it; a wrapped file reports the failure."""
    wrapped = wrap(driver._file)
    driver._file = wrapped  # type: ignore[assignment]  # a file in all the thread uses: write, flush, fileno
    return wrapped


def driver_output_thread(driver: LinuxDriver) -> threading.Thread | None:
    """The thread that writes the driver's output to the terminal (None outside application
    mode): whether it still lives tells a stuck or dead terminal from a slow one."""
    return driver._writer_thread


def queue_output(thread: threading.Thread, data: str | None, timeout: float) -> None:
    """Queue ``data`` (None: the thread's stop mark) for the output thread, waiting at most
    ``timeout`` seconds for room (``queue.Full`` then). The driver's own ``write`` waits forever,
    where no signal handler of the event loop can run."""
    assert isinstance(thread, WriterThread), thread
    thread._queue.put(data, timeout=timeout)
