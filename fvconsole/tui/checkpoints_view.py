"""View 1: the checkpoints of a training output dir, newest first, with a detail pane."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, VerticalScroll
from textual.widgets import DataTable, Input

from fvconsole.core.checkpoints import (
    CheckpointDetail,
    CheckpointInfo,
    RunKind,
    checkpoint_detail,
    checkpoint_run_kind,
    discover_checkpoints,
)
from fvconsole.core.formats import Mismatch, RunConfig
from fvconsole.core.migration import PublishedSet, published_for
from fvconsole.core.shared import FvError, human_age, human_bytes
from fvconsole.tui import state
from fvconsole.tui.base import BaseView
from fvconsole.tui.messages import CheckpointDetailRead, CheckpointsListed, CheckpointsListFailed
from fvconsole.tui.plain import PlainText, fitted
from fvconsole.tui.widgets import FastTable, FitStatic

#: How often ages on screen are recomputed (seconds).
AGE_TICK = 5.0


@dataclass(frozen=True)
class CheckpointRow:
    """One listed checkpoint: what discovery found, when it was saved, and its published set."""

    info: CheckpointInfo
    mtime: float | None
    published: PublishedSet | None
    published_problem: str | None = None
    #: Which loader's state a legacy checkpoint holds (None for other kinds), as `checkpoints ls` says.
    run_kind: RunKind | None = None

    @property
    def migrated(self) -> bool:
        return self.info.kind == "legacy" and self.published is not None and self.published.complete

    @property
    def sidecars(self) -> int:
        """Rank sidecars inside the checkpoint, or of the set published for it."""
        if self.info.rank_sidecars:
            return self.info.rank_sidecars
        return self.published.sidecars_present if self.published is not None else 0


def checkpoint_mtime(path: str) -> float | None:
    """When the checkpoint was saved: ``dcp/.metadata`` (written last by DCP), else the dir."""
    for candidate in (os.path.join(path, "dcp", ".metadata"), path):
        try:
            return os.stat(candidate).st_mtime
        except OSError:
            continue
    return None


def list_checkpoint_rows(path: str) -> list[CheckpointRow]:
    """Checkpoints under ``path`` with their save time and published migration (blocks: a worker's job)."""
    rows = []
    for info in discover_checkpoints(path):
        published, problem, kind = None, None, None
        if info.kind == "legacy":
            kind = info.run_kind or checkpoint_run_kind(info.path)
            try:
                published = published_for(info.path, info.step)
            except FvError as exc:
                problem = str(exc)
        rows.append(CheckpointRow(info, checkpoint_mtime(info.path), published, problem, kind))
    return rows


def render_mismatches(mismatches: tuple[Mismatch, ...] | None, limit: int = 40) -> Text:
    """The config-mismatch report: critical rows in red first, then the rest dimmed.

    Keys and values come from the run config and the checkpoint: composed as PlainText.
    """
    text = PlainText()
    if mismatches is None:
        text.append("No run config loaded: open one with `o` to compare.\n", style="italic")
        return text
    if not mismatches:
        text.append("✓ run config matches the checkpoint's embedded config\n", style="bold green")
        return text
    critical = [m for m in mismatches if m.critical]
    other = [m for m in mismatches if not m.critical]
    if critical:
        text.append(f"✗ {len(critical)} critical mismatch(es): migration will refuse\n", style="bold red")
    for m in critical:
        text.append(f"  {m.path}\n", style="bold red")
        text.append(f"    checkpoint={m.checkpoint!r}  config={m.config!r}\n", style="red")
    if other:
        text.append(f"{len(other)} other difference(s) (not critical):\n", style="yellow")
    _mismatch_lines(text, other, limit, "grey62")
    return text


def _mismatch_lines(text: Text, mismatches: list[Mismatch], limit: int, style: str, more: str = "") -> None:
    """One line per mismatch (at most ``limit``), then how many more."""
    for m in mismatches[:limit]:
        text.append(f"  {m.path}: checkpoint={m.checkpoint!r} config={m.config!r}\n", style=style)
    if len(mismatches) > limit:
        text.append(f"  … {len(mismatches) - limit} more{more}\n", style=style)


def critical_first(mismatches: tuple[Mismatch, ...] | None, limit: int = 3) -> Text:
    """The key summary the detail pane opens with: the critical mismatches, one line each.

    At 80x24 the pane shows about eight lines; the full report comes after the metadata and
    the DCP keys, a PgDn or two below. Empty when nothing is critical.
    """
    critical = [m for m in mismatches or () if m.critical]
    text = PlainText()
    if not critical:
        return text
    text.append(f"✗ {len(critical)} critical mismatch(es): migration will refuse\n", style="bold red")
    _mismatch_lines(text, critical, limit, "red", " in the report below")
    return text


#: The shell line that points FastVideo's resume at a sidecar set, before its path.
EXPORT_PREFIX = "export FASTVIDEO_DATALOADER_STATE_DIR="


def export_line(output_dir: str) -> str:
    """The one shell line that points FastVideo's resume at a sidecar set."""
    return EXPORT_PREFIX + shlex.quote(output_dir)


COLUMNS = (("step", "step", 7), ("complete", "complete", 9), ("kind", "kind", 10), ("loader", "loader", 9),
           ("sidecars", "sidecars", 9), ("size", "size", 11), ("age", "age", 6))


def loader_cell(kind: RunKind | None) -> Text | str:
    """The loader column: streaming, map-style (red: not migratable) or unknown; "-" for no legacy state."""
    if kind is None:
        return "-"
    if kind.migratable:
        return kind.loader
    return Text(kind.loader, style="bold red" if kind.loader == "map-style" else "yellow")


class CheckpointsView(BaseView):
    """Table of checkpoints + detail (metadata, DCP keys, migration, mismatch report)."""

    TITLE = "1 Checkpoints"
    PANES: ClassVar[dict[str, str]] = {"ckpt-detail-scroll": "checkpoint detail"}
    TABLE = "ckpt-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m,enter", "migrate", "Migrate",
                tooltip="migrate the selected checkpoint: view 2 opens with the form filled in"),
        Binding("y", "copy_path", "Copy path", show=False,
                tooltip="copy the selected checkpoint's full path (a long one is shortened in the middle on screen)"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rows: list[CheckpointRow] = []
        self._selected: str | None = None
        self._details: dict[str, CheckpointDetail] = {}

    def compose(self) -> ComposeResult:
        yield FitStatic(id="ckpt-banner", classes="banner")
        yield Input(placeholder="filter checkpoints (Esc closes)", classes="view-filter")
        with Container(id="ckpt-main", classes="split"):
            yield FastTable(id="ckpt-table", cursor_type="row", zebra_stripes=True,
                            sortable=[key for _label, key, _w in COLUMNS])
            with VerticalScroll(id="ckpt-detail-scroll", classes="detail"):
                yield FitStatic("Select a checkpoint.", id="ckpt-detail")

    def on_mount(self) -> None:
        table = self.query_one("#ckpt-table", FastTable)
        for label, key, width in COLUMNS:
            table.add_column(label, key=key, width=width)
        self.set_interval(AGE_TICK, self._tick_ages)

    # ------------------------------------------------------------ loading

    def refresh_view(self) -> None:
        st = self.app.state
        if not st.checkpoints_path:
            self._banner(PlainText("No checkpoints directory: press o to pick one (or pass --checkpoints / --config).",
                                   style="bold yellow"))
            self._rows = []
            self.apply_filter(self.filter_text)
            return
        self._banner(PlainText(f"loading {st.checkpoints_path} …", style="italic"))
        self._details.clear()
        self.list_checkpoints(st.checkpoints_path)

    @work(thread=True, exclusive=True, group="ckpt-list", exit_on_error=False)
    def list_checkpoints(self, path: str) -> None:
        with self.failures(CheckpointsListFailed):
            self.deliver(CheckpointsListed(path, list_checkpoint_rows(path)))

    def on_checkpoints_list_failed(self, message: CheckpointsListFailed) -> None:
        self.report_error(message.error)
        self._banner(PlainText(f"cannot list checkpoints: {message.error}", style="bold red"))
        self._rows = []
        self.apply_filter(self.filter_text)

    def on_checkpoints_listed(self, message: CheckpointsListed) -> None:
        self._rows = message.rows
        self.apply_filter(self.filter_text)
        self.app.published_sets_found([r.published for r in message.rows if r.published is not None])

    def _banner(self, text: Text) -> None:
        self.query_one("#ckpt-banner", FitStatic).update(text)

    def _show_counts(self, shown: int) -> None:
        rows, path, filter_text = self._rows, self.app.state.checkpoints_path or "", self.filter_text
        legacy = sum(1 for r in rows if r.info.kind == "legacy")
        migrated = sum(1 for r in rows if r.migrated)

        def build(width: int) -> Text:
            text = PlainText().append(fitted(path, width), style="bold")
            text.append(f"\n{len(rows)} checkpoint(s), {legacy} legacy")
            if migrated:
                text.append(f" ({migrated} migrated)", style="green")
            if filter_text:
                text.append(f" · {shown} shown (filter '{filter_text}')", style="bold" if shown else "bold yellow")
            if legacy - migrated:
                text.append(" · select one and press m to migrate", style="italic")
            return text

        self.query_one("#ckpt-banner", FitStatic).show(build)

    # ------------------------------------------------------------ table

    def _cells(self, row: CheckpointRow, now: float) -> tuple[Any, ...]:
        info = row.info
        if row.migrated:
            kind = Text("migrated", style="green")
        elif info.kind == "legacy":
            kind = Text("legacy", style="yellow")
        else:
            kind = str(info.kind)
        return (
            str(info.step),
            Text("yes", style="green") if info.complete else Text("NO", style="bold red"),
            kind,
            loader_cell(row.run_kind),
            str(row.sidecars),
            human_bytes(info.bytes) if info.size_complete else "?",
            human_age(now - row.mtime) if row.mtime is not None else "-",
        )

    SORT_KEYS: ClassVar[dict[str, Any]] = {
        "step": lambda r: r.info.step,
        "complete": lambda r: r.info.complete,
        "kind": lambda r: ("migrated" if r.migrated else r.info.kind),
        "loader": lambda r: r.run_kind.loader if r.run_kind is not None else "",
        "sidecars": lambda r: r.sidecars,
        "size": lambda r: r.info.bytes,
        "age": lambda r: -(r.mtime or 0.0),
    }

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#ckpt-table", FastTable)
        previous = self._selected
        table.clear()
        now = state.now()
        shown = []
        for row in table.ordered(self._rows, self.SORT_KEYS):
            info = row.info
            loader = row.run_kind.loader if row.run_kind is not None else ""
            haystack = (f"{info.step} {'migrated' if row.migrated else info.kind} {loader} "
                        f"{'complete' if info.complete else 'incomplete'} {info.path}")
            if text and text not in haystack.lower():
                continue
            shown.append(row)
            table.add_row(*self._cells(row, now), key=info.path)
        if self.app.state.checkpoints_path and (self._rows or text):
            self._show_counts(len(shown))
        if previous is not None and any(r.info.path == previous for r in shown):
            table.move_cursor(row=table.get_row_index(previous))
        elif not shown:
            self._selected = None
            what = f"No checkpoint matches '{text}'." if text and self._rows else "No checkpoints."
            self.query_one("#ckpt-detail", FitStatic).update(what)

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        self.apply_filter(self.filter_text)

    def _tick_ages(self) -> None:
        """Ages move on: recompute the age column (a handful of rows)."""
        table = self.query_one("#ckpt-table", FastTable)
        now = state.now()
        for row in self._rows:
            if row.info.path in table.rows and row.mtime is not None:
                table.update_cell(row.info.path, "age", human_age(now - row.mtime))

    # ------------------------------------------------------------ selection + detail

    def selected_row(self) -> CheckpointRow | None:
        return next((r for r in self._rows if r.info.path == self._selected), None)

    def selected_info(self) -> CheckpointInfo | None:
        row = self.selected_row()
        return row.info if row is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "ckpt-table" or event.row_key is None:
            return
        self._selected = event.row_key.value
        row = self.selected_row()
        if row is None:
            return
        cached = self._details.get(row.info.path)
        self._show_summary(row, cached)
        if cached is None:
            self.read_detail(row, self.app.state.run_config)

    @work(thread=True, exclusive=True, group="ckpt-detail", exit_on_error=False)
    def read_detail(self, row: CheckpointRow, run_config: RunConfig | None) -> None:
        with self.failures():
            self.deliver(CheckpointDetailRead(row, checkpoint_detail(row.info.path, run_config)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "ckpt-table":
            event.stop()
            self.action_migrate()

    def _show_summary(self, row: CheckpointRow, detail: CheckpointDetail | None) -> None:
        self.query_one("#ckpt-detail", FitStatic).show(lambda width: self._summary(row, detail, width))

    def _summary(self, row: CheckpointRow, detail: CheckpointDetail | None, width: int) -> Text:
        """The detail pane at ``width`` cells: each path on one line, shortened in the middle
        if it must be (never wrapped mid-name); ``y`` copies the checkpoint's full path."""
        info = row.info
        text = PlainText()
        text.append(f"checkpoint-{info.step}\n", style="bold")
        if detail is not None:  # what decides the migration first, visible without scrolling at 80x24
            text.append_text(critical_first(detail.mismatches))
        text.append(fitted(info.path, width) + "\n", style="grey62")
        text.append("kind ")
        text.append(info.kind, style="bold yellow" if info.kind == "legacy" else "bold")
        text.append("   complete ")
        text.append("yes" if info.complete else "NO", style="" if info.complete else "bold red")
        # The same count as the table's "sidecars" column, saying where they are.
        where = ("in the checkpoint" if info.rank_sidecars
                 else "in its migrated set" if row.published is not None else "none yet")
        text.append(f"   size {human_bytes(info.bytes) if info.size_complete else 'unknown'}\nrng states {info.rng_states}   "
                    f"sidecars {row.sidecars} ({where})\n")
        if info.metadata_step is not None and info.metadata_step != info.step:
            text.append(f"metadata.json step {info.metadata_step} differs from the directory name\n", style="bold red")
        for problem in info.problems:
            text.append(f"⚠ {problem}\n", style="yellow")
        self._migration_status(row, text, width)
        if detail is None:
            text.append("\nloading detail …", style="italic")
        else:
            self._detail_text(detail, text)
        return text

    @staticmethod
    def _migration_status(row: CheckpointRow, text: PlainText, width: int) -> None:
        published = row.published
        if row.published_problem:
            text.append(f"⚠ published set: {row.published_problem}\n", style="yellow")
        if published is not None:
            style = "bold green" if published.complete else "bold yellow"
            mark = "✓ migrated" if published.complete else "⚠ published set incomplete"
            text.append(f"{mark}: {published.sidecars_present} of {published.world_size} sidecars + receipt "
                        f"({published.created_at_utc})\n", style=style)
            text.append(fitted(published.output_dir, width) + "\n")
            text.append("resume with (view 2, y copies it):\n", style="grey62")
            # Whole, never shortened: an operator may select and paste it (a "…" in it would
            # point FastVideo at a path that does not exist).
            text.append(export_line(published.output_dir) + "\n", style="cyan")
        kind = row.run_kind
        if kind is not None and kind.loader == "map-style":
            text.append("✗ map-style loader: not migratable\n", style="bold red")
            text.append(f"{kind.why}\n")
        elif kind is not None and not kind.migratable:
            text.append(f"⚠ loader unknown: {kind.why}\n", style="yellow")
        elif kind is not None and published is None:
            text.append("Legacy: the streaming loader's state is a DCP chimera; migrate to rank-local "
                        "sidecars (m).\n", style="italic")

    @staticmethod
    def _detail_text(detail: CheckpointDetail, text: PlainText) -> None:
        text.append("\nmetadata.json: ", style="bold")
        text.append(", ".join(detail.metadata_keys) or "-")
        text.append(f"\nDCP state keys: {detail.dcp_key_count}\n", style="bold")
        for top, count in detail.dcp_key_groups:
            style = "yellow" if top == "dataloader" else ""
            text.append(f"  {top}.*  {count}\n", style=style)
        if detail.dcp_total_bytes is not None:
            text.append(f"DCP tensor bytes: {human_bytes(detail.dcp_total_bytes)}\n", style="bold")
            for top, size in detail.dcp_totals:
                text.append(f"  {top}  {human_bytes(size)}\n")
        for problem in detail.problems:
            text.append(f"⚠ {problem}\n", style="bold red")
        text.append("\nConfig mismatch report\n", style="bold underline")
        text.append_text(render_mismatches(detail.mismatches))

    def on_checkpoint_detail_read(self, message: CheckpointDetailRead) -> None:
        self._details[message.row.info.path] = message.detail
        if message.row.info.path == self._selected:
            self._show_summary(message.row, message.detail)

    def action_copy_path(self) -> None:
        """The selected checkpoint's full path to the clipboard (the terminal's, OSC 52), and said."""
        info = self.selected_info()
        if info is None:
            self.notify("select a checkpoint first", severity="warning")
            return
        self.app.copy_to_clipboard(info.path)
        self.notify(f"copied {info.path}")

    def action_migrate(self) -> None:
        info = self.selected_info()
        if info is None:
            self.notify("select a checkpoint first", severity="warning")
            return
        self.app.open_migration(info.path, info.step)
