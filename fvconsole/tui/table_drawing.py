"""How the console's tables draw their lines: Textual's ``DataTable`` drawing, the same segments
for less work (issue 29: a page scroll of the 2,000-entry cache table took 60-70 ms).

A ``pagedown`` shows ~40 rows not drawn before. ``DataTable`` draws each of their cells through
Rich (``Styled(Padding(cell))`` and ``Console.render_lines``: ~0.1 ms a cell, most of the frame),
and each line looks the widget's style up three times, walking its ancestors every time. A
one-row move redrew every line on screen, since its line caches are keyed by where the cursor
is. :class:`LineCachedTable` draws what ``DataTable`` draws, segment for segment
(``tests/tui/test_table_drawing.py`` compares the two on every kind of cell), and

- draws a one-line cell straight to its segments (:meth:`~LineCachedTable._render_cell`);
- looks the widget's and its components' styles up once per frame
  (:meth:`~LineCachedTable.render_lines`);
- keys a row's lines (row cursor) by whether the cursor is on that row, not where it is, so a
  one-row move redraws two rows.

Relies on ``DataTable`` internals of Textual 8 (pinned <9 in pyproject): the four methods below
are its own, with only the cache keys and the style look-ups changed.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._segment_tools import line_crop
from textual.color import Color
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable

from fvconsole.tui.plain import fit_cell


class FittedCell:
    """A table cell drawn in the width its column gives it, by :func:`plain.fit_cell`'s rule.

    DataTable crops a one-line cell at the column's edge without a mark; every FastTable cell
    (headers too) is drawn through this, so a cut is always visible as ``…``. Styles are kept
    on what fits; a path elided in the middle keeps the cell's base style.
    """

    __slots__ = ("cell",)

    def __init__(self, cell: Any) -> None:
        self.cell = cell

    def fitted(self, width: int) -> Any:
        """The cell as drawn in ``width`` cells: itself when it fits (or is not one line of Text)."""
        cell = self.cell
        if not isinstance(cell, Text) or "\n" in cell.plain or cell.cell_len <= width:
            return cell
        plain = cell.plain
        fitted = fit_cell(plain, width)
        if fitted.endswith("…") and plain.startswith(fitted[:-1]):
            text = cell[: len(fitted) - 1]
            text.append("…")
        else:
            text = Text(fitted, style=cell.style, end="")
        text.no_wrap, text.end = True, ""
        return text

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield self.fitted(options.max_width)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.cell)


class LineCachedTable(DataTable):
    """A ``DataTable`` that draws its lines as ``DataTable`` does, faster (see the module's doc)."""

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

