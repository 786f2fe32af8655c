"""View 3: the weight shard cache, least recently used first, with safe eviction.

The view holds the scan, the marks and auto-refresh as reactive attributes, composes the head,
the table, the detail pane and the eviction report, and binds the keys. The eviction (options
and live preview → rescan and plan → confirm → execute under the root's evictor lock → rescan)
is ``tui/cache/eviction.py``'s, the verify's worker and outcome ``tui/cache/verify.py``'s; the
wording ``tui/cache/text.py``'s. The view rescans by itself every few seconds (``a`` toggles
it), so entries a running job is writing move on screen without ``r``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical, VerticalScroll
from textual.reactive import var
from textual.widgets import Input

from fvconsole.core.cache import (
    INVALID_SELECTS,
    CacheEntry,
    CacheEntryDetail,
    CacheScan,
    EntryVerification,
    cache_entry_detail,
    cap_bytes,
    gc_sort_key,
    scan_cache,
)
from fvconsole.core.shared import plural
from fvconsole.tui import state
from fvconsole.tui.base import BaseView
from fvconsole.tui.cache import text as cache_text
from fvconsole.tui.cache.eviction import CacheEviction
from fvconsole.tui.cache.panels import CacheTable, EvictionReport
from fvconsole.tui.cache.verify import EntryVerify
from fvconsole.tui.messages import (
    CacheDetailRead,
    CacheScanFailed,
    CacheScanned,
    EvictSelection,
)
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.progress import ProgressRow, UsageBar
from fvconsole.tui.widgets.statics import FitStatic, PlainStatic
from fvconsole.tui.widgets.tables import FastTable

#: Seconds between automatic rescans (and age updates).
AUTO_REFRESH = 5.0
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


def lru_order(entries: Iterable[CacheEntry]) -> list[CacheEntry]:
    """FastVideo's GC order: last used (manifest mtime, 0 if none), then size, then path."""
    return sorted(entries, key=gc_sort_key)


