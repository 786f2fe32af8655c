"""Bars: the cache usage bar and the progress row of a long operation.

Progress pattern (reusable by every view)::

    progress = self._progress.start("writing …")   # on the event loop (a view keeps its ProgressRow)
    self.run_in_thread(lambda: core_op(plan, progress=progress), ...)

``ThreadProgress`` is a ``core.shared.progress.Progress`` callable: safe to call from the worker
thread, it throttles updates to whole percents and marshals them to the event loop.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import ProgressBar, Static

from fvconsole.core.shared import human_bytes
from fvconsole.tui.widgets.statics import PlainStatic


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
