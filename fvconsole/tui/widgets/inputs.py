"""Input widgets: a path field with completion that keeps a long path readable, and a checkbox
whose glyph says its state."""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.strip import Strip
from textual.suggester import Suggester
from textual.widgets import Checkbox, Input

from fvconsole.core.shared import printable
from fvconsole.tui.plain import (
    ControlPictures,
    fit_path,
)


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
