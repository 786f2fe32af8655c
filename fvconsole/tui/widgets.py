"""Reusable widgets: tables with vim keys and sorting, path inputs and labels that keep paths
readable at any width, the cache usage bar, a progress row.

Progress pattern (reusable by every view)::

    progress = self._progress.start("writing …")   # on the event loop (a view keeps its ProgressRow)
    self.run_in_thread(lambda: core_op(plan, progress=progress), ...)

``ThreadProgress`` is a ``core.shared.progress.Progress`` callable: safe to call from the worker
thread, it throttles updates to whole percents and marshals them to the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, HorizontalScroll
from textual.geometry import Size
from textual.message import Message
from textual.reactive import var
from textual.strip import Strip
from textual.suggester import Suggester
from textual.visual import visualize
from textual.widget import Widget
from textual.widgets import Checkbox, DataTable, Input, ProgressBar, Static

from fvconsole.core.shared import human_bytes, printable
from fvconsole.tui import state
from fvconsole.tui.plain import (
    ControlPictures,
    PlainText,
    fit_path,
    plain_content,
    table_cell,
)
from fvconsole.tui.textual_private import PlainRowsTable

_T = TypeVar("_T")


def complete_path(value: str, limit: int = 2000) -> str | None:
    """The first directory entry completing ``value`` (directories get a trailing slash).

    Names with control characters are never suggested: a suggestion is drawn as is.
    Runs in a thread (it lists a directory); never raises.
    """
    if not value:
        return None
    expanded = os.path.expanduser(value)
    head, tail = os.path.split(expanded)
    try:
        with os.scandir(head or ".") as it:
            names = []
            for i, entry in enumerate(it):
                if i >= limit:
                    break
                if (entry.name.startswith(tail) and (tail.startswith(".") or not entry.name.startswith("."))
                        and printable(entry.name) == entry.name):
                    names.append((entry.name, entry.is_dir()))
    except OSError:
        return None
    names.sort()
    for name, is_dir in names:
        if name == tail and not is_dir:
            continue
        suffix = name[len(tail):] + ("/" if is_dir else "")
        if suffix:
            return value + suffix
    return None


class PathSuggester(Suggester):
    """Completes file-system paths; press → (right arrow) in the input to accept."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        return await asyncio.to_thread(complete_path, value)


class PathInput(Input):
    """An Input for a path, with completion from the file system.

    Paths come from data (a run config's output dir, a checkpoint's name): their control
    characters are drawn as ␛ … while the value itself stays exact. A path longer than the
    field is drawn with its middle elided while the field is not focused, so the last
    components (``…/dataloader-state/checkpoint-300``) stay readable; focused, it is edited whole.
    """

    def __init__(self, value: str | None = None, placeholder: str = "path", **kwargs: Any) -> None:
        super().__init__(value=value or "", placeholder=placeholder, suggester=PathSuggester(),
                         highlighter=ControlPictures(), **kwargs)

    def run_worker(self, work: Any, *args: Any, **kwargs: Any) -> Any:
        """Input asks for a completion on every value change: only for a field being typed in.

        A value the console sets (a prefilled form, a restart) needs no suggestion, and a
        suggestion worker cancelled by a quit before it starts left a "coroutine was never
        awaited" warning on the terminal.
        """
        if inspect.iscoroutine(work) and (not self.has_focus or getattr(self.app, "exiting", False)):
            work.close()
            return None
        return super().run_worker(work, *args, **kwargs)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y != 0 or self.has_focus or not self.value or cell_len(self.value) <= width:
            return super().render_line(y)
        shown = Text(fit_path(self.value, width), end="")
        self.highlighter.highlight(shown)
        segments = list(self.app.console.render(shown, self.app.console_options.update_width(width + 1)))
        return Strip(segments).extend_cell_length(width + 1).apply_style(self.rich_style)


class PlainStatic(Static):
    """A Static for text built from data: a string is never markup, control characters show escaped.

    Every panel, banner and dialog body of the console that shows file names, config values,
    ids or error messages is one of these (see ``tui.plain``).
    """

    def __init__(self, content: Any = "", **kwargs: Any) -> None:
        kwargs["markup"] = False
        super().__init__(plain_content(content), **kwargs)

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        super().update(plain_content(content), layout=layout)


