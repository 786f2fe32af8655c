"""View 3: the weight shard cache, least recently used first, with safe eviction.

Every eviction is options and live preview (cap, force) → rescan and plan → confirm (focus on
Cancel) → execute in a worker → rescan. Execution is ``core.cache.locked.evict_under_lock``,
as for ``fvconsole cache evict --yes``: the root's evictor lock is held while the confirmed
plan runs (another evictor on the root: refused, nothing removed) and the journal gets its line. The view rescans by itself every few seconds (``a`` toggles it), so
entries a running job is writing move on screen without ``r``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical, VerticalScroll
from textual.widgets import DataTable, Input

from fvconsole.core.cache import (
    INVALID_SELECTS,
    CacheEntry,
    CacheEntryDetail,
    CacheScan,
    EntryVerification,
    EvictionPlan,
    cache_entry_detail,
    cap_bytes,
    default_max_gb,
    evict_under_lock,
    gc_sort_key,
    scan_cache,
    verify_entry,
)
from fvconsole.core.shared import FvError, Progress, head_tail, human_age, human_bytes, plural
from fvconsole.tui import state
from fvconsole.tui.base import BaseView
from fvconsole.tui.evict_dialog import EvictOptions, EvictScreen, EvictSelection, confirm_body, plan_for
from fvconsole.tui.messages import (
    CacheDetailRead,
    CacheEvicted,
    CacheScanFailed,
    CacheScanned,
    CacheVerified,
    EvictionFailed,
    EvictionPlanned,
)
from fvconsole.tui.modals import ConfirmScreen, ErrorScreen
from fvconsole.tui.plain import PlainText, fitted
from fvconsole.tui.widgets import FastTable, FitStatic, PlainStatic, ProgressRow, UsageBar
from fvconsole.tui.wording import free_target_text, skip_text

STATUS_STYLE = {"complete": "green", "partial": "cyan", "incomplete": "yellow", "empty": "yellow", "invalid": "bold red"}
MARK = "●"
#: Seconds between automatic rescans (and age updates).
AUTO_REFRESH = 5.0
COLUMNS = ((" ", "mark", 1), ("key", "key", 16), ("status", "status", 12), ("size", "size", 11),
           ("shards", "shards", 8), ("last used", "age", 10))
#: Terminal columns from which the footer has room for ``f`` (its keys take ~78 without it).
FOOTER_FREE_WIDTH = 100

FREE_HELP = ("evict least recently used entries until the filesystem has a free space you set "
             "(% or GiB, as cache evict --min-free-percent/--min-free-gb); says if it cannot be reached")

SELECTIONS = {
    "evict_marked": "evict marked",
    "evict_cap": "evict to cap",
    "evict_invalid": "evict invalid",
    "evict_free": "evict to free space",
}


def console_command(plan: EvictionPlan, what: str) -> str:
    """How the journal names a console eviction (``fvconsole history`` shows it)."""
    parts = [f"fvconsole console: {what}"]
    if plan.cap_bytes is not None:
        parts.append(f"cap {human_bytes(plan.cap_bytes)}")
    if plan.free_space is not None:
        parts.append(free_target_text(plan.free_space.target))
    if plan.force:
        parts.append("force")
    return ", ".join(parts)


def lru_order(entries: Iterable[CacheEntry]) -> list[CacheEntry]:
    """FastVideo's GC order: last used (manifest mtime, 0 if none), then size, then path."""
    return sorted(entries, key=gc_sort_key)


def shards_cell(entry: CacheEntry) -> str:
    present = len(entry.shards_present)
    return f"{present}/{entry.num_shards}" if entry.num_shards is not None else f"{present}/?"


def status_cell(entry: CacheEntry) -> Text:
    label = f"{entry.status}*" if entry.writing else entry.status
    return Text(label, style=STATUS_STYLE.get(entry.status, ""))


def last_used_cell(entry: CacheEntry) -> str:
    if entry.last_used is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.last_used))


def age_cell(entry: CacheEntry, now: float) -> str:
    """How long ago the entry was last used (``3h ago``; ``never`` without a manifest)."""
    return f"{human_age(now - entry.last_used)} ago" if entry.last_used is not None else "never"


