"""Text widgets for data: plain (never markup, controls escaped), bound to a view's reactive,
built for the width they are drawn at, one unwrapped line, and the paths line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import HorizontalScroll
from textual.geometry import Size
from textual.reactive import var
from textual.visual import visualize
from textual.widget import Widget
from textual.widgets import Static

from fvconsole.core.shared import printable
from fvconsole.tui.plain import (
    PlainText,
    fit_path,
    plain_content,
)


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