class CacheView(CacheEviction, EntryVerify, BaseView):
    """Cache entries, usage bar, marks, entry detail, eviction.

    State, as reactive attributes: ``scanned`` (the scan on screen), ``marked`` (keys, bound to
    the table) and ``auto_rescan``; their watchers draw the head, the table and the status
    line. The wording is ``tui/cache/text.py``'s; the table and the eviction report are
    ``tui/cache/panels.py``'s widgets; the eviction's steps after its key are
    ``tui/cache/eviction.py``'s (:class:`~fvconsole.tui.cache.eviction.CacheEviction`), the verify's
    worker and outcome ``tui/cache/verify.py``'s (:class:`~fvconsole.tui.cache.verify.EntryVerify`).
    """

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

    scanned: var[CacheScan | None] = var(None, always_update=True, init=False)
    marked: var[frozenset[str]] = var(frozenset(), init=False)
    auto_rescan: var[bool] = var(True, init=False)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._entries: list[CacheEntry] = []
        #: key -> (the manifest mtime it was verified at, the verdict): shown while that manifest stays.
        self._verified: dict[str, tuple[int | None, EntryVerification]] = {}
        self._busy = False
        self._scanning = False
        self._root_line = FitStatic(id="cache-root-line")
        self._usage = UsageBar(id="cache-usage")
        self._status = PlainStatic(id="cache-status")
        self._progress = ProgressRow(id="cache-progress-row")
        self._detail = FitStatic("Select an entry.", id="cache-detail")
        self._report = EvictionReport(id="cache-result-scroll")

    def compose(self) -> ComposeResult:
        self.table = CacheTable(id="cache-table").data_bind(CacheView.marked)
        with Vertical(id="cache-head"):
            yield self._root_line
            yield self._usage
            yield self._status
        yield Input(placeholder="filter entries by key or status (Esc closes)", classes="view-filter")
        yield self._progress
        with Container(id="cache-main", classes="split"):
            yield self.table
            with VerticalScroll(id="cache-detail-scroll", classes="detail"):
                yield self._detail
        yield self._report

    def on_mount(self) -> None:
        self.set_interval(AUTO_REFRESH, self._tick)
        self._show_status()

    # ------------------------------------------------------------ state down

    def watch_scanned(self, scan: CacheScan | None) -> None:
        self._entries = lru_order(scan.entries) if scan is not None else []
        if scan is None:
            self._usage.clear()
        else:
            fs_free, fs_total = state.free_space(scan)
            cap = int(cap_bytes(state.cache_cap_gb()))
            self._usage.show_usage(sum(e.bytes for e in self._entries), cap, fs_free, fs_total)
            entries = self._entries
            self._root_line.show(lambda width: cache_text.root_text(scan, entries, width))
        self.table.entries = tuple(self._entries)
        self.marked &= {e.key for e in self._entries}
        self._shown_changed()

    def watch_marked(self) -> None:
        self._show_status()

    def watch_auto_rescan(self) -> None:
        self._show_status()

    def _refresh_every(self) -> float | None:
        return AUTO_REFRESH if self.auto_rescan else None

    def _show_status(self) -> None:
        """Marks (count and size), filter and auto-refresh, always in view."""
        marked = [e for e in self._entries if e.key in self.marked]
        self._status.update(cache_text.status_text(marked, len(self.table.shown), len(self._entries),
                                                   self.filter_text, self.table.sort_column, self._refresh_every()))

    def _shown_changed(self) -> None:
        """The table refilled: an empty one says why in the detail pane; the status line counts."""
        if not self.table.shown:
            text = self.table.filter_text
            self._detail.update(f"No entry matches '{text}'." if text and self._entries else "No entries.")
        self._show_status()

    # ------------------------------------------------------------ scanning

    def refresh_view(self) -> None:
        root = self.app.state.cache_root
        if not root:
            self._root_line.update(PlainText("No shard cache root: press o to pick one (or pass --cache-root / "
                                             f"set ${state.ENV_ROOT}).", style="bold yellow"))
            self.scanned = None
            return
        if self.scanned is None or self.scanned.root != root:
            self._root_line.update(PlainText(f"scanning {root} …", style="italic"))
        self._scanning = True
        self.scan(root)

    @work(thread=True, exclusive=True, group="cache-scan", exit_on_error=False)
    def scan(self, root: str) -> None:
        with self.failures(CacheScanFailed):
            self.deliver(CacheScanned(scan_cache(root, now=state.now())))

    def on_cache_scan_failed(self, message: CacheScanFailed) -> None:
        self._scanning = False
        self.report_error(message.error)
        self._root_line.update(PlainText(f"cannot scan: {message.error}", style="bold red"))
        self.scanned = None

    def on_cache_scanned(self, message: CacheScanned) -> None:
        self._scanning = False
        self.scanned = message.scan
        self._refresh_detail()

    def _tick(self) -> None:
        """Every few seconds: rescan (auto-refresh), or at least move the ages on."""
        if (self.auto_rescan and not self._busy and not self._scanning and self.app.state.cache_root
                and self.screen is self.app.screen):
            self.refresh_view()
        else:
            self.table.tick_ages()
            self._refresh_detail()

    def apply_filter(self, text: str) -> None:
        self.table.filter_text = text
        self._shown_changed()

    def on_fast_table_sorted(self) -> None:
        self._shown_changed()  # the table refilled itself; the status line says the order

    # ------------------------------------------------------------ selection + detail

    def entry(self, key: str | None) -> CacheEntry | None:
        return self.scanned.get(key) if self.scanned is not None and key is not None else None

    def _refresh_detail(self) -> None:
        """Show the selected entry as the newest scan has it (ages and explanations move on)."""
        entry = self.entry(self.table.selected)
        if entry is not None:
            self.read_detail(entry)

    def on_strip_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        entry = self.entry(self.table.selected)
        if event.row_key is None or entry is None:
            return
        scan, every = self.scanned, self._refresh_every()
        # What the scan knows, at once, in the height the pane has: the entry's files follow
        # from the worker (as tall again when entries have one shape: no layout per move).
        self._detail.show(lambda width: cache_text.entry_text(entry, scan, every, width), hold=True)
        self.read_detail(entry)

    @work(thread=True, exclusive=True, group="cache-detail", exit_on_error=False)
    def read_detail(self, entry: CacheEntry) -> None:
        with self.failures():
            self.deliver(CacheDetailRead(entry, cache_entry_detail(entry)))

    def on_cache_detail_read(self, message: CacheDetailRead) -> None:
        entry, detail = message.entry, message.detail
        if entry.key == self.table.selected:
            self._show_detail(entry, detail)

    def _show_detail(self, entry: CacheEntry, detail: CacheEntryDetail) -> None:
        stamp, result = self._verified.get(entry.key, (None, None))
        verified = result if result is not None and stamp == entry.manifest_mtime_ns else None
        scan, every = self.scanned, self._refresh_every()
        self._detail.show(lambda width: cache_text.detail_text(entry, detail, scan, every, verified, width))

    # ------------------------------------------------------------ verify (its worker and outcome: EntryVerify)

    def action_verify(self) -> None:
        """Verify the marked entries, or the one under the cursor, in a worker (read-only: allowed always)."""
        selected = self.table.selected
        keys = sorted(self.marked) or ([selected] if self.entry(selected) is not None else [])
        entries = [e for e in (self.entry(k) for k in keys) if e is not None]
        if not entries:
            self.notify("select or mark an entry first", severity="warning")
            return
        self.notify(f"verifying {plural(len(entries), 'entry', 'entries')} …", timeout=3)
        self.verify(tuple(entries))

    # ------------------------------------------------------------ marking

    def action_toggle_mark(self) -> None:
        table = self.table
        key = table.key_under_cursor()
        if key is None:
            return
        self.marked ^= {key}
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)

    def action_mark_all(self) -> None:
        self.marked |= {e.key for e in self.table.shown}

    def action_invert_marks(self) -> None:
        shown = {e.key for e in self.table.shown}
        self.marked = (self.marked - shown) | (shown - self.marked)

    def action_clear_marks(self) -> None:
        self.marked = frozenset()

    def action_toggle_auto_refresh(self) -> None:
        self.auto_rescan = not self.auto_rescan
        self.notify(f"auto-refresh every {AUTO_REFRESH:g}s" if self.auto_rescan else "auto-refresh off", timeout=3)

    # ------------------------------------------------------------ eviction (its steps: CacheEviction)

    def action_refuse(self, what: str) -> None:
        self.refuse_read_only(what)

    def action_evict_marked(self) -> None:
        if not self.marked:
            self.notify("mark entries with space first", severity="warning")
            return
        self.open_eviction(EvictSelection("evict marked", keys=tuple(sorted(self.marked))))

    def action_evict_cap(self) -> None:
        self.open_eviction(EvictSelection("evict to cap", to_cap=True))

    def action_evict_invalid(self) -> None:
        self.open_eviction(EvictSelection("evict invalid", invalid=True))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Also: the footer's ``f`` only on a terminal wide enough for it (the key works at any width)."""
        allowed = super().check_action(action, parameters)
        if allowed and action == "evict_free" and parameters == ("footer",):
            return self.app.size.width >= FOOTER_FREE_WIDTH
        return allowed

    def on_resize(self) -> None:
        self.refresh_bindings()  # the footer's `f` comes and goes with the width

    def action_evict_free(self, _shown_in: str = "") -> None:
        self.open_eviction(EvictSelection("evict to free space", to_free=True))