class CacheView(BaseView):
    """Cache entries, usage bar, marks, entry detail, eviction."""

    TITLE = "3 Shard cache"
    PANES: ClassVar[dict[str, str]] = {"cache-detail-scroll": "entry detail"}
    TABLE = "cache-table"
    write_actions = frozenset(SELECTIONS)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_mark", "Mark", key_display="␣",
                tooltip="mark or unmark the selected entry (then the next row)"),
        Binding("A", "mark_all", "Mark all", show=False, tooltip="mark every entry shown (the filter applies)"),
        Binding("asterisk", "invert_marks", "Invert marks", show=False, tooltip="invert the marks of the entries shown"),
        Binding("U", "clear_marks", "Unmark all", show=False, tooltip="clear every mark"),
        Binding("e", "evict_marked", "Evict marked",
                tooltip="evict the marked entries: force control and preview, then confirm"),
        Binding("c", "evict_cap", "Evict to cap",
                tooltip="evict least recently used entries down to a cap you set (default "
                        "$FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB, 300); the bar shows the cache after"),
        Binding("i", "evict_invalid", "Evict invalid",
                tooltip=f"evict {INVALID_SELECTS}"),
        # In the footer only where it has room (FOOTER_FREE_WIDTH): at 80 columns the footer is
        # full; `?`, the palette and every eviction dialog's min free field show it there.
        # (First: of a key's bindings the first enabled one is the footer's.)
        Binding("f", "evict_free('footer')", "Evict to free space", tooltip=FREE_HELP),
        Binding("f", "evict_free", "Evict to free space", show=False, tooltip=FREE_HELP),
        Binding("v", "verify", "Verify", show=False,
                tooltip="verify the entry under the cursor (or the marked ones): every shard's header against "
                        "its manifest, as cache verify; the problems show in the detail pane"),
        Binding("a", "toggle_auto_refresh", "Auto-refresh", show=False,
                tooltip=f"rescan by itself every {AUTO_REFRESH:g}s (on at start) or stop doing so"),
        *[Binding(key, f"refuse('{label}')", label, show=False)
          for key, label in (("e", "evict marked"), ("c", "evict to cap"), ("i", "evict invalid"),
                             ("f", "evict to free space"))],
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._scan: CacheScan | None = None
        self._entries: list[CacheEntry] = []
        self._shown: list[CacheEntry] = []
        self._marked: set[str] = set()
        #: key -> (the manifest mtime it was verified at, the verdict): shown while that manifest stays.
        self._verified: dict[str, tuple[int | None, EntryVerification]] = {}
        self._selected: str | None = None
        self._busy = False
        self._scanning = False
        self.auto_rescan = True

    def compose(self) -> ComposeResult:
        with Vertical(id="cache-head"):
            yield FitStatic(id="cache-root-line")
            yield UsageBar(id="cache-usage")
            yield PlainStatic(id="cache-status")
        yield Input(placeholder="filter entries by key or status (Esc closes)", classes="view-filter")
        yield ProgressRow(id="cache-progress-row")
        with Container(id="cache-main", classes="split"):
            yield FastTable(id="cache-table", cursor_type="row", zebra_stripes=True,
                            sortable=[key for _l, key, _w in COLUMNS if key != "mark"])
            with VerticalScroll(id="cache-detail-scroll", classes="detail"):
                yield FitStatic("Select an entry.", id="cache-detail")
        with VerticalScroll(id="cache-result-scroll"):
            yield PlainStatic(id="cache-result")

    def on_mount(self) -> None:
        table = self.query_one("#cache-table", FastTable)
        for label, key, width in COLUMNS:
            table.add_column(label, key=key, width=width)
        self.set_interval(AUTO_REFRESH, self._tick)
        self._show_status()

    # ------------------------------------------------------------ scanning

    def refresh_view(self) -> None:
        root = self.app.state.cache_root
        line = self.query_one("#cache-root-line", PlainStatic)
        if not root:
            line.update(PlainText("No shard cache root: press o to pick one (or pass --cache-root / "
                                  f"set ${state.ENV_ROOT}).", style="bold yellow"))
            self._show_scan(None)
            return
        if self._scan is None or self._scan.root != root:
            line.update(PlainText(f"scanning {root} …", style="italic"))
        self._scanning = True
        self.scan(root)

    @work(thread=True, exclusive=True, group="cache-scan", exit_on_error=False)
    def scan(self, root: str) -> None:
        with self.failures(CacheScanFailed):
            self.deliver(CacheScanned(scan_cache(root, now=state.now())))

    def on_cache_scan_failed(self, message: CacheScanFailed) -> None:
        self._scanning = False
        self.report_error(message.error)
        self.query_one("#cache-root-line", PlainStatic).update(
            PlainText(f"cannot scan: {message.error}", style="bold red"))
        self._show_scan(None)

    def on_cache_scanned(self, message: CacheScanned) -> None:
        self._scanning = False
        self._show_scan(message.scan)
        self._refresh_detail()

    def _tick(self) -> None:
        """Every few seconds: rescan (auto-refresh), or at least move the ages on."""
        if (self.auto_rescan and not self._busy and not self._scanning and self.app.state.cache_root
                and self.screen is self.app.screen):
            self.refresh_view()
        else:
            self._tick_ages()
            self._refresh_detail()

    def _refresh_detail(self) -> None:
        """Show the selected entry as the newest scan has it (ages and explanations move on)."""
        entry = self.entry(self._selected)
        if entry is not None:
            self.read_detail(entry)

    def _tick_ages(self) -> None:
        table = self.query_one("#cache-table", FastTable)
        now = state.now()
        top = int(table.scroll_offset.y)
        for entry in self._shown[max(top - 1, 0): top + table.size.height + 1]:
            if entry.key in table.rows:
                table.update_cell(entry.key, "age", age_cell(entry, now))

    def _show_scan(self, scan: CacheScan | None) -> None:
        self._scan = scan
        self._entries = lru_order(scan.entries) if scan is not None else []
        self._marked &= {e.key for e in self._entries}
        usage = self.query_one("#cache-usage", UsageBar)
        if scan is None:
            usage.clear()
        else:
            fs_free, fs_total = state.free_space(scan)
            cap = int(cap_bytes(state.cache_cap_gb()))
            usage.show_usage(sum(e.bytes for e in self._entries), cap, fs_free, fs_total)
            self._show_root(scan)
        self.apply_filter(self.filter_text)

    def _show_root(self, scan: CacheScan) -> None:
        counts: dict[str, int] = {}
        for e in self._entries:
            counts[e.status] = counts.get(e.status, 0) + 1
        entries = self._entries

        def build(width: int) -> PlainText:
            return self._root_text(scan, entries, counts, width)

        self.query_one("#cache-root-line", FitStatic).show(build)

    @staticmethod
    def _root_text(scan: CacheScan, entries: list[CacheEntry], counts: dict[str, int], width: int) -> PlainText:
        """The root (one line, shortened in the middle if it must be) and what the scan found."""
        text = PlainText().append(fitted(scan.root, width), style="bold")
        text.append(f"\n{plural(len(entries), 'entry', 'entries')}: ")
        text.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none")
        if any(e.writing for e in entries):
            text.append(" · * being written", style="grey62")
        if scan.foreign:
            text.append(f" · {len(scan.foreign)} foreign item(s) ignored", style="grey62")
        if scan.foreign_gc_counted:
            text.append(f" · {len(scan.foreign_gc_counted)} foreign dir(s): FastVideo's GC counts these and may "
                        "delete them", style="yellow")
        held = sum(1 for e in entries if e.in_use_by)
        if held:
            text.append(f" · {held} in use by live processes", style="bold yellow")
        for err in (*scan.errors[:3], *state.shown_warnings(scan)):
            text.append(f"\n⚠ {err}", style="yellow")
        return text

    def _show_status(self) -> None:
        """Marks (count and size), filter and auto-refresh, always in view."""
        marked = [e for e in self._entries if e.key in self._marked]
        text = PlainText()
        if marked:
            text.append(f"{MARK} {len(marked)} marked, {human_bytes(sum(e.bytes for e in marked))}", style="bold")
        else:
            text.append("none marked (space)", style="grey62")
        if self.filter_text:
            style = "bold" if self._shown else "bold yellow"
            text.append(f" · {len(self._shown)} of {len(self._entries)} shown (filter '{self.filter_text}')", style=style)
        table = self.query_one("#cache-table", FastTable)
        order = f"by {table.sort_column}" if table.sort_column else "LRU first"
        text.append(f" · {order}", style="grey62")
        text.append(f" · auto-refresh {AUTO_REFRESH:g}s (a)" if self.auto_rescan else " · auto-refresh off (a)",
                    style="grey62")
        self.query_one("#cache-status", PlainStatic).update(text)

    SORT_KEYS: ClassVar[dict[str, Any]] = {
        "key": lambda e: e.key,
        "status": lambda e: e.status,
        "size": lambda e: e.bytes,
        "shards": lambda e: len(e.shards_present),
        "age": lambda e: -(e.last_used or 0.0),
    }

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#cache-table", FastTable)
        previous = self._selected
        table.clear()
        now = state.now()
        self._shown = [e for e in table.ordered(self._entries, self.SORT_KEYS)
                       if not text or text in f"{e.key} {e.status}".lower()]
        for entry in self._shown:
            table.add_row(MARK if entry.key in self._marked else "", entry.key, status_cell(entry),
                          human_bytes(entry.bytes), shards_cell(entry), age_cell(entry, now), key=entry.key)
        if previous is not None and previous in table.rows:
            table.move_cursor(row=table.get_row_index(previous))
        if not self._shown:
            self._selected = None
            what = f"No entry matches '{text}'." if text and self._entries else "No entries."
            self.query_one("#cache-detail", PlainStatic).update(what)
        self._show_status()

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        self.apply_filter(self.filter_text)

    # ------------------------------------------------------------ selection + detail

    def entry(self, key: str | None) -> CacheEntry | None:
        return self._scan.get(key) if self._scan is not None and key is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "cache-table" or event.row_key is None:
            return
        self._selected = event.row_key.value
        entry = self.entry(self._selected)
        if entry is None:
            return
        self.query_one("#cache-detail", FitStatic).show(lambda width: self._entry_text(entry, width))
        self.read_detail(entry)

    @work(thread=True, exclusive=True, group="cache-detail", exit_on_error=False)
    def read_detail(self, entry: CacheEntry) -> None:
        with self.failures():
            self.deliver(CacheDetailRead(entry, cache_entry_detail(entry)))

    def _entry_text(self, entry: CacheEntry, width: int) -> PlainText:
        now = state.now()
        text = PlainText().append(f"{entry.key}  ", style="bold")
        text.append(entry.status, style=STATUS_STYLE.get(entry.status, ""))
        if entry.writing:
            text.append("  (being written)", style="grey62")
        text.append("\n" + fitted(entry.path, width) + "\n", style="grey62")
        used = last_used_cell(entry) + (f" ({age_cell(entry, now)})" if entry.last_used is not None else "")
        text.append(f"size {human_bytes(entry.bytes)}   shards {shards_cell(entry)}   last used {used}\n")
        if entry.explanation:
            text.append(f"{entry.explanation}\n", style="italic")
        for holder in entry.in_use_by[:5]:
            text.append(f"in use: {holder.how} by pid {holder.pid} ({holder.command})\n", style="bold yellow")
        if len(entry.in_use_by) > 5:
            text.append(f"in use: and {len(entry.in_use_by) - 5} more\n", style="bold yellow")
        if self._scan is not None:
            ago = human_age(now - self._scan.scanned_at)
            how = f"auto-refresh every {AUTO_REFRESH:g}s" if self.auto_rescan else "r rescans"
            text.append(f"as scanned {ago} ago ({how})\n", style="grey62")
        for problem in entry.problems:
            text.append(f"⚠ {problem}\n", style="yellow")
        return text

    # ------------------------------------------------------------ verify

    def action_verify(self) -> None:
        """Verify the marked entries, or the one under the cursor, in a worker (read-only: allowed always)."""
        keys = sorted(self._marked) or ([self._selected] if self.entry(self._selected) is not None else [])
        entries = [e for e in (self.entry(k) for k in keys) if e is not None]
        if not entries:
            self.notify("select or mark an entry first", severity="warning")
            return
        self.notify(f"verifying {plural(len(entries), 'entry', 'entries')} …", timeout=3)
        self.verify(tuple(entries))

    @work(thread=True, exclusive=True, group="cache-verify", exit_on_error=False)
    def verify(self, entries: tuple[CacheEntry, ...]) -> None:
        with self.failures():
            results = tuple(verify_entry(e.path, e.key, is_symlink=e.is_symlink) for e in entries)
            self.deliver(CacheVerified(results, {e.key: e.manifest_mtime_ns for e in entries}))

    def on_cache_verified(self, message: CacheVerified) -> None:
        for result in message.results:
            self._verified[result.key] = (message.stamps.get(result.key), result)
        bad = [r for r in message.results if r.failed]
        apart = sum(r.not_verifiable is not None for r in message.results)
        checked = len(message.results) - apart
        unverifiable = f"; {apart} not verifiable (no manifest.json yet, or empty)" if apart else ""
        if bad:
            first = bad[0].problems[0].text()
            self.notify(f"{len(bad)} of {checked} failed verification: "
                        + ", ".join(r.key for r in bad[:3]) + (" …" if len(bad) > 3 else "")
                        + f"; first: {first} (the entry's detail lists every problem){unverifiable}", severity="error")
        elif checked:
            self.notify(f"verified {checked}: every shard agrees with its manifest{unverifiable}", timeout=4)
        else:
            self.notify(f"not verifiable: {message.results[0].not_verifiable}" if apart == 1
                        else f"none of {apart} is verifiable (no manifest.json yet, or empty)",
                        severity="warning", timeout=4)
        self._refresh_detail()

    def _verification_text(self, entry: CacheEntry, text: PlainText) -> None:
        """The last verification of this entry, while its manifest is the one verified."""
        stamp, result = self._verified.get(entry.key, (None, None))
        if result is None or stamp != entry.manifest_mtime_ns:
            return
        text.append("\nverify\n", style="bold underline")
        if result.not_verifiable is not None:
            text.append(f"  not verifiable: {result.not_verifiable}\n", style="yellow")
            return
        if result.ok:
            text.append(f"  ✓ {len(result.shards_checked)} shard(s) agree with the manifest\n", style="green")
            return
        for problem in result.problems[:20]:
            text.append(f"  ✗ {problem.text()}\n", style="bold red")
        if len(result.problems) > 20:
            text.append(f"  … {len(result.problems) - 20} more (fvconsole cache verify --key {entry.key})\n",
                        style="grey62")

    def on_cache_detail_read(self, message: CacheDetailRead) -> None:
        entry, detail = message.entry, message.detail
        if entry.key == self._selected:
            self.query_one("#cache-detail", FitStatic).show(lambda width: self._detail_text(entry, detail, width))

    def _detail_text(self, entry: CacheEntry, detail: CacheEntryDetail, width: int) -> PlainText:
        text = self._entry_text(entry, width)
        self._verification_text(entry, text)  # first: what `v` found is what the operator pressed it for
        text.append("\nmanifest.json\n", style="bold underline")
        summary = detail.summary
        if summary is not None:
            text.append(f"  num_shards {entry.num_shards}   params {summary.params}   elements {summary.numel:,}\n")
            text.append("  kinds: " + (", ".join(f"{k} ×{n}" for k, n in summary.kinds) or "-") + "\n")
            text.append("  dtypes: " + (", ".join(f"{d} ×{n}" for d, n in summary.dtypes) or "-") + "\n")
        else:
            text.append(f"  ⚠ {detail.manifest_error}\n", style="bold red" if entry.status == "invalid" else "yellow")
        text.append(f"\nfiles ({detail.total_files})\n", style="bold underline")
        head, omitted, tail = head_tail(list(detail.files), 12, 4)
        for name, size in head:
            text.append(f"  {human_bytes(size):>10}  {name}\n")
        if omitted or detail.total_files > len(detail.files):
            text.append(f"  … {omitted + detail.total_files - len(detail.files)} more\n", style="grey62")
        for name, size in tail:
            text.append(f"  {human_bytes(size):>10}  {name}\n")
        for name in detail.other[:8]:
            text.append(f"  {name}  (not a regular file: not followed, not counted)\n", style="yellow")
        return text

    # ------------------------------------------------------------ marking

    def action_toggle_mark(self) -> None:
        table = self.query_one("#cache-table", FastTable)
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        self._set_marks(self._marked ^ {key})
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)

    def action_mark_all(self) -> None:
        self._set_marks(self._marked | {e.key for e in self._shown})

    def action_invert_marks(self) -> None:
        shown = {e.key for e in self._shown}
        self._set_marks((self._marked - shown) | (shown - self._marked))

    def action_clear_marks(self) -> None:
        self._set_marks(set())

    def _set_marks(self, marks: set[str]) -> None:
        table = self.query_one("#cache-table", FastTable)
        for key in marks ^ self._marked:
            if key in table.rows:
                table.update_cell(key, "mark", MARK if key in marks else "")
        self._marked = set(marks)
        self._show_status()

    @property
    def marked(self) -> set[str]:
        return set(self._marked)

    def action_toggle_auto_refresh(self) -> None:
        self.auto_rescan = not self.auto_rescan
        self._show_status()
        self.notify(f"auto-refresh every {AUTO_REFRESH:g}s" if self.auto_rescan else "auto-refresh off", timeout=3)

    # ------------------------------------------------------------ eviction

    def action_refuse(self, what: str) -> None:
        self.refuse_read_only(what)

    def action_evict_marked(self) -> None:
        if not self._marked:
            self.notify("mark entries with space first", severity="warning")
            return
        self._options(EvictSelection("evict marked", keys=tuple(sorted(self._marked))))

    def action_evict_cap(self) -> None:
        self._options(EvictSelection("evict to cap", to_cap=True))

    def action_evict_invalid(self) -> None:
        self._options(EvictSelection("evict invalid", invalid=True))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Also: the footer's ``f`` only on a terminal wide enough for it (the key works at any width)."""
        allowed = super().check_action(action, parameters)
        if allowed and action == "evict_free" and parameters == ("footer",):
            return self.app.size.width >= FOOTER_FREE_WIDTH
        return allowed

    def on_resize(self) -> None:
        self.refresh_bindings()  # the footer's `f` comes and goes with the width

    def action_evict_free(self, _shown_in: str = "") -> None:
        self._options(EvictSelection("evict to free space", to_free=True))

    def _options(self, selection: EvictSelection) -> None:
        """The eviction dialog (cap, force, live preview) on the scan on screen."""
        if self.refuse_read_only(selection.what):
            return
        if self._scan is None:
            self.notify("no cache scanned: press o to pick a cache root", severity="warning")
            return
        if self._busy:
            self.notify("busy: wait for the running eviction", severity="warning")
            return
        try:
            cap = default_max_gb()
        except FvError as exc:  # a malformed environment value: say so, start from the default
            self.report_error(exc)
            cap = state.DEFAULT_MAX_GB
        self.app.push_screen(EvictScreen(self._scan, selection, cap), self._chosen)

    def _chosen(self, options: EvictOptions | None) -> None:
        if options is None or self.refuse_read_only(options.selection.what):
            return
        root = self.app.state.cache_root
        if not root or self._busy:
            return
        self._busy = True
        self.plan(root, options)

    @work(thread=True, exclusive=True, group="cache-plan", exit_on_error=False)
    def plan(self, root: str, options: EvictOptions) -> None:
        """Rescan, then plan on what is there now: the confirmation shows exactly what executes."""
        with self.failures(EvictionFailed):
            fresh = scan_cache(root, now=state.now())
            self.deliver(EvictionPlanned(options, fresh, plan_for(fresh, options)))

    def on_eviction_planned(self, message: EvictionPlanned) -> None:
        self._busy = False
        self._show_scan(message.scan)
        plan, what = message.plan, message.options.selection.what
        if not plan.evict:
            self.notify(f"{what}: nothing to evict", severity="warning")
            return
        body = confirm_body(plan, message.scan, state.now())
        self.app.push_screen(ConfirmScreen(f"{what.capitalize()}?", body, "Evict"),
                             lambda ok: self._confirmed(plan, ok, what))

    def _confirmed(self, plan: EvictionPlan, ok: bool | None, what: str = "evict") -> None:
        if not ok:
            self.notify("eviction cancelled: nothing deleted")
            return
        if self.refuse_read_only("eviction") or self._busy:
            return
        self._busy = True
        progress = self.query_one("#cache-progress-row", ProgressRow).start("", total=max(len(plan.evict), 1))
        self.evict(plan, progress, console_command(plan, what), self.app.state.journal())

    @work(thread=True, exclusive=True, group="cache-evict", exit_on_error=False)
    def evict(self, plan: EvictionPlan, progress: Progress, command: str, journal: str) -> None:
        """The confirmed plan under the root's evictor lock (not waiting: a busy root is refused), journaled."""
        with self.failures(EvictionFailed):
            done = evict_under_lock(plan.root, lambda: plan, command=command, force=plan.force,
                                    journal_path=journal, progress=progress)
            self.deliver(CacheEvicted(done))

    def on_cache_evicted(self, message: CacheEvicted) -> None:
        self._busy = False
        self.query_one("#cache-progress-row", ProgressRow).stop()
        plan, result = message.plan, message.result
        count = len(result.evicted)
        summary = f"evicted {plural(count, 'entry', 'entries')}, freed {human_bytes(result.freed_bytes)}"
        text = PlainText().append(("✓ " if result.ok else "✗ ") + summary + "\n",
                                  style="bold green" if result.ok else "bold red")
        if plan.free_space is not None:
            before, after = (human_bytes(v) if v is not None else "?" for v in (result.fs_free_before,
                                                                                 result.fs_free_after))
            text.append(f"  filesystem free {before} → {after}; "
                        f"target {human_bytes(plan.free_space.target_bytes)} "
                        f"({free_target_text(plan.free_space.target)}): {result.target_outcome}\n",
                        style="green" if result.target_reached else "bold yellow")
        for entry in result.evicted[:12]:
            text.append(f"  ✓ {entry.key} {human_bytes(entry.bytes):>10}  deleted\n", style="green")
        if len(result.evicted) > 12:
            text.append(f"  … {len(result.evicted) - 12} more deleted\n", style="green")
        for error in result.errors[:12]:
            text.append(f"  ✗ error: {error}\n", style="bold red")
        for warning in message.done.warnings:  # what `cache evict --yes` prints as warning: lines
            text.append(f"  ⚠ {warning}\n", style="bold yellow")
        newly_skipped = result.skipped[len(plan.skipped):]
        now = state.now()
        for skipped in newly_skipped[:12]:
            line = skip_text(skipped.why, None, now, plan.grace_seconds)
            text.append(f"  – {skipped.key}  left in place: {line}\n", style="yellow")
        self.query_one("#cache-result", PlainStatic).update(text)
        self.query_one("#cache-result-scroll").display = True
        if result.ok:
            self.notify(summary)
        else:
            self.notify(f"eviction failed part-way: {summary}; {len(result.errors)} error(s)", severity="error",
                        timeout=10)
            self.app.push_screen(ErrorScreen("Eviction failed part-way", "\n".join(
                [summary, "", *result.errors[:40]])))
        for warning in message.done.warnings:
            self.notify(warning, severity="warning", timeout=15)
        journal = message.done.journal
        if journal is not None and not journal.written:
            self.notify(f"journal {journal.path}: {journal.error}; the eviction itself is done", severity="warning",
                        timeout=10)
        if journal is not None:
            self.app.journal_written()
        self._marked.clear()
        self.refresh_view()

    def on_eviction_failed(self, message: EvictionFailed) -> None:
        self._busy = False
        self.query_one("#cache-progress-row", ProgressRow).stop()
        self.report_error(message.error)
        self.refresh_view()
