"""View 3: the weight shard cache, least recently used first, with safe eviction.

Every eviction is plan → preview → confirm (focus on Cancel) → execute in a worker → rescan,
through the same ``core.cache`` calls as ``fvconsole cache evict``.
"""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static

from fvconsole.core.errors import FvError
from fvconsole.core.humanize import head_tail, human_age, human_bytes
from fvconsole.tui import backend, state
from fvconsole.tui.base import BaseView
from fvconsole.tui.modals import ConfirmScreen, ErrorScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets import FastTable, PlainStatic, ProgressRow, UsageBar

STATUS_STYLE = {"complete": "green", "partial": "cyan", "incomplete": "yellow", "invalid": "bold red"}
MARK = "●"
WRITE_ACTIONS = (("evict_marked", "e", "Evict marked"), ("evict_cap", "c", "Evict to cap"),
                 ("evict_invalid", "i", "Evict invalid"))


def lru_order(entries: Any) -> list[Any]:
    """FastVideo's GC order: last used (manifest mtime, 0 if none), then size, then path."""
    return sorted(entries, key=lambda e: (e.last_used or 0.0, e.bytes, e.path))


def shards_cell(entry: Any) -> str:
    present = len(entry.shards_present)
    return f"{present}/{entry.num_shards}" if entry.num_shards is not None else f"{present}/?"


def short(text: str, width: int = 78) -> str:
    """One line of at most ``width`` characters (reasons can be paragraphs)."""
    line = " ".join(str(text).split()).replace("selected by --key", "marked")
    return line if len(line) <= width else line[: width - 1] + "…"


def status_cell(entry: Any) -> Text:
    label = f"{entry.status}*" if entry.writing else entry.status
    return Text(label, style=STATUS_STYLE.get(entry.status, ""))


def last_used_cell(entry: Any) -> str:
    if entry.last_used is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.last_used))


