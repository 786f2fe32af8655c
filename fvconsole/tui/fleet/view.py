"""View 4: node-local shard caches across a Slurm job (through srun).

Type a job id and/or a node list and the cache root (``{node}`` allowed), scan: every
srun round trip runs in a thread worker, so the UI never blocks. The node table shows
each node's totals (or its error) and Slurm's state of it (one squeue and one sinfo call per
scan: "busy" when a job of the cache's owner runs there); the matrix shows each key's status
and size per node, "busy" on the entries such a job may be using.
Evictions follow the console's one flow: preview on every node → confirm (focus on
Cancel) → execute exactly the previewed per-node plans, with progress → rescan.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.reactive import var
from textual.widgets import Button, Input

from fvconsole.core.cache import INVALID_SELECTS, EvictionSelectors
from fvconsole.core.fleet import compress_hostlist
from fvconsole.core.journal import appender
from fvconsole.core.shared import plural, printable, run_locked
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.fleet import text as ft
from fvconsole.tui.fleet.panels import FleetForm, KeyMatrix, NodeTable
from fvconsole.tui.messages import FleetExecuted, FleetFailed, FleetPreviewed, FleetScanned, FormSubmitted
from fvconsole.tui.modals import ConfirmScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.progress import ProgressRow, ThreadProgress
from fvconsole.tui.widgets.statics import PlainStatic

WRITE_ACTIONS = (
    ("evict_invalid", "i", "Evict invalid",
     f"evict {INVALID_SELECTS} on every node (preview, confirm, run, rescan)"),
    ("evict_key", "e", "Evict key", "evict the key selected in the matrix on every node that holds it"),
    ("evict_cap", "c", "Evict to cap",
     "evict each node down to its cap ($FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB on that node)"),
)


class FleetView(BaseView):
    """Node × key matrix of weight shard caches across Slurm nodes, with fleet eviction.

    State: ``scanned`` (the last aggregated scan, a reactive both tables are bound to); the form
    holds what to scan; the wording is ``tui/fleet/text.py``'s.
    """

    TITLE = "4 Fleet"
    PANES: ClassVar[dict[str, str]] = {"fleet-detail-scroll": "key detail"}
    TABLE = "fleet-matrix"
    write_actions = frozenset(action for action, _key, _label, _help in WRITE_ACTIONS)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "scan", "Scan",
                tooltip="scan the nodes (also Enter in a field): srun `cache ls` on each, in the background"),
        *[Binding(key, action, label, tooltip=help_text) for action, key, label, help_text in WRITE_ACTIONS],
        *[Binding(key, f"refuse('{label.lower()}')", label, show=False) for _a, key, label, _h in WRITE_ACTIONS],
    ]

    scanned: var[Any] = var(None, always_update=True, init=False)

    @classmethod
    def for_state(cls, state: Any, **kwargs: Any) -> FleetView:
        return cls(read_only=state.read_only, cache_root=state.cache_root, **kwargs)

    def __init__(self, read_only: bool = False, cache_root: str | None = None, dispatcher: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._read_only = read_only
        self._dispatcher = dispatcher
        self._busy = False
        self._scanned_once = False
        self._form = FleetForm(cache_root or os.environ.get("FASTVIDEO_WEIGHT_SHARD_CACHE", ""), id="fleet-form")
        self._status = PlainStatic(id="fleet-status", classes="banner")
        self._progress = ProgressRow(id="fleet-progress-row")
        self._detail = PlainStatic(id="fleet-detail")

    @property
    def read_only(self) -> bool:
        return self._read_only or super().read_only

    @property
    def dispatcher(self) -> Any:
        if self._dispatcher is None:
            from fvconsole.core.fleet import SrunDispatcher

            self._dispatcher = SrunDispatcher()
        return self._dispatcher

    @dispatcher.setter
    def dispatcher(self, value: Any) -> None:
        self._dispatcher = value

    @property
    def view_result(self) -> Any:
        """The last aggregated scan (tests and the command palette read it)."""
        return self.scanned

    def compose(self) -> ComposeResult:
        self.nodes = NodeTable(id="fleet-node-table").data_bind(FleetView.scanned)
        self.matrix = KeyMatrix(id="fleet-matrix").data_bind(FleetView.scanned)
        yield self._form
        yield self._status
        yield Input(placeholder="filter keys by key, node or status (Esc closes)", classes="view-filter")
        yield self._progress
        with Vertical(id="fleet-tables"):
            yield self.nodes
            yield self.matrix
        with VerticalScroll(id="fleet-detail-scroll"):
            yield self._detail

    def on_mount(self) -> None:
        self._status.update(self.requirements())

    def requirements(self) -> PlainText:
        """What a scan needs, said before the first one: srun on PATH, a job or nodes, the cache root."""
        options = getattr(self.dispatcher, "options", None)
        srun = getattr(options, "srun", "srun")
        found = shutil.which(srun)
        text = PlainText().append("The Fleet view needs ", style="bold")
        text.append("Slurm's srun on PATH ")
        if found:
            text.append(f"(✓ {found})", style="green")
        else:
            text.append(f"(✗ {srun} not found: run the console where Slurm's commands are, e.g. a login node)",
                        style="bold red")
        text.append(", a job id (its nodes come from squeue) or a node list, and the cache root "
                    "(the same path on every node; {node} is replaced by each node's name). "
                    "Then Scan: ctrl+r or Enter in a field. Nothing runs on the nodes before that.")
        return text

    def focus_main(self) -> None:
        """The matrix once scanned, else Scan (Enter scans): never a field on arrival, where
        ``q``, ``?`` and ``1``-``5`` would type text instead of acting."""
        (self.matrix if self.scanned is not None else self._form.scan_button).focus()

    def offer_cache_root(self, old: str | None, new: str | None) -> None:
        self._form.offer_cache_root(old, new)

    # ------------------------------------------------------------ scanning

    def refresh_view(self) -> None:
        """New paths loaded: rescan, but only once the user has scanned (never srun by surprise)."""
        if self._scanned_once:
            self.action_scan()

    def refresh_requested(self) -> None:
        """`r`: rescan the nodes (the first scan is ctrl+r / Enter / Scan, after filling the form)."""
        if self._scanned_once:
            self.action_scan()
        else:
            self.notify("nothing scanned yet: give a job id or node list and the cache root, then ctrl+r",
                        severity="warning")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "fleet-scan":
            event.stop()
            self.action_scan()

    def on_form_submitted(self, message: FormSubmitted) -> None:
        self.action_scan()

    def action_scan(self) -> None:
        job, nodes, root = self._form.values
        if not job and not nodes:
            self.notify("give a job id or a node list", severity="warning")
            return
        if not root:
            self.notify("give the cache root (it may contain {node})", severity="warning")
            return
        if self._busy:
            self.notify("busy: wait for the running eviction", severity="warning")
            return
        self._scanned_once = True
        self._status.update(PlainText(f"scanning {nodes or 'job ' + str(job)} …", style="italic"))
        self.run_scan(job, nodes, root, self._progress.start("scanning"))

    @work(thread=True, exclusive=True, group="fleet-scan", exit_on_error=False)
    def run_scan(self, job: str | None, nodes: str | None, root: str, progress: ThreadProgress) -> None:
        dispatcher = self.dispatcher
        with self.failures(FleetFailed):
            selection = dispatcher.select(nodes, job)
            self.deliver(FleetScanned(dispatcher.ls(selection, root, progress)))

    def on_fleet_failed(self, message: FleetFailed) -> None:
        self._busy = False
        self._progress.stop()
        self.report_error(message.error)
        self._status.update(PlainText(f"✗ {describe_error(message.error)}", style="bold red"))

    def on_fleet_scanned(self, message: FleetScanned) -> None:
        view = message.view
        self._progress.stop()
        self._status.update(ft.scan_status(view))
        self.scanned = view
        self._detail.update(ft.findings_text(view))
        focused = self.app.focused
        if focused is None or (self in focused.ancestors_with_self and not focused.has_class("view-filter")):
            self.matrix.focus()  # so i / e / c act on the result

    def apply_filter(self, text: str) -> None:
        self.matrix.filter_text = text

    # ------------------------------------------------------------ eviction

    def action_refuse(self, what: str) -> None:
        self.refuse_read_only(what)

    def action_evict_invalid(self) -> None:
        self._preview(f"evict {INVALID_SELECTS}", EvictionSelectors(invalid=True))

    def action_evict_cap(self) -> None:
        self._preview("evict each node to its cap", EvictionSelectors(max_gb_from_env=True))

    def action_evict_key(self) -> None:
        key = self.matrix.selected
        if key is None:
            self.notify("select a key in the matrix first", severity="warning")
            return
        self._preview(printable(f"evict {key} on every node"), EvictionSelectors(keys=(key,)))

    def _preview(self, what: str, selectors: EvictionSelectors) -> None:
        if self.refuse_read_only(what):
            return
        if self.scanned is None:
            self.notify("scan first (ctrl+r)", severity="warning")
            return
        if self._busy:
            self.notify("busy: wait for the running eviction", severity="warning")
            return
        _job, _nodes, root = self._form.values
        self.run_preview(what, root, self.scanned.selection, selectors, self._progress.start("planning"))

    @work(thread=True, exclusive=True, group="fleet-plan", exit_on_error=False)
    def run_preview(self, what: str, root: str, selection: Any, selectors: EvictionSelectors,
                    progress: ThreadProgress) -> None:
        with self.failures(FleetFailed):
            self.deliver(FleetPreviewed(what, root, self.dispatcher.preview(selection, root, selectors, progress)))

    def on_fleet_previewed(self, message: FleetPreviewed) -> None:
        what, root, preview = message.what, message.root, message.plan
        self._progress.stop()
        failed = [o for o in preview.outcomes if not o.ok]
        self._detail.update(ft.preview_text(what, preview))
        if not any(preview.node_keys.values()):
            self.notify(f"{what}: nothing to evict" + (f" ({plural(len(failed), 'node')} failed)" if failed else ""),
                        severity="warning")
            return
        self.app.push_screen(ConfirmScreen(f"{what.capitalize()}?", ft.confirm_body(root, preview), "Evict"),
                             lambda ok: self._confirmed(preview, ok, what))

    def _confirmed(self, plan: Any, ok: bool | None, what: str = "evict") -> None:
        if not ok:
            self.notify("fleet eviction cancelled: nothing deleted")
            return
        if self.refuse_read_only("eviction"):
            return
        self._busy = True
        command = f"fvconsole console: fleet {what} in {plan.root} on {compress_hostlist(plan.selection.nodes)}"
        self.run_execute(plan, self._progress.start("evicting"), command, self.app.state.journal())

    @work(thread=True, exclusive=True, group="fleet-evict", exit_on_error=False)
    def run_execute(self, plan: Any, progress: ThreadProgress, command: str, journal: str) -> None:
        """The confirmed per-node plans through the one runner, journaled as ``fleet cache evict --yes`` is."""
        with self.failures(FleetFailed):
            run = run_locked(self.dispatcher.eviction(plan, command), journal=appender(journal), progress=progress)
            self.deliver(FleetExecuted(run.result, run.journal))

    def on_fleet_executed(self, message: FleetExecuted) -> None:
        result = message.result
        self._busy = False
        self._progress.stop()
        failed = [o for o in result.outcomes if not o.ok]
        summary = ft.executed_summary(result)
        self._detail.update(ft.executed_text(result))
        if failed:
            self.notify(f"{summary}; {plural(len(failed), 'node')} failed: {compress_hostlist(o.node for o in failed)}",
                        severity="error", timeout=10)
        else:
            self.notify(summary)
        journal = message.journal
        if journal is not None and not journal.written:
            self.notify(f"journal {journal.path}: {journal.error}; the eviction itself is done", severity="warning",
                        timeout=10)
        if journal is not None:
            self.app.journal_written()
        self.action_scan()
