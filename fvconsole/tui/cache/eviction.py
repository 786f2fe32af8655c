"""View 3's eviction: the dialog on the scan on screen, the plan on a fresh scan, the confirmation,
the locked execution, the report.

Why a module of its own: the cache view scans, lists, marks and explains; this mixin adds the
write it offers, in three steps. Options and live preview (cap, force, free space: the dialog,
``tui/cache/evict_dialog.py``) → rescan and plan in a worker, so the confirmation (focus on Cancel)
shows exactly what executes → execute in a worker → rescan. Execution is
the one runner (``run_locked``) with an ``EvictionOperation``, as for ``fvconsole cache evict --yes``: the root's
evictor lock is held while the confirmed plan runs (another evictor on the root: refused,
nothing removed) and the journal gets its line. The view keeps its state (``scanned``,
``marked``, ``_busy``: an eviction is being planned or run), the progress row and the report
pane it composes, and its keys (``e`` ``c`` ``i`` ``f``), whose actions call
:meth:`CacheEviction.open_eviction`.
"""

from __future__ import annotations

from textual import work

from fvconsole.core.cache import (
    CacheScan,
    EvictionOperation,
    EvictionPlan,
    LockedEviction,
    default_max_gb,
    scan_cache,
)
from fvconsole.core.journal import appender
from fvconsole.core.shared import FvError, Progress, human_bytes, plural, run_locked
from fvconsole.tui import state
from fvconsole.tui.cache import text as cache_text
from fvconsole.tui.cache.evict_dialog import EvictScreen, confirm_body, plan_for
from fvconsole.tui.cache.panels import EvictionReport
from fvconsole.tui.messages import CacheEvicted, EvictionFailed, EvictionPlanned, EvictOptions, EvictSelection
from fvconsole.tui.modals import ConfirmScreen, ErrorScreen
from fvconsole.tui.widgets.progress import ProgressRow
from fvconsole.tui.wording import free_target_text


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


class CacheEviction:
    """The eviction of :class:`~fvconsole.tui.cache.view.CacheView`, from its dialog to its report."""

    scanned: CacheScan | None
    marked: frozenset[str]
    _busy: bool
    _progress: ProgressRow
    _report: EvictionReport

    def open_eviction(self, selection: EvictSelection) -> None:
        """The eviction dialog (cap, force, live preview) on the scan on screen."""
        if self.refuse_read_only(selection.what):
            return
        if self.scanned is None:
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
        self.app.push_screen(EvictScreen(self.scanned, selection, cap), self._chosen)

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
        """Rescan, then plan on what is there now: the confirmation shows exactly what executes. A free-space
        target is planned on the free space the console shows, as the dialog's preview is (``state.shown_scan``:
        statvfs's figures, or the frozen ones of screenshots and tests), so the two never disagree."""
        with self.failures(EvictionFailed):
            fresh = scan_cache(root, now=state.now())
            self.deliver(EvictionPlanned(options, fresh, plan_for(state.shown_scan(fresh), options)))

    def on_eviction_planned(self, message: EvictionPlanned) -> None:
        self._busy = False
        self.scanned = message.scan
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
        progress = self._progress.start("", total=max(len(plan.evict), 1))
        self.evict(plan, progress, console_command(plan, what), self.app.state.journal())

    @work(thread=True, exclusive=True, group="cache-evict", exit_on_error=False)
    def evict(self, plan: EvictionPlan, progress: Progress, command: str, journal: str) -> None:
        """The confirmed plan under the root's evictor lock (not waiting: a busy root is refused), journaled."""
        with self.failures(EvictionFailed):
            operation = EvictionOperation(plan.root, lambda: plan, command=command, force=plan.force, progress=progress)
            self.deliver(CacheEvicted(LockedEviction.of(run_locked(operation, journal=appender(journal)))))

    def on_cache_evicted(self, message: CacheEvicted) -> None:
        self._busy = False
        self._progress.stop()
        result = message.result
        summary = result.summary
        self._report.report = cache_text.evicted_text(message.done, state.now())
        if result.ok:
            self.notify(summary)
        else:
            self.notify(f"eviction failed part-way: {summary}; {plural(len(result.errors), 'error')}", severity="error",
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
        self.marked = frozenset()
        self.refresh_view()

    def on_eviction_failed(self, message: EvictionFailed) -> None:
        self._busy = False
        self._progress.stop()
        self.report_error(message.error)
        self.refresh_view()