class CacheView(BaseView):
    """Cache entries, usage bar, entry detail, eviction preview."""

    write_actions = frozenset(action for action, _key, _label in WRITE_ACTIONS)

    DEFAULT_CSS = """
    CacheView #cache-head { height: auto; padding: 0 1; }
    CacheView #cache-main { height: 1fr; }
    CacheView #cache-table { width: 84; height: 1fr; }
    CacheView #cache-detail-scroll { width: 1fr; height: 1fr; padding: 0 1; border-left: solid $primary; }
    CacheView #cache-preview-scroll { height: auto; max-height: 16; display: none; padding: 0 1;
                                      border-top: solid $warning; }
    CacheView #cache-progress-row { padding: 0 1; }
    CacheView .view-filter { display: none; }
    """
    BINDINGS = [
        Binding("space", "toggle_mark", "Mark"),
        *[Binding(key, action, label) for action, key, label in WRITE_ACTIONS],
        *[Binding(key, f"refuse('{label.lower()}')", label, show=False) for _a, key, label in WRITE_ACTIONS],
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._scan: Any = None
        self._entries: list[Any] = []
        self._marked: set[str] = set()
        self._selected: str | None = None
        self._busy = False
        self._last_plan_skipped: tuple = ()

    def compose(self) -> ComposeResult:
        with Vertical(id="cache-head"):
            yield PlainStatic(id="cache-root-line")
            yield UsageBar(id="cache-usage")
        yield Input(placeholder="filter entries by key or status (Esc closes)", classes="view-filter")
        yield ProgressRow(id="cache-progress-row")
        with Horizontal(id="cache-main"):
            yield FastTable(id="cache-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="cache-detail-scroll"):
                yield PlainStatic("Select an entry.", id="cache-detail")
        with VerticalScroll(id="cache-preview-scroll"):
            yield PlainStatic(id="cache-preview")

    def on_mount(self) -> None:
        table = self.query_one("#cache-table", DataTable)
        for label, key, width in (
            (" ", "mark", 1), ("key", "key", 16), ("status", "status", 11), ("size", "size", 10),
            ("shards", "shards", 7), ("last used", "last_used", 16), ("age", "age", 5),
        ):
            table.add_column(label, key=key, width=width)

    def focus_main(self) -> None:
        self.query_one("#cache-table", DataTable).focus()

    # ------------------------------------------------------------ scanning

    def refresh_view(self) -> None:
        root = self.app.state.cache_root
        line = self.query_one("#cache-root-line", Static)
        if not root:
            line.update(PlainText("No shard cache root: press `o` to pick one (or pass --cache-root / "
                             f"set ${state.CACHE_ENV}).", style="bold yellow"))
            self._show_scan(None)
            return
        line.update(PlainText(f"scanning {root} …", style="italic"))
        self.run_in_thread(lambda: backend.scan(root), self._show_scan, group="cache-scan",
                           on_error=self._scan_failed)

    def _scan_failed(self, exc: BaseException) -> None:
        self.report_error(exc)
        self.query_one("#cache-root-line", Static).update(PlainText(f"cannot scan: {exc}", style="bold red"))
        self._show_scan(None)

    def _show_scan(self, scan: Any) -> None:
        self._scan = scan
        self._entries = lru_order(scan.entries) if scan is not None else []
        keys = {e.key for e in self._entries}
        self._marked &= keys
        usage = self.query_one("#cache-usage", UsageBar)
        if scan is None:
            usage.update("")
        else:
            used = sum(e.bytes for e in self._entries)
            cap = int(state.cache_cap_gb() * (1 << 30))
            usage.show_usage(used, cap, getattr(scan, "fs_free", None), getattr(scan, "fs_total", None))
            counts: dict[str, int] = {}
            for e in self._entries:
                counts[e.status] = counts.get(e.status, 0) + 1
            text = PlainText().append(f"{scan.root}", style="bold")
            text.append(f"   {len(self._entries)} entries: ")
            text.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none")
            if any(e.writing for e in self._entries):
                text.append("   * being written", style="grey62")
            if getattr(scan, "foreign", ()):
                text.append(f"   {len(scan.foreign)} foreign item(s) ignored", style="grey62")
            for err in getattr(scan, "errors", ())[:3]:
                text.append(f"\n⚠ {err}", style="yellow")
            self.query_one("#cache-root-line", Static).update(text)
        self.apply_filter(self.filter_text)

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#cache-table", DataTable)
        previous = self._selected
        table.clear()
        now = state.now()
        for entry in self._entries:
            if text and text not in f"{entry.key} {entry.status}".lower():
                continue
            table.add_row(
                MARK if entry.key in self._marked else "",
                entry.key,
                status_cell(entry),
                human_bytes(entry.bytes),
                shards_cell(entry),
                last_used_cell(entry),
                human_age(now - entry.last_used) if entry.last_used is not None else "-",
                key=entry.key,
            )
        if previous is not None and previous in table.rows:
            table.move_cursor(row=table.get_row_index(previous))
        if table.row_count == 0:
            self.query_one("#cache-detail", Static).update("No entries.")

    # ------------------------------------------------------------ selection + detail

    def entry(self, key: str | None) -> Any | None:
        for e in self._entries:
            if e.key == key:
                return e
        return None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "cache-table" or event.row_key is None:
            return
        self._selected = event.row_key.value
        entry = self.entry(self._selected)
        if entry is None:
            return
        self.query_one("#cache-detail", Static).update(self._entry_text(entry, None))
        self.run_in_thread(lambda: backend.cache_entry_detail(entry),
                           lambda d: self._show_detail(entry, d), group="cache-detail")

    def _entry_text(self, entry: Any, detail: Any) -> Text:
        text = PlainText().append(f"{entry.key}  ", style="bold")
        text.append(entry.status, style=STATUS_STYLE.get(entry.status, ""))
        if entry.writing:
            text.append("  (being written)", style="grey62")
        text.append(f"\n{entry.path}\n", style="grey62")
        text.append(f"size {human_bytes(entry.bytes)}   shards {shards_cell(entry)}   "
                    f"last used {last_used_cell(entry)}\n")
        if entry.explanation:
            text.append(f"{entry.explanation}\n", style="italic")
        for problem in getattr(entry, "problems", ()):
            text.append(f"⚠ {problem}\n", style="yellow")
        if detail is None:
            text.append("loading …", style="italic")
        return text

    def _show_detail(self, entry: Any, detail: backend.CacheEntryDetail) -> None:
        if entry.key != self._selected:
            return
        text = self._entry_text(entry, detail)
        text.append("\nmanifest.json\n", style="bold underline")
        summary = detail.summary
        if summary is not None:
            text.append(f"  num_shards {entry.num_shards}   params {summary.params}   "
                        f"elements {summary.numel:,}\n")
            text.append("  kinds: " + (", ".join(f"{k} ×{n}" for k, n in summary.kinds) or "-") + "\n")
            text.append("  dtypes: " + (", ".join(f"{d} ×{n}" for d, n in summary.dtypes) or "-") + "\n")
        else:
            text.append(f"  ⚠ {detail.manifest_error}\n", style="bold red" if entry.status == "invalid" else "yellow")
        text.append(f"\nfiles ({detail.total_files})\n", style="bold underline")
        head, omitted, tail = head_tail(list(detail.files), 12, 4)
        for name, size in head:
            text.append(f"  {name:<36} {human_bytes(size):>10}\n")
        if omitted or detail.total_files > len(detail.files):
            text.append(f"  … {omitted + detail.total_files - len(detail.files)} more\n", style="grey62")
        for name, size in tail:
            text.append(f"  {name:<36} {human_bytes(size):>10}\n")
        for name in detail.other[:8]:
            text.append(f"  {name}  (not a regular file: not followed, not counted)\n", style="yellow")
        self.query_one("#cache-detail", Static).update(text)

    # ------------------------------------------------------------ marking

    def action_toggle_mark(self) -> None:
        table = self.query_one("#cache-table", DataTable)
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key in self._marked:
            self._marked.discard(key)
        else:
            self._marked.add(key)
        table.update_cell(key, "mark", MARK if key in self._marked else "")
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)
        self.notify(f"{len(self._marked)} entr{'y' if len(self._marked) == 1 else 'ies'} marked", timeout=2)

    @property
    def marked(self) -> set[str]:
        return set(self._marked)

    # ------------------------------------------------------------ eviction

    def action_refuse(self, what: str) -> None:
        self.refuse_read_only(what)

    def action_evict_marked(self) -> None:
        if not self._marked:
            self.notify("mark entries with space first", severity="warning")
            return
        self._plan("evict marked", keys=tuple(sorted(self._marked)))

    def action_evict_cap(self) -> None:
        from fvconsole.core.cache import default_max_gb

        if self.refuse_read_only("evict to cap"):
            return
        try:
            cap = default_max_gb()
        except FvError as exc:
            self.report_error(exc)
            return
        self._plan(f"evict to cap ({cap:g} GiB)", max_gb=cap)

    def action_evict_invalid(self) -> None:
        self._plan("evict invalid", invalid=True)

    def _plan(self, what: str, **kwargs: Any) -> None:
        if self.refuse_read_only(what):
            return
        root = self.app.state.cache_root
        if not root:
            self.notify("no cache root loaded: press o", severity="warning")
            return
        if self._busy:
            self.notify("busy: wait for the running eviction", severity="warning")
            return

        def job() -> tuple[Any, Any]:
            fresh = backend.scan(root)
            return fresh, backend.plan(fresh, **kwargs)

        self.run_in_thread(job, lambda r: self._planned(what, *r), group="cache-plan")

    def _planned(self, what: str, fresh_scan: Any, plan: Any) -> None:
        self._show_scan(fresh_scan)
        self._show_preview(what, plan)
        if not plan.evict:
            self.notify(f"{what}: nothing to evict", severity="warning")
            return
        body = [f"Delete {len(plan.evict)} cache entr{'y' if len(plan.evict) == 1 else 'ies'} "
                f"under {plan.root}, freeing {human_bytes(plan.freed_bytes)}:"]
        head, omitted, tail = head_tail(list(plan.evict), 10, 3)
        body += [f"  {p.key} {human_bytes(p.bytes):>10}  {short(p.reason, 58)}" for p in head]
        if omitted:
            body.append(f"  … {omitted} more")
        body += [f"  {p.key} {human_bytes(p.bytes):>10}  {short(p.reason, 58)}" for p in tail]
        if plan.skipped:
            body.append(f"Skipped ({len(plan.skipped)}), left in place:")
            body += [f"  {s.key}  {short(s.reason, 69)}" for s in list(plan.skipped)[:6]]
            if len(plan.skipped) > 6:
                body.append(f"  … {len(plan.skipped) - 6} more (see the preview panel)")
        body.append("Each entry is re-checked right before deletion; symlinks are never followed.")
        self.app.push_screen(ConfirmScreen(f"{what.capitalize()}?", body, "Evict"),
                             lambda ok: self._confirmed(plan, ok))

    def _show_preview(self, what: str, plan: Any) -> None:
        text = PlainText().append(f"Eviction preview: {what}\n", style="bold")
        text.append(f"{len(plan.evict)} to evict, frees {human_bytes(plan.freed_bytes)}\n",
                    style="bold red" if plan.evict else "")
        head, omitted, tail = head_tail(list(plan.evict), 8, 2)
        for p in head + tail:
            text.append(f"  ✗ {p.key} {human_bytes(p.bytes):>10}  {short(p.reason, 100)}\n")
        if omitted:
            text.append(f"  … {omitted} more\n")
        if plan.skipped:
            text.append(f"{len(plan.skipped)} skipped:\n", style="yellow")
            for skipped in list(plan.skipped)[:12]:
                text.append(f"  – {skipped.key}  {short(skipped.reason, 100)}\n", style="yellow")
            if len(plan.skipped) > 12:
                text.append(f"  … {len(plan.skipped) - 12} more\n", style="yellow")
        self.query_one("#cache-preview", Static).update(text)
        self.query_one("#cache-preview-scroll").display = True

    def _confirmed(self, plan: Any, ok: bool | None) -> None:
        if not ok:
            self.notify("eviction cancelled: nothing deleted")
            return
        if self.refuse_read_only("eviction"):
            return
        self._busy = True
        self._last_plan_skipped = plan.skipped
        progress = self.query_one("#cache-progress-row", ProgressRow).start("", total=max(len(plan.evict), 1))
        self.run_in_thread(lambda: backend.evict(plan, progress), self._evicted, group="cache-evict",
                           on_error=self._evict_failed)

    def _evicted(self, result: Any) -> None:
        self._busy = False
        self.query_one("#cache-progress-row", ProgressRow).stop()
        count = len(result.evicted)
        summary = f"evicted {count} entr{'y' if count == 1 else 'ies'}, freed {human_bytes(result.freed_bytes)}"
        text = PlainText().append(("✓ " if result.ok else "✗ ") + summary + "\n", style="bold green" if result.ok else "bold red")
        for entry in result.evicted[:12]:
            text.append(f"  ✗ {entry.key} {human_bytes(entry.bytes):>10}\n")
        for error in result.errors[:12]:
            text.append(f"  error: {error}\n", style="bold red")
        newly_skipped = result.skipped[len(self._last_plan_skipped):]
        for skipped in newly_skipped[:12]:
            text.append(f"  – {skipped.key}  {short(skipped.reason, 100)}\n", style="yellow")
        self.query_one("#cache-preview", Static).update(text)
        if result.ok:
            self.notify(summary)
        else:
            self.notify(f"eviction failed part-way: {summary}; {len(result.errors)} error(s)", severity="error",
                        timeout=10)
            self.app.push_screen(ErrorScreen("Eviction failed part-way", "\n".join(
                [summary, "", *result.errors[:40]])))
        self._marked.clear()
        self.refresh_view()

    def _evict_failed(self, exc: BaseException) -> None:
        self._busy = False
        self.query_one("#cache-progress-row", ProgressRow).stop()
        self.report_error(exc)
        self.refresh_view()
