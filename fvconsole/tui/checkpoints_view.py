"""View 1: the checkpoints of a training output dir, newest first, with a detail pane."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Input, Static

from fvconsole.core.humanize import human_age, human_bytes
from fvconsole.tui import backend, state
from fvconsole.tui.base import BaseView
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets import FastTable, PlainStatic


def checkpoint_mtime(path: str) -> float | None:
    """When the checkpoint was saved: ``dcp/.metadata`` (written last by DCP), else the dir."""
    for candidate in (os.path.join(path, "dcp", ".metadata"), path):
        try:
            return os.stat(candidate).st_mtime
        except OSError:
            continue
    return None


def render_mismatches(mismatches: Any, limit: int = 40) -> Text:
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
    for m in other[:limit]:
        text.append(f"  {m.path}: checkpoint={m.checkpoint!r} config={m.config!r}\n", style="grey62")
    if len(other) > limit:
        text.append(f"  … {len(other) - limit} more\n", style="grey62")
    return text


class CheckpointsView(BaseView):
    """Table of checkpoints + detail (metadata, DCP keys, mismatch report)."""

    DEFAULT_CSS = """
    CheckpointsView #ckpt-banner { height: auto; padding: 0 1; }
    CheckpointsView #ckpt-table { width: 62; height: 1fr; }
    CheckpointsView #ckpt-detail-scroll { width: 1fr; height: 1fr; border-left: solid $primary; padding: 0 1; }
    CheckpointsView .view-filter { display: none; }
    """
    BINDINGS = [Binding("m", "migrate", "Migrate selected")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rows: list[tuple[Any, float | None]] = []
        self._selected: str | None = None

    def compose(self) -> ComposeResult:
        yield PlainStatic(id="ckpt-banner")
        yield Input(placeholder="filter checkpoints (Esc closes)", classes="view-filter")
        with Horizontal():
            table: DataTable = FastTable(id="ckpt-table", cursor_type="row", zebra_stripes=True)
            yield table
            with VerticalScroll(id="ckpt-detail-scroll"):
                yield PlainStatic("Select a checkpoint.", id="ckpt-detail")

    def on_mount(self) -> None:
        table = self.query_one("#ckpt-table", DataTable)
        for label, key, width in (
            ("step", "step", 8), ("complete", "complete", 8), ("kind", "kind", 10),
            ("sidecars", "sidecars", 8), ("size", "size", 10), ("age", "age", 4),
        ):
            table.add_column(label, key=key, width=width)

    def focus_main(self) -> None:
        self.query_one("#ckpt-table", DataTable).focus()

    # ------------------------------------------------------------ loading

    def refresh_view(self) -> None:
        st = self.app.state
        banner = self.query_one("#ckpt-banner", Static)
        if not st.checkpoints_path:
            banner.update(PlainText("No checkpoints directory: press `o` to pick one (or pass --checkpoints / --config).",
                               style="bold yellow"))
            self._rows = []
            self.apply_filter(self.filter_text)
            return
        banner.update(PlainText(f"loading {st.checkpoints_path} …", style="italic"))
        path = st.checkpoints_path
        self.run_in_thread(lambda: self._load(path), self._show, group="ckpt-list", on_error=self._load_failed)

    @staticmethod
    def _load(path: str) -> list[tuple[Any, float | None]]:
        return [(info, checkpoint_mtime(info.path)) for info in backend.list_checkpoints(path)]

    def _load_failed(self, exc: BaseException) -> None:
        self.report_error(exc)
        self.query_one("#ckpt-banner", Static).update(PlainText(f"cannot list checkpoints: {exc}", style="bold red"))
        self._rows = []
        self.apply_filter(self.filter_text)

    def _show(self, rows: list[tuple[Any, float | None]]) -> None:
        self._rows = rows
        legacy = sum(1 for info, _ in rows if info.kind == "legacy")
        text = PlainText().append(f"{self.app.state.checkpoints_path}", style="bold")
        text.append(f"   {len(rows)} checkpoint(s), {legacy} legacy")
        if legacy:
            text.append("   select one and press m (or Enter) to migrate", style="italic")
        self.query_one("#ckpt-banner", Static).update(text)
        self.apply_filter(self.filter_text)

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#ckpt-table", DataTable)
        previous = self._selected
        table.clear()
        now = state.now()
        rows = []
        for info, mtime in self._rows:
            cells = (
                str(info.step),
                Text("yes", style="green") if info.complete else Text("NO", style="bold red"),
                Text(info.kind, style="yellow") if info.kind == "legacy" else str(info.kind),
                str(info.rank_sidecars),
                human_bytes(info.bytes),
                human_age(now - mtime) if mtime is not None else "-",
            )
            haystack = f"{info.step} {info.kind} {'complete' if info.complete else 'incomplete'} {info.path}"
            if text and text not in haystack.lower():
                continue
            rows.append((cells, info.path))
        for cells, key in rows:
            table.add_row(*cells, key=key)
        if previous is not None and any(key == previous for _, key in rows):
            table.move_cursor(row=table.get_row_index(previous))
        elif not rows:
            self.query_one("#ckpt-detail", Static).update("No checkpoints.")

    # ------------------------------------------------------------ selection + detail

    def selected_info(self) -> Any | None:
        for info, _ in self._rows:
            if info.path == self._selected:
                return info
        return None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "ckpt-table" or event.row_key is None:
            return
        self._selected = event.row_key.value
        info = self.selected_info()
        if info is None:
            return
        self.query_one("#ckpt-detail", Static).update(self._summary(info, None))
        run_config = self.app.state.run_config
        self.run_in_thread(lambda: backend.checkpoint_detail(info.path, run_config),
                           lambda d: self._show_detail(info, d), group="ckpt-detail")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "ckpt-table":
            event.stop()
            self.action_migrate()

    def _summary(self, info: Any, detail: Any) -> Text:
        text = PlainText()
        text.append(f"checkpoint-{info.step}\n", style="bold")
        text.append(f"{info.path}\n", style="grey62")
        text.append("kind ")
        text.append(info.kind, style="bold yellow" if info.kind == "legacy" else "bold")
        text.append("   complete ")
        text.append("yes" if info.complete else "NO", style="" if info.complete else "bold red")
        text.append(f"   size {human_bytes(info.bytes)}\nrng states {info.rng_states}   "
                    f"rank sidecars {info.rank_sidecars}\n")
        if info.metadata_step is not None and info.metadata_step != info.step:
            text.append(f"metadata.json step {info.metadata_step} differs from the directory name\n", style="bold red")
        for problem in info.problems:
            text.append(f"⚠ {problem}\n", style="yellow")
        if info.kind == "legacy":
            text.append("Legacy: the dataloader state is a DCP chimera; migrate to rank-local sidecars (m).\n",
                        style="italic")
        if detail is None:
            text.append("\nloading detail …", style="italic")
        return text

    def _show_detail(self, info: Any, detail: backend.CheckpointDetail) -> None:
        if info.path != self._selected:
            return
        text = self._summary(info, detail)
        text.append("\nmetadata.json: ", style="bold")
        text.append(", ".join(detail.metadata_keys) or "-")
        text.append(f"\nDCP state keys: {detail.dcp_key_count}\n", style="bold")
        for top, count in detail.dcp_key_groups:
            style = "yellow" if top == "dataloader" else ""
            text.append(f"  {top}.*  {count}\n", style=style)
        for problem in detail.problems:
            text.append(f"⚠ {problem}\n", style="bold red")
        text.append("\nConfig mismatch report\n", style="bold underline")
        text.append_text(render_mismatches(detail.mismatches))
        self.query_one("#ckpt-detail", Static).update(text)

    def action_migrate(self) -> None:
        info = self.selected_info()
        if info is None:
            self.notify("select a checkpoint first", severity="warning")
            return
        self.app.open_migration(info)
