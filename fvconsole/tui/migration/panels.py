"""The migration view's panels below the form, each drawn from the view's reactive state:
the verdict (banner), the receipt, the per-rank table, and the scroll that keeps the verdict
in sight. ``Stage`` is the one value that says which of them the view shows.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.reactive import var
from textual.widget import Widget

from fvconsole.tui.migration import text as mt
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.statics import BoundStatic, OneLine, PathsLine, PlainStatic
from fvconsole.tui.widgets.tables import FastTable


class Stage(Enum):
    """Where a migration is: the one reactive value that shows and hides the view's panels."""

    EDITING = "editing"  # the form alone: nothing previewed yet, or the form changed since
    REFUSED = "refused"  # a preview without a plan: the banner says why
    PLANNED = "planned"  # a plan: summary and ranks; Execute enabled (unless read-only)
    WRITTEN = "written"  # the plan was executed: the receipt panel
    FOUND = "found"  # the last migration, from its receipt (after a restart): the receipt panel

    @property
    def previewed(self) -> bool:
        """A preview is on screen (an edit of the form makes it stale)."""
        return self in (Stage.REFUSED, Stage.PLANNED)

    @property
    def receipt(self) -> bool:
        return self in (Stage.WRITTEN, Stage.FOUND)


#: The banner before anything happened.
HINT = "Select a legacy checkpoint in view 1 and press m, or fill the form; then Preview (ctrl+r)."

#: The receipt panel's parts: title, receipt path, head, export line, note (``migration_text``).
ReceiptParts = tuple[Text, str, Text, str, Text]


class Verdict(PlainStatic):
    """The banner: what the last action found, with its kind (``ok``, ``refused`` or none) as a class."""

    verdict: var[tuple[Text, str]] = var(lambda: (PlainText(HINT, style="italic"), ""), always_update=True,
                                         init=False)

    def watch_verdict(self, verdict: tuple[Text, str]) -> None:
        text, kind = verdict
        self.set_classes(f"banner {kind}".strip())
        self.update(text)


class TableNote(BoundStatic):
    """One line under the rank table about its "next id" column (why ids are missing), shown
    only when there is something to say: one note instead of the same words in every cell."""

    def watch_text(self, text: Any) -> None:
        super().watch_text(text)
        self.display = bool(str(text))


class PinnedScroll(VerticalScroll):
    """A VerticalScroll that keeps one widget (the verdict) at the top while the panels below
    it are still filling in (next sample ids, the receipt), until the user scrolls or types.

    Scrolling once, right after an update, landed wherever the layout happened to be at that
    moment: a row or a screen off, depending on which worker finished first.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pinned: Widget | None = None

    def pin(self, widget: Widget | None) -> None:
        self.pinned = widget
        self._to_pinned()

    def watch_virtual_size(self) -> None:
        self.call_after_refresh(self._to_pinned)

    def _to_pinned(self) -> None:
        if self.pinned is not None and self.pinned.is_mounted:
            self.scroll_to_widget(self.pinned, top=True, animate=False, immediate=True)

    def on_mouse_scroll_up(self) -> None:
        self.pinned = None

    def on_mouse_scroll_down(self) -> None:
        self.pinned = None


class ReceiptPanel(Vertical):
    """The receipt of the set written (or found); its export line on one unwrapped line, so a
    mouse copy has no breaks, and the receipt's path on one line that elides its middle."""

    #: The view's stage (bound): the panel shows at ``WRITTEN`` and ``FOUND``.
    stage: var[Stage] = var(Stage.EDITING, init=False)
    receipt: var[ReceiptParts | None] = var(None, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._title = PlainStatic(id="mig-receipt-title")
        self._path = PathsLine(id="mig-receipt-path")
        self._head = PlainStatic(id="mig-receipt-text")
        self._export = OneLine(id="mig-export")
        self._note = PlainStatic(id="mig-receipt-note")

    def compose(self) -> ComposeResult:
        yield from (self._title, self._path, self._head, self._export, self._note)

    def watch_stage(self, stage: Stage) -> None:
        self.display = stage.receipt

    def watch_receipt(self, parts: ReceiptParts | None) -> None:
        if parts is None:
            return
        title, receipt, head, export, note = parts
        self._title.update(title)
        self._path.show([("receipt", receipt, "")])
        self._head.update(head)
        self._export.update(Text(export, style="bold cyan"))
        self._note.update(note)


#: One row of the rank table: the cursor's cells, then the next id.
RankRow = tuple[str, ...]


class RankTable(FastTable):
    """The plan's ranks, filtered and sorted from memory; a refill keeps the operator's place."""

    rank_rows: var[tuple[RankRow, ...]] = var((), init=False)
    filter_text: var[str] = var("", init=False)

    def on_mount(self) -> None:
        for label, key, width in mt.RANK_COLUMNS:
            self.add_column(label, key=key, width=width)

    def watch_rank_rows(self) -> None:
        self.refill()

    def watch_filter_text(self) -> None:
        self.refill()

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        event.stop()
        self.refill()

    def refill(self) -> None:
        cursor = self.cursor_row
        self.clear()
        keys = {key: mt.rank_sort_key(i) for i, (_l, key, _w) in enumerate(mt.RANK_COLUMNS)}
        rows = self.ordered(self.rank_rows, keys)
        text = self.filter_text
        if text:
            rows = [row for row in rows if any(text == cell or text in cell for cell in row)]
        self.add_rows(rows)
        if 0 < cursor < len(rows):  # a refill (the ids arrived) keeps the operator's place
            self.move_cursor(row=cursor)

