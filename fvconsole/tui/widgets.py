"""Small reusable widgets: a path input with completion, the cache usage bar, a progress pattern.

Progress pattern (reusable by other views, e.g. the fleet view)::

    bar = self.query_one(ProgressBar)
    progress = ThreadProgress(self.app, bar)      # create on the event loop
    self.run_worker(lambda: core_op(plan, progress=progress), thread=True)

``ThreadProgress`` is a ``core.progress.Progress`` callable: safe to call from the worker
thread, it throttles updates to whole percents and marshals them to the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import Any

from rich.text import Text
from textual.containers import Horizontal
from textual.geometry import Size
from textual.suggester import Suggester
from textual.widgets import DataTable, Input, ProgressBar, Static

from fvconsole.core.humanize import human_bytes
from fvconsole.core.printable import printable
from fvconsole.tui.plain import ControlPictures, plain_content, table_cell


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
    characters are drawn as ␛ … while the value itself stays exact.
    """

    def __init__(self, value: str | None = None, placeholder: str = "path", **kwargs: Any) -> None:
        super().__init__(value=value or "", placeholder=placeholder, suggester=PathSuggester(),
                         highlighter=ControlPictures(), **kwargs)


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


class UsageBar(Static):
    """Cache size against the cap and the file system's free space, as one line."""

    DEFAULT_CSS = """
    UsageBar { height: 1; }
    """

    def show_usage(self, used: int, cap: int, fs_free: int | None, fs_total: int | None, width: int = 40) -> None:
        """Render ``used`` bytes against ``cap``; over the cap turns red."""
        frac = used / cap if cap > 0 else 1.0
        filled = min(width, round(min(frac, 1.0) * width))
        style = "bold red" if frac > 1.0 else ("yellow" if frac > 0.85 else "green")
        text = Text("cache ")
        text.append("█" * filled, style=style)
        text.append("░" * (width - filled), style="grey39")
        text.append(f" {human_bytes(used)} of {human_bytes(cap)} cap ({frac * 100:.0f}%)", style=style)
        if fs_free is not None:
            total = f" of {human_bytes(fs_total)}" if fs_total else ""
            text.append(f"   filesystem free: {human_bytes(fs_free)}{total}")
        self.update(text)


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

    def compose(self) -> Any:
        yield ProgressBar(show_eta=False)
        yield PlainStatic()  # progress messages name files

    def start(self, label: str, total: int | None = None) -> ThreadProgress:
        self.display = True
        bar = self.query_one(ProgressBar)
        bar.update(total=total, progress=0)
        text = self.query_one(PlainStatic)
        text.update(label)
        return ThreadProgress(self.app, bar, text)

    def stop(self) -> None:
        self.display = False


class FastTable(DataTable):
    """A DataTable that stays responsive with thousands of rows, and shows data as plain text.

    Textual parses string cells as markup; every cell goes through ``plain.table_cell`` so
    an id such as ``[/]s52`` is shown as written (not a crash, not a link), escapes escaped.

    DataTable measures every cell of every new row on idle (4096 ranks × 7 columns takes
    over a second on the event loop). With fixed column widths and one-line rows there is
    nothing to measure, so only the virtual size is recomputed. Relies on DataTable
    internals of Textual 8 (pinned <9 in pyproject); falls back to the full path otherwise.
    """

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        return super().add_row(*(table_cell(cell) for cell in cells), **kwargs)

    def update_cell(self, row_key: Any, column_key: Any, value: Any, **kwargs: Any) -> None:
        super().update_cell(row_key, column_key, table_cell(value), **kwargs)

    def _update_dimensions(self, new_rows: Any) -> None:
        new_rows = list(new_rows)
        if any(c.auto_width for c in self.columns.values()) or any(
            row.auto_height or row.label is not None for key in new_rows if (row := self.rows.get(key)) is not None
        ):
            super()._update_dimensions(new_rows)
            return
        width = sum(c.get_render_width(self) for c in self.columns.values()) + self._row_label_column_width
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)
