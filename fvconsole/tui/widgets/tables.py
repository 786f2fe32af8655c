"""The console's tables: ``FastTable`` (vim keys, sorting, columns fitted to the width, plain
cells, drawn fast) and ``ListingTable``, the base of a view's listing (filter, sort, refill,
the cursor kept on its row)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import var
from textual.widgets.data_table import ColumnKey, RowKey

from fvconsole.tui import state
from fvconsole.tui.plain import (
    table_cell,
)
from fvconsole.tui.widgets.strip_table import StripTable

_T = TypeVar("_T")


#: Sort markers drawn after the sorted column's label.
ASCENDING, DESCENDING = " ▲", " ▼"


class FastTable(StripTable):
    """A table that stays responsive with thousands of rows, shows data as plain text,
    moves with the keys people know (j/k, g/G, Home/End) and sorts by any column.

    Every cell goes through ``plain.table_cell``, so an id such as ``[/]s52`` is shown as written
    and a control character escaped.

    Sorting: the view owns the rows (it rebuilds the table from memory on every filter), so
    the table only keeps *which* column sorts and which way, and posts ``Sorted`` when that
    changes; the view orders its rows with :meth:`ordered` and refills. Click a header, or
    press ``<``/``>`` (htop) to move the sort column, ``s`` for size (largest first, as ncdu)
    and ``n`` for the first column; the same choice again reverses it.

    How it draws (rows as ``Strip`` s on Textual's public API, every cell fitted, a cut
    marked) is :class:`StripTable`'s, in ``tui/widgets/strip_table.py``.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "cursor_up", "Up", show=False, tooltip="move the cursor up (also ↑)"),
        Binding("j", "cursor_down", "Down", show=False, tooltip="move the cursor down (also ↓)"),
        Binding("home,g", "scroll_top", "First row", show=False, tooltip="first row"),
        Binding("end,G", "scroll_bottom", "Last row", show=False, tooltip="last row"),
        Binding("less_than_sign", "sort_step(-1)", "Sort ◀", show=False,
                tooltip="sort by the next column to the left (htop); a click on a header sorts by that column"),
        Binding("greater_than_sign", "sort_step(1)", "Sort ▶", show=False,
                tooltip="sort by the next column to the right"),
        Binding("s", "sort_size", "Sort by size", show=False,
                tooltip="sort by size, largest first (ncdu); again: smallest first"),
        Binding("n", "sort_name", "Sort by name", show=False,
                tooltip="sort by the first column (step, key, rank, node); again: reverse"),
    ]

    @dataclass
    class Sorted(Message):
        """The sort column or direction changed: the owner reorders and refills."""

        table: FastTable

        @property
        def control(self) -> FastTable:
            return self.table

    def __init__(self, *args: Any, sortable: Iterable[str] = (), descending_first: Iterable[str] = ("size",),
                 flex: str | None = None, shrink: dict[str, int] | None = None, optional: Iterable[str] = (),
                 **kwargs: Any) -> None:
        """``flex``: the column that takes the width the others leave (a path, an id).
        ``shrink``: columns that may narrow to the given width when the table does not fit
        (their cells then end with ``…``, see :class:`FittedCell`). ``optional``: columns
        left out, in this order, when even that does not fit (the detail pane has them)."""
        super().__init__(*args, **kwargs)
        self.sortable = tuple(sortable)
        self._descending_first = frozenset(descending_first)
        self.sort_column: str | None = None
        self.sort_reverse = False
        self._labels: dict[str, Text] = {}
        self._flex = flex
        self._shrink = dict(shrink or {})
        self._optional = tuple(optional)
        self._specs: list[tuple[Any, str, int | None]] = []  # every column the view added, shown or not
        self._hidden: frozenset[str] = frozenset()
        self._fitting = False

    def add_column(self, label: Any, *, width: int | None = None, key: str | None = None,
                   default: Any = None) -> ColumnKey:
        if not self._fitting:
            self._specs.append((label, key or str(label), width))
        column = super().add_column(label, width=width, key=key, default=table_cell(default))
        self._labels[column.value] = Text(label) if isinstance(label, str) else label
        if not self._fitting:
            self.call_after_refresh(self.fit_columns)
        return column

    def clear(self, columns: bool = False) -> FastTable:
        if columns:
            self._labels.clear()
            if not self._fitting:
                self._specs.clear()
        super().clear(columns=columns)
        return self

    def add_row(self, *cells: Any, key: str | None = None) -> RowKey:
        if self._hidden and len(cells) == len(self._specs):
            cells = tuple(c for c, (_l, k, _w) in zip(cells, self._specs, strict=True) if k not in self._hidden)
        return super().add_row(*(table_cell(cell) for cell in cells), key=key)

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: Any) -> None:
        if str(getattr(column_key, "value", column_key)) in self._hidden:
            return
        super().update_cell(row_key, column_key, table_cell(value))

    # ------------------------------------------------------------ width

    def on_resize(self) -> None:
        self.fit_columns()

    def fit_columns(self) -> None:
        """Fit the columns to the table's width: optional ones out first, then shrinkable ones
        narrower, then the flex column gets what is left. A table never scrolls sideways to
        hide a cell's end without a mark."""
        room = self.scrollable_content_region.width
        if not self._specs or room <= 0:
            return
        pad = 2 * self.cell_padding
        widths = {key: (width or cell_len(str(label))) for label, key, width in self._specs}
        hidden: set[str] = set()

        def total() -> int:
            return sum(w + pad for k, w in widths.items() if k not in hidden)

        for key in self._optional:
            if total() <= room:
                break
            hidden.add(key)
        for key, least in self._shrink.items():
            if total() > room and key in widths:
                widths[key] = max(least, widths[key] - (total() - room))
        if self._flex in widths and total() != room:
            # What is left, or, when even the narrowest columns do not fit, narrower than its
            # least: its cells then end with a visible "…" instead of running off the edge.
            widths[self._flex] = max(1, widths[self._flex] + room - total())
        if frozenset(hidden) != self._hidden:
            self._hidden = frozenset(hidden)
            self._fitting = True
            try:
                self.clear(columns=True)
                for label, key, _width in self._specs:
                    if key not in hidden:
                        self.add_column(label, key=key, width=widths[key])
            finally:
                self._fitting = False
            self._mark_sorted()
            self.post_message(self.Sorted(self))  # the owner refills its rows
            return
        changed = False
        for key, column in self.columns.items():
            if key.value in widths and column.width != widths[key.value]:
                column.width = widths[key.value]
                changed = True
        if changed:
            self.columns_changed()

    # ------------------------------------------------------------ sorting

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort by ``column``; without ``reverse``, the same column again flips the direction."""
        if column not in self.sortable:
            self.notify(f"this table does not sort by {column}", severity="warning", timeout=3)
            return
        if reverse is None:
            reverse = (not self.sort_reverse) if column == self.sort_column else column in self._descending_first
        self.sort_column, self.sort_reverse = column, reverse
        self._mark_sorted()
        self.post_message(self.Sorted(self))

    def ordered(self, items: Iterable[_T], keys: dict[str, Callable[[_T], Any]]) -> list[_T]:
        """``items`` in this table's sort order (their own order when no column sorts)."""
        items = list(items)
        key = keys.get(self.sort_column) if self.sort_column else None
        if key is None:
            return items
        return sorted(items, key=lambda item: _sortable(key(item)), reverse=self.sort_reverse)

    def _mark_sorted(self) -> None:
        for key, column in self.columns.items():
            label = self._labels.get(key.value)
            if label is None:
                continue
            if key.value == self.sort_column:
                column.label = label + Text(DESCENDING if self.sort_reverse else ASCENDING, style="bold")
            else:
                column.label = label.copy()
        self.columns_changed()

    def on_strip_table_header_selected(self, event: StripTable.HeaderSelected) -> None:
        event.stop()
        if event.column_key.value is not None:
            self.sort_by(event.column_key.value)

    def action_sort_step(self, step: int) -> None:
        if not self.sortable:
            return
        if self.sort_column not in self.sortable:
            self.sort_by(self.sortable[0 if step > 0 else -1])
            return
        index = (self.sortable.index(self.sort_column) + step) % len(self.sortable)
        self.sort_by(self.sortable[index])

    def action_sort_size(self) -> None:
        self.sort_by("size")

    def action_sort_name(self) -> None:
        if self.sortable:
            self.sort_by(self.sortable[0])