class BoundStatic(PlainStatic):
    """A PlainStatic whose text is a reactive attribute, so a view binds its state to it
    (``BoundStatic().data_bind(text=View.summary)``) instead of updating it by hand."""

    text: var[Any] = var(PlainText, always_update=True, init=False)

    def watch_text(self, text: Any) -> None:
        self.update(text)


class FitStatic(PlainStatic):
    """A panel whose text is built for the width it is drawn at, again at every resize.

    ``show(build)``: ``build(width)`` returns the text, fitting each path in it to ``width``
    (:func:`~fvconsole.tui.plain.fitted`), so a long path loses its middle with a ``…`` instead
    of wrapping mid-name. ``update`` shows fixed content, as a ``PlainStatic`` does.

    A new text as tall as the one shown is only repainted: the screen's layout (6-10 ms, every
    widget of the view) runs only when the height changes, so a detail pane following the
    cursor through entries of one shape costs no layout per move. ``hold``: a shorter text
    keeps the height shown (blank lines below it), for a first glimpse that the full text
    replaces a moment later. Each text is built once per width.
    """

    _build: Callable[[int], Any] | None = None
    #: (width, text) of the current ``build``: the layout asks for the height, then render draws it.
    _shown: tuple[int, Any] | None = None
    #: The height a held text is drawn at (``show(..., hold=True)``).
    _held = 0

    def show(self, build: Callable[[int], Any], *, hold: bool = False) -> None:
        width, height = self.content_size
        self._build, self._shown, self._held = build, None, height if hold else 0
        if width and height and self._height(width) == height:
            self.refresh()
        else:
            self.refresh(layout=True)

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        self._build, self._shown, self._held = None, None, 0
        super().update(content, layout=layout)

    def _built(self, width: int) -> Any:
        assert self._build is not None
        if self._shown is None or self._shown[0] != width:
            text = plain_content(self._build(max(width, 1)))
            short = self._held - visualize(self, text, markup=False).get_height(self.styles, width)
            if short > 0 and isinstance(text, Text):
                text = text.copy()
                text.append("\n" * short)
            self._shown = (width, text)
        return self._shown[1]

    def _height(self, width: int) -> int:
        return visualize(self, self._built(width), markup=False).get_height(self.styles, width)

    def render(self) -> Any:
        if self._build is None:
            return super().render()
        return self._built(self.content_size.width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The height at ``width`` (layout asks before the size changes): built for that width."""
        if self._build is None or not width:
            return super().get_content_height(container, viewport, width)
        return self._height(width)


class TickBox(Checkbox):
    """A Checkbox whose glyph says its state without colour: ``▐X▌`` ticked, ``▐ ▌`` not.

    Textual's draws the X in both states and tells them apart by colour alone, which a
    monochrome terminal, a screenshot in a ticket or a colour-blind operator does not see.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.BUTTON_INNER = "X" if self.value else " "

    def watch_value(self) -> None:
        self.BUTTON_INNER = "X" if self.value else " "
        super().watch_value()


class OneLine(HorizontalScroll):
    """One line of text that is never wrapped: wider than the screen, it scrolls sideways.

    For a line the operator copies (``export FASTVIDEO_DATALOADER_STATE_DIR=<path>``): wrapped,
    a mouse selection picked up the line breaks, and the pasted path was broken.
    """

    DEFAULT_CSS = """
    OneLine { height: auto; overflow-y: hidden; scrollbar-size-horizontal: 1; }
    OneLine > PlainStatic { width: auto; text-wrap: nowrap; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._line = PlainStatic()

    def compose(self) -> ComposeResult:
        yield self._line

    def update(self, content: Any) -> None:
        self._line.update(content)

    @property
    def text(self) -> str:
        """What the line shows (plain)."""
        rendered = self._line.render()
        return rendered.plain if isinstance(rendered, Text) else str(rendered)


#: What the paths line shows for a path that is not set.
NOT_SET = "not set (press o)"


class PathsLine(Widget):
    """``label path   label path …`` on one line; paths that do not fit lose their middle, never their end."""

    DEFAULT_CSS = "PathsLine { height: 1; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._items: list[tuple[str, str | None, str]] = []  # (label, path or None, style)
        self._suffix = Text()

    def show(self, items: Sequence[tuple[str, str | None, str]], suffix: Text | None = None) -> None:
        """``items``: (label, path — None when not set —, style of the path)."""
        self._items = list(items)
        self._suffix = suffix or Text()
        self.refresh()

    def render(self) -> Text:
        width = max(self.size.width, 20)
        labels = [cell_len(f"{label} ") + 3 for label, _path, _style in self._items]
        budget = max(width - sum(labels) - self._suffix.cell_len, 3 * len(self._items))
        paths = [printable(path) if path else NOT_SET for _label, path, _style in self._items]
        shares = path_shares(paths, budget)
        text = PlainText()
        for (label, path, style), shown, share in zip(self._items, paths, shares, strict=True):
            text.append(f"{label} ", style="bold")
            if path:
                text.append(fit_path(shown, share), style=style)
            else:  # words, not a path: never elided as one ("…set (press o)")
                text.append(NOT_SET if share >= len(NOT_SET) else NOT_SET.split(" (", 1)[0], style="yellow")
            text.append("   ")
        text.append_text(self._suffix)
        text.truncate(width)
        return text


def path_shares(paths: Sequence[str], budget: int) -> list[int]:
    """Widths for ``paths`` sharing ``budget`` cells on one line.

    Each first gets room for its last component whole (``…/shard-cache``: a name is never cut
    while another path has cells to spare), then what is left goes to them evenly, so each
    shows as much of the components before (the run's name) as the line allows.
    """
    lengths = [cell_len(p) for p in paths]
    needs = [min(n, cell_len("…/" + p.rstrip("/").rsplit("/", 1)[-1])) for p, n in zip(paths, lengths, strict=True)]
    if sum(needs) > budget:
        return _fair_shares(lengths, budget)
    extra = _fair_shares([n - need for n, need in zip(lengths, needs, strict=True)], budget - sum(needs), floor=0)
    return [need + more for need, more in zip(needs, extra, strict=True)]


def _fair_shares(lengths: Sequence[int], budget: int, floor: int = 8) -> list[int]:
    """Widths for texts of ``lengths`` within ``budget``: short ones whole, the rest share what is left."""
    shares = [0] * len(lengths)
    remaining = sorted(range(len(lengths)), key=lambda i: lengths[i])
    left = budget
    while remaining:
        fair = left // len(remaining)
        i = remaining[0]
        if lengths[i] <= fair:
            shares[i] = lengths[i]
            left -= lengths[i]
            remaining.pop(0)
            continue
        for j in remaining:
            shares[j] = max(fair, floor)
        break
    return shares


def usage_line(label: str, used: int, cap: int, width: int) -> Text:
    """``label ████░░░░ 12.0 GiB of 300.0 GiB cap (4%)`` in ``width`` cells; over the cap is red."""
    frac = used / cap if cap > 0 else 1.0
    style = "bold red" if frac > 1.0 else ("yellow" if frac > 0.85 else "green")
    tail = f" {human_bytes(used)} of {human_bytes(cap)} cap ({frac * 100:.0f}%)"
    bar = max(min(width - cell_len(label) - len(tail) - 1, 40), 10)
    filled = min(bar, round(min(frac, 1.0) * bar))
    text = Text(f"{label} ")
    text.append("█" * filled, style=style)
    text.append("░" * (bar - filled), style="grey39")
    text.append(tail, style=style)
    return text


class UsageBar(Widget):
    """Cache size against the cap and the file system's free space; optionally the size after an eviction."""

    DEFAULT_CSS = "UsageBar { height: auto; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._usage: tuple[int, int, int | None, int | None, int | None] | None = None
        self._fs_free_after: int | None = None

    def show_usage(self, used: int, cap: int, fs_free: int | None, fs_total: int | None,
                   after: int | None = None, fs_free_after: int | None = None) -> None:
        """Render ``used`` bytes against ``cap`` (and ``after`` an eviction, when given).

        ``fs_free_after``: the plan's own estimate of the free space after it (what its
        entries give back to the filesystem); without it, the cache's shrinkage is added.
        """
        self._usage = (used, cap, fs_free, fs_total, after)
        self._fs_free_after = fs_free_after
        self.refresh(layout=True)

    def clear(self) -> None:
        self._usage = None
        self.refresh(layout=True)

    def render(self) -> Text:
        if self._usage is None:
            return Text()
        used, cap, fs_free, fs_total, after = self._usage
        width = max(self.size.width, 40)
        free = ""
        if fs_free is not None:
            free = f"fs free {human_bytes(fs_free)}" + (f" of {human_bytes(fs_total)}" if fs_total else "")
        if after is not None:
            text = usage_line("cache now  ", used, cap, width)
            text.append("\n").append_text(usage_line("after evict", after, cap, width))
            if fs_free is not None:
                free_after = self._fs_free_after if self._fs_free_after is not None else fs_free + max(used - after, 0)
                total = f" of {human_bytes(fs_total)}" if fs_total else ""
                text.append(f"\nfilesystem free {human_bytes(fs_free)}{total} → about {human_bytes(free_after)}")
            return text
        one_line = usage_line("cache", used, cap, width - len(free) - 3)
        if free and one_line.cell_len + len(free) + 3 <= width:
            return one_line.append(f"   {free}")
        text = usage_line("cache", used, cap, width)
        return text.append(f"\n{free}") if free else text


class ThreadProgress:
    """A thread-safe ``Progress`` callback that drives a ProgressBar on the event loop."""

    def __init__(self, app: Any, bar: ProgressBar, label: Static | None = None) -> None:
        self._app = app
        self._bar = bar
        self._label = label
        self._lock = threading.Lock()
        self._last: tuple[int, int] = (-1, -1)

    def __call__(self, done: int, total: int, message: str) -> None:
        percent = int(done * 100 / total) if total else 0
        with self._lock:
            if (percent, total) == self._last and done != total:
                return
            self._last = (percent, total)
        with contextlib.suppress(RuntimeError):  # app shutting down: progress is best effort
            self._app.call_from_thread(self._apply, done, total, message)

    def _apply(self, done: int, total: int, message: str) -> None:
        self._bar.update(total=max(total, 1), progress=done)
        if self._label is not None:
            self._label.update(message)


class ProgressRow(Horizontal):
    """A one-line progress bar with a label, hidden until an action starts.

    ``start(label)`` shows it and returns the thread-safe ``Progress`` callback to hand to
    the core; ``stop()`` hides it again.
    """

    DEFAULT_CSS = "ProgressRow { height: 1; display: none; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._bar = ProgressBar(show_eta=False)
        self._label = PlainStatic()  # progress messages name files

    def compose(self) -> ComposeResult:
        yield self._bar
        yield self._label

    def start(self, label: str, total: int | None = None) -> ThreadProgress:
        self.display = True
        self._bar.update(total=total, progress=0)
        self._label.update(label)
        return ThreadProgress(self.app, self._bar, self._label)

    def stop(self) -> None:
        self.display = False


#: Sort markers drawn after the sorted column's label.
ASCENDING, DESCENDING = " ▲", " ▼"


class FastTable(PlainRowsTable):
    """A DataTable that stays responsive with thousands of rows, shows data as plain text,
    moves with the keys people know (j/k, g/G, Home/End) and sorts by any column.

    Textual parses string cells as markup: every cell goes through ``plain.table_cell`` so an
    id such as ``[/]s52`` is shown as written (not a crash, not a link), escapes escaped.

    Sorting: the view owns the rows (it rebuilds the table from memory on every filter), so
    the table only keeps *which* column sorts and which way, and posts ``Sorted`` when that
    changes; the view orders its rows with :meth:`ordered` and refills. Click a header, or
    press ``<``/``>`` (htop) to move the sort column, ``s`` for size (largest first, as ncdu)
    and ``n`` for the first column; the same choice again reverses it.

    How it draws (DataTable's lines for a fraction of the work; fixed-width rows never
    measured; every cell fitted, a cut marked) is :class:`PlainRowsTable`'s, in
    ``tui/textual_private.py``, the one module that uses Textual's private API.
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
                   default: Any = None) -> Any:
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

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        if self._hidden and len(cells) == len(self._specs):
            cells = tuple(c for c, (_l, key, _w) in zip(cells, self._specs, strict=True) if key not in self._hidden)
        return super().add_row(*(table_cell(cell) for cell in cells), **kwargs)

    def update_cell(self, row_key: Any, column_key: Any, value: Any, **kwargs: Any) -> None:
        if str(getattr(column_key, "value", column_key)) in self._hidden:
            return
        super().update_cell(row_key, column_key, table_cell(value), **kwargs)

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
            self.widths_changed()

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
        self.redraw()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
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

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
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
