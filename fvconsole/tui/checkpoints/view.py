"""View 1: the checkpoints of a training output dir, newest first, with a detail pane.

State: ``listed`` (the rows of the last listing, a reactive the table is bound to), the marks
(the table's ``marked``) and the details read so far; the prune is ``tui/checkpoints/prune.py``'s; the wording is ``tui/checkpoints/text.py``'s, the rows
``tui/checkpoints/rows.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.reactive import var
from textual.widgets import Input

from fvconsole.core.checkpoints import CheckpointDetail, CheckpointInfo, checkpoint_detail
from fvconsole.core.formats import RunConfig
from fvconsole.core.shared import human_age
from fvconsole.tui import state
from fvconsole.tui.base import BaseView, Claim
from fvconsole.tui.checkpoints import text as ct
from fvconsole.tui.checkpoints.preflight import PreflightVerdict
from fvconsole.tui.checkpoints.prune import PruneMarks
from fvconsole.tui.checkpoints.rows import CheckpointRow, list_checkpoint_rows
from fvconsole.tui.messages import CheckpointDetailRead, CheckpointsListed, CheckpointsListFailed
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.statics import FitStatic
from fvconsole.tui.widgets.tables import FastTable, ListingTable

#: How often ages on screen are recomputed (seconds).
AGE_TICK = 5.0

#: (label, key, width): each as wide as its widest cell ("map-style", "1023.9 KiB", and "999d 23h", the
#: longest age ``human_age`` words), so nothing is cut in the table's 79 cells.
COLUMNS = (("step", "step", 7), ("complete", "complete", 8), ("kind", "kind", 10), ("loader", "loader", 9),
           ("sidecars", "sidecars", 8), ("size", "size", 11), ("age", "age", 8))


class CheckpointTable(ListingTable[CheckpointRow]):
    """The listed checkpoints, filtered and sorted from memory; the cursor stays on its checkpoint."""

    listed: var[tuple[CheckpointRow, ...]] = var((), always_update=True, init=False)
    #: Paths of the checkpoints marked for pruning (space).
    marked: var[frozenset[str]] = var(frozenset(), init=False)

    COLUMNS = COLUMNS
    SORT_KEYS: ClassVar[dict[str, Any]] = {
        "step": lambda r: r.info.step,
        "complete": lambda r: r.info.complete,
        "kind": lambda r: ("migrated" if r.migrated else r.info.kind),
        "loader": lambda r: r.run_kind.loader if r.run_kind is not None else "",
        "sidecars": lambda r: r.sidecars,
        "size": lambda r: r.info.bytes,
        "age": lambda r: -(r.mtime or 0.0),
    }

    def watch_listed(self) -> None:
        self.refill()

    def watch_marked(self) -> None:
        now = state.now()
        for row in self.shown:
            self.update_cell(row.info.path, "step", ct.row_cells(row, now, row.info.path in self.marked)[0])

    def items(self) -> tuple[CheckpointRow, ...]:
        return self.listed

    def row_key(self, row: CheckpointRow) -> str:
        return row.info.path

    def cells(self, row: CheckpointRow, now: float) -> Sequence[Any]:
        return ct.row_cells(row, now, row.info.path in self.marked)

    def haystack(self, row: CheckpointRow) -> str:
        return ct.haystack(row)

    def tick_ages(self) -> None:
        """Ages move on: recompute the age column (a handful of rows)."""
        now = state.now()
        for row in self.listed:
            if row.info.path in self.rows and row.mtime is not None:
                self.update_cell(row.info.path, "age", human_age(now - row.mtime))


class CheckpointsView(PreflightVerdict, PruneMarks, BaseView):
    """Table of checkpoints + detail (metadata, DCP keys, migration, mismatch report)."""

    TITLE = "1 Checkpoints"
    PANES: ClassVar[dict[str, str]] = {"ckpt-detail-scroll": "checkpoint detail"}
    TABLE = "ckpt-table"
    write_actions = frozenset({"prune_marked"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m,enter", "migrate", "Migrate",
                tooltip="migrate the selected checkpoint: view 2 opens with the form filled in"),
        Binding("space", "toggle_mark", "Mark", key_display="␣",
                tooltip="mark or unmark the selected checkpoint for pruning (then the next row)"),
        Binding("p", "prune_marked", "Prune marked",
                tooltip="delete the marked checkpoints: a fresh judgement (the newest complete one, one in use, the "
                        "newest resumable published set always stay), then confirm"),
        Binding("p", "refuse('prune')", "Prune marked", show=False),
        Binding("w", "preflight", "Preflight",
                tooltip="judge a resume from the selected checkpoint with the loaded config: every check, "
                        "rank ranges, the verdict and the fix, in the detail pane"),
        Binding("y", "copy_path", "Copy path", show=False,
                tooltip="copy the selected checkpoint's full path (a long one is shortened in the middle on screen)"),
    ]

    listed: var[tuple[CheckpointRow, ...]] = var((), always_update=True, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._details: dict[str, CheckpointDetail] = {}
        #: The detail pane's claim: a cursor move's summary or w's report, whichever came last (w in preflight.py);
        #: the preflight panel's: the latest listing's verdict.
        self.detail_claim, self.panel_claim = Claim(), Claim()
        self._prune_running = False
        self._banner = FitStatic(id="ckpt-banner", classes="banner")
        self._preflight_panel = FitStatic(id="ckpt-preflight")
        self._detail = FitStatic("Select a checkpoint.", id="ckpt-detail")

    def compose(self) -> ComposeResult:
        self.table = CheckpointTable(id="ckpt-table")
        yield self._banner
        yield self._preflight_panel
        yield Input(placeholder="filter checkpoints (Esc closes)", classes="view-filter")
        with Container(id="ckpt-main", classes="split"):
            yield self.table
            with VerticalScroll(id="ckpt-detail-scroll", classes="detail"):
                yield self._detail

    def on_mount(self) -> None:
        self.set_interval(AGE_TICK, self.table.tick_ages)

    # ------------------------------------------------------------ loading

    def refresh_view(self) -> None:
        st = self.app.state
        if not st.checkpoints_path:
            self._banner.update(PlainText("No checkpoints directory: press o to pick one (or pass --checkpoints / "
                                          "--config).", style="bold yellow"))
            self.listed = ()
            return
        self._banner.update(PlainText(f"loading {st.checkpoints_path} …", style="italic"))
        self._details.clear()
        self.list_checkpoints(st.checkpoints_path)
        self.preflight_run()

    @work(thread=True, exclusive=True, group="ckpt-list", exit_on_error=False)
    def list_checkpoints(self, path: str) -> None:
        with self.failures(CheckpointsListFailed):
            self.deliver(CheckpointsListed(path, list_checkpoint_rows(path)))

    def on_checkpoints_list_failed(self, message: CheckpointsListFailed) -> None:
        self.report_error(message.error)
        self._banner.update(PlainText(f"cannot list checkpoints: {message.error}", style="bold red"))
        self.listed = ()

    def on_checkpoints_listed(self, message: CheckpointsListed) -> None:
        self.listed = tuple(message.rows)
        self.app.published_sets_found([r.published for r in message.rows if r.published is not None])

    def watch_listed(self) -> None:
        self.table.listed = self.listed
        self._shown_changed()

    def apply_filter(self, text: str) -> None:
        self.table.filter_text = text
        self._shown_changed()

    def on_fast_table_sorted(self) -> None:
        self._shown_changed()

    def _shown_changed(self) -> None:
        """The table refilled: the banner counts it; an empty one says why in the detail pane."""
        shown, text = len(self.table.shown), self.table.filter_text
        if self.app.state.checkpoints_path and (self.listed or text):
            rows, path, filter_text = self.listed, self.app.state.checkpoints_path or "", self.filter_text
            self._banner.show(lambda width: ct.counts_text(rows, path, filter_text, shown, width))
        if not shown:
            self.detail_claim.take()
            self._detail.update(f"No checkpoint matches '{text}'." if text and self.listed else "No checkpoints.")

    # ------------------------------------------------------------ selection + detail

    def selected_row(self) -> CheckpointRow | None:
        return next((r for r in self.listed if r.info.path == self.table.selected), None)

    def selected_info(self) -> CheckpointInfo | None:
        row = self.selected_row()
        return row.info if row is not None else None

    def on_strip_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        row = self.selected_row()
        if event.row_key is None or row is None:
            return
        cached = self._details.get(row.info.path)
        claim = self.detail_claim.take()
        self._show_summary(row, cached)
        if cached is None:
            self.read_detail(row, self.app.state.run_config, claim)

    @work(thread=True, exclusive=True, group="ckpt-detail", exit_on_error=False)
    def read_detail(self, row: CheckpointRow, run_config: RunConfig | None, claim: int) -> None:
        with self.failures():
            self.deliver(CheckpointDetailRead(row, checkpoint_detail(row.info.path, run_config), claim))

    def on_strip_table_row_selected(self, event: FastTable.RowSelected) -> None:
        event.stop()
        self.action_migrate()

    def _show_summary(self, row: CheckpointRow, detail: CheckpointDetail | None) -> None:
        self._detail.show(lambda width: ct.summary_text(row, detail, width))

    def on_checkpoint_detail_read(self, message: CheckpointDetailRead) -> None:
        self._details[message.row.info.path] = message.detail
        if self.detail_claim.holds(message.claim):  # no newer move, w or emptied table since the read began
            self._show_summary(message.row, message.detail)

    def action_copy_path(self) -> None:
        """The selected checkpoint's full path to the clipboard (the terminal's, OSC 52), and said."""
        info = self.selected_info()
        if info is None:
            self.notify("select a checkpoint first", severity="warning")
            return
        self.app.copy_to_clipboard(info.path)
        self.notify(f"sent to the terminal's clipboard: {info.path}")

    def action_migrate(self) -> None:
        info = self.selected_info()
        if info is None:
            self.notify("select a checkpoint first", severity="warning")
            return
        self.app.open_migration(info.path, info.step)