class ListingTable(FastTable, Generic[_T]):
    """A view's listing, filled from memory: the columns of ``COLUMNS`` (label, key, width),
    sorted by ``SORT_KEYS``, filtered by ``filter_text``; across refills the cursor stays on its
    row (``selected``: the row key under it), and ``shown`` holds the items the filter lets
    through, in the table's order.

    A subclass (``CacheTable``, ``CheckpointTable``, ``HistoryTable``) holds its items in a
    reactive of its own, bound to its view's state, whose watcher calls :meth:`refill`; it
    says, per item, its row key, its cells and the text the filter matches.
    """

    COLUMNS: ClassVar[Sequence[tuple[str, str, int]]] = ()
    SORT_KEYS: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    filter_text: var[str] = var("", init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True,
                         sortable=[key for _label, key, _width in self.COLUMNS if key in self.SORT_KEYS], **kwargs)
        self.shown: list[_T] = []
        self.selected: str | None = None

    def on_mount(self) -> None:
        for label, key, width in self.COLUMNS:
            self.add_column(label, key=key, width=width)

    def watch_filter_text(self) -> None:
        self.refill()

    def on_fast_table_sorted(self) -> None:
        self.refill()  # and on to the view, which says the order

    def on_strip_table_row_highlighted(self, event: StripTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            self.selected = event.row_key.value

    # ------------------------------------------------------------ what a subclass says

    def items(self) -> Iterable[_T]:
        """Every item, shown or not, in their own order."""
        raise NotImplementedError

    def row_key(self, item: _T) -> str:
        raise NotImplementedError

    def cells(self, item: _T, now: float) -> Sequence[Any]:
        """The item's cells, one per column (``now``: one clock for every age of a refill)."""
        raise NotImplementedError

    def haystack(self, item: _T) -> str:
        """What the filter looks in (lower case)."""
        raise NotImplementedError

    # ------------------------------------------------------------ refill

    def refill(self) -> None:
        """Rebuild the rows from the items: sorted, filtered, the cursor kept on its row."""
        previous = self.selected
        self.clear()
        text, now = self.filter_text, state.now()
        self.shown = [i for i in self.ordered(self.items(), self.SORT_KEYS) if not text or text in self.haystack(i)]
        for item in self.shown:
            self.add_row(*self.cells(item, now), key=self.row_key(item))
        if previous is not None and previous in self.rows:
            self.move_cursor(row=self.get_row_index(previous))
        elif not self.shown:
            self.selected = None


def _sortable(value: Any) -> tuple[int, Any]:
    """Sort key that never compares None with numbers: missing values go last (first when reversed)."""
    if value is None:
        return (1, 0)
    return (0, value)
