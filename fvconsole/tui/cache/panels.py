"""The shard cache view's widgets that hold state: the entry table (entries, marks and filter as
reactive attributes; it refills itself) and the eviction report under it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import var

from fvconsole.core.cache import CONSOLE, CacheEntry
from fvconsole.tui import state
from fvconsole.tui.cache.text import MARK, age_cell, status_cell
from fvconsole.tui.widgets.statics import PlainStatic
from fvconsole.tui.widgets.tables import ListingTable

#: The mark, then the listing's columns that the console shows (core/cache/columns.py: header, key, width).
COLUMNS = ((" ", "mark", 1), *((c.header.lower(), c.key, c.width) for c in CONSOLE))
#: The console's own cells, by column key (the status coloured, the age "ago"); the others are the listing's.
CELLS: dict[str, Any] = {"status": lambda entry, _now: status_cell(entry), "age": age_cell}


class CacheTable(ListingTable[CacheEntry]):
    """Cache entries, least recently used first (or by a column), marked ones with ``●``.

    The view sets ``entries`` (a scan), ``marked`` and ``filter_text``; the table refills from
    them and keeps the cursor on the entry it was on. ``shown`` is what the filter let through,
    ``selected`` the key under the cursor.
    """

    entries: var[tuple[CacheEntry, ...]] = var((), always_update=True, init=False)
    marked: var[frozenset[str]] = var(frozenset(), init=False)

    COLUMNS = COLUMNS
    SORT_KEYS: ClassVar[dict[str, Any]] = {c.key: c.order for c in CONSOLE}

    def watch_entries(self) -> None:
        self.refill()

    def watch_marked(self, old: frozenset[str], new: frozenset[str]) -> None:
        for key in old ^ new:
            if key in self.rows:
                self.update_cell(key, "mark", MARK if key in new else "")

    def items(self) -> tuple[CacheEntry, ...]:
        return self.entries

    def row_key(self, entry: CacheEntry) -> str:
        return entry.key

    def cells(self, entry: CacheEntry, now: float) -> list[Any]:
        return [MARK if entry.key in self.marked else "", *(CELLS.get(c.key, c.cell)(entry, now) for c in CONSOLE)]

    def haystack(self, entry: CacheEntry) -> str:
        return f"{entry.key} {entry.status}".lower()

    def key_under_cursor(self) -> str | None:
        if self.row_count == 0:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def tick_ages(self) -> None:
        """Ages move on: recompute the age cells of the rows on screen."""
        now = state.now()
        top = int(self.scroll_offset.y)
        for entry in self.shown[max(top - 1, 0): top + self.size.height + 1]:
            if entry.key in self.rows:
                self.update_cell(entry.key, "age", age_cell(entry, now))


class EvictionReport(VerticalScroll):
    """What the last eviction did, under the table; hidden until there is one."""

    report: var[Text | None] = var(None, always_update=True, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._text = PlainStatic(id="cache-result")

    def compose(self) -> ComposeResult:
        yield self._text

    def watch_report(self, report: Text | None) -> None:
        self._text.update(report or "")
        self.display = report is not None
