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

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, DataTable, Input, Label

from fvconsole.core.cache import INVALID_SELECTS, RECLAIMABLE_SUM, EvictionSelectors
from fvconsole.core.fleet import compress_hostlist
from fvconsole.core.shared import WAIT, elided, human_bytes, plural, printable
from fvconsole.tui import state
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.messages import FleetExecuted, FleetFailed, FleetPreviewed, FleetScanned
from fvconsole.tui.modals import ConfirmScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets import FastTable, PathInput, PlainStatic, ProgressRow, ThreadProgress
from fvconsole.tui.wording import REMEDIES, reason_text

STATUS_STYLE = {"complete": "green", "partial": "cyan", "incomplete": "yellow", "empty": "yellow", "invalid": "bold red"}
#: Node columns shown in the matrix; more nodes are summarised in the last column.
MAX_NODE_COLUMNS = 12
WRITE_ACTIONS = (
    ("evict_invalid", "i", "Evict invalid",
     f"evict {INVALID_SELECTS} on every node (preview, confirm, run, rescan)"),
    ("evict_key", "e", "Evict key", "evict the key selected in the matrix on every node that holds it"),
    ("evict_cap", "c", "Evict to cap",
     "evict each node down to its cap ($FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB on that node)"),
)
NODE_COLUMNS = (("node", "node", 12), ("slurm", "slurm", 16), ("entries", "entries", 9), ("size", "size", 11), ("reclaimable", "reclaimable", 13),
                ("over cap", "over_cap", 10), ("free", "free", 11), ("status or error", "statuses", 60))


#: The remedies the fleet view can say what to do for (it has no force or lock controls).
FLEET_REMEDIES = {WAIT: REMEDIES[WAIT]}


def node_error(failed: Any) -> str:
    """Why a node failed: its refusal worded with the console's words when the node sent it as data."""
    reason = getattr(failed, "reason", None)
    return reason_text(reason, FLEET_REMEDIES) if reason is not None else str(failed.error)


def _plain(value: str, style: str = "") -> Text:
    """Untrusted text (node names, keys, statuses, errors from nodes) as one line of plain text:
    never markup, control characters (newlines too) shown escaped."""
    return PlainText(printable(value), style=style)


class FleetView(BaseView):
    """Node × key matrix of weight shard caches across Slurm nodes, with fleet eviction."""

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

    @classmethod
    def for_state(cls, state: Any, **kwargs: Any) -> FleetView:
        return cls(read_only=state.read_only, cache_root=state.cache_root, **kwargs)

    def __init__(self, read_only: bool = False, cache_root: str | None = None, dispatcher: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._read_only = read_only
        self._initial_root = cache_root or os.environ.get("FASTVIDEO_WEIGHT_SHARD_CACHE", "")
        self._dispatcher = dispatcher
        self._view: Any = None  # core FleetCacheView of the last scan
        self._selected_key: str | None = None
        self._busy = False
        self._scanned_once = False

    # ------------------------------------------------------------ layout

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
        return self._view

    def compose(self) -> ComposeResult:
        with Vertical(id="fleet-form"):
            with Horizontal(classes="form-row", id="fleet-select"):
                yield Label("job")
                yield Input(value=os.environ.get("SLURM_JOB_ID", ""), placeholder="e.g. 1234", id="fleet-job",
                            compact=True)
                yield Label("nodes")
                yield Input(placeholder="e.g. gpu[001-016]", id="fleet-nodes", compact=True)
            with Horizontal(classes="form-row", id="fleet-root-row"):
                yield Label("cache root")
                yield PathInput(self._initial_root, placeholder="the same path on every node; {node} allowed",
                                id="fleet-root", compact=True)
                yield Button("Scan ^R", id="fleet-scan", variant="primary", compact=True)
        yield PlainStatic(id="fleet-status", classes="banner")
        yield Input(placeholder="filter keys by key, node or status (Esc closes)", classes="view-filter")
        yield ProgressRow(id="fleet-progress-row")
        with Vertical(id="fleet-tables"):
            yield FastTable(id="fleet-node-table", cursor_type="row", zebra_stripes=True, flex="statuses",
                            shrink={"statuses": 16, "node": 10, "slurm": 8}, optional=("over_cap", "entries"),
                            sortable=[key for _l, key, _w in NODE_COLUMNS if key != "statuses"])
            yield FastTable(id="fleet-matrix", cursor_type="row", zebra_stripes=True, sortable=("key", "size"))
        with VerticalScroll(id="fleet-detail-scroll"):
            yield PlainStatic(id="fleet-detail")

    def on_mount(self) -> None:
        table = self.query_one("#fleet-node-table", FastTable)
        for label, key, width in NODE_COLUMNS:
            table.add_column(label, key=key, width=width)
        self._status(self.requirements())

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
        target = "#fleet-matrix" if self._view is not None else "#fleet-job"
        self.query_one(target).focus()

    def offer_cache_root(self, old: str | None, new: str | None) -> None:
        """A cache root picked with `o`: use it here too, unless the field was edited (e.g. a {node} root)."""
        box = self.query_one("#fleet-root", Input)
        if new and box.value.strip() in ("", old or "", self._initial_root):
            box.value = new
            self._initial_root = new

    # ------------------------------------------------------------ scanning

    def _form(self) -> tuple[str | None, str | None, str]:
        job = self.query_one("#fleet-job", Input).value.strip() or None
        nodes = self.query_one("#fleet-nodes", Input).value.strip() or None
        root = self.query_one("#fleet-root", Input).value.strip()
        return job, nodes, root

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

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id in ("fleet-job", "fleet-nodes", "fleet-root"):
            event.stop()
            self.action_scan()
            return
        super().on_input_submitted(event)

    def action_scan(self) -> None:
        job, nodes, root = self._form()
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
        self._status(PlainText(f"scanning {nodes or 'job ' + str(job)} …", style="italic"))
        self.run_scan(job, nodes, root, self._start_progress("scanning"))

    @work(thread=True, exclusive=True, group="fleet-scan", exit_on_error=False)
    def run_scan(self, job: str | None, nodes: str | None, root: str, progress: ThreadProgress) -> None:
        dispatcher = self.dispatcher
        with self.failures(FleetFailed):
            selection = dispatcher.select(nodes, job)
            self.deliver(FleetScanned(dispatcher.ls(selection, root, progress)))

    def on_fleet_failed(self, message: FleetFailed) -> None:
        self._busy = False
        self._stop_progress()
        self.report_error(message.error)
        self._status(PlainText(f"✗ {describe_error(message.error)}", style="bold red"))

    def on_fleet_scanned(self, message: FleetScanned) -> None:
        view = message.view
        self._stop_progress()
        self._view = view
        failed = [n for n in view.nodes if not n.ok]
        text = PlainText().append(compress_hostlist(view.selection.nodes), style="bold")
        if view.selection.job_id:
            text.append(f" (job {view.selection.job_id})")
        text.append(f" · {plural(len(view.nodes), 'node')}, {plural(len(view.keys), 'key')}, "
                    f"{human_bytes(view.total_bytes)} fleet-wide")
        if failed:
            text.append(f" · {len(failed)} failed: {compress_hostlist(n.node for n in failed)}", style="bold red")
        self._status(text)
        self._fill_nodes(view)
        self.apply_filter(self.filter_text)
        self._show_findings(view)
        focused = self.app.focused
        if focused is None or (self in focused.ancestors_with_self and not focused.has_class("view-filter")):
            self.query_one("#fleet-matrix", DataTable).focus()  # so i / e / c act on the result

    NODE_SORT_KEYS: ClassVar[dict[str, Any]] = {
        "node": lambda n: n.node,
        "slurm": lambda n: n.node,  # replaced per scan by the node's Slurm state (see _slurm_sort)
        "entries": lambda n: n.entries if n.ok else None,
        "size": lambda n: n.total_bytes if n.ok else None,
        "reclaimable": lambda n: n.reclaimable_bytes if n.ok else None,
        "over_cap": lambda n: n.over_cap_bytes if n.ok else None,
        "free": lambda n: n.fs_free if n.ok else None,
    }

    @staticmethod
    def _slurm_cell(view: Any, node: str) -> Text:
        """sinfo's state of the node ("?": unknown), "busy" when a job of the cache's owner runs there."""
        if view.slurm is None:
            return Text("-", style="grey50")
        found = view.slurm.get(node)
        state = (found.state if found is not None else None) or "?"
        if view.node_busy(node):
            return _plain(f"{state} · busy", "bold yellow")
        return _plain(state, "grey50" if state == "?" else "")

    def _fill_nodes(self, view: Any) -> None:
        table = self.query_one("#fleet-node-table", FastTable)
        table.clear()

        def slurm_sort(n: Any) -> Any:
            found = view.slurm.get(n.node) if view.slurm is not None else None
            return (not view.node_busy(n.node), (found.state if found else None) or "~", n.node)

        for n in table.ordered(view.nodes, {**self.NODE_SORT_KEYS, "slurm": slurm_sort}):
            if not n.ok:
                table.add_row(_plain(n.node), self._slurm_cell(view, n.node), "-", "-", "-", "-", "-",
                              _plain(f"error: {node_error(n)}", "bold red"), key=n.node)
                continue
            statuses = PlainText()
            for i, (status, count) in enumerate(n.statuses):
                statuses.append(("" if i == 0 else ", ") + f"{count} {printable(status)}",
                                style=STATUS_STYLE.get(status, ""))
            if n.in_use:
                statuses.append(f"; {n.in_use} in use", style="bold yellow")
            busy_keys = view.busy.get(n.node, ((), ()))[1]
            if busy_keys:
                count = len(busy_keys)
                statuses.append(f"; node busy ({plural(count, 'entry', 'entries')})", style="bold yellow")
            table.add_row(_plain(n.node), self._slurm_cell(view, n.node), str(n.entries), human_bytes(n.total_bytes), human_bytes(n.reclaimable_bytes),
                          human_bytes(n.over_cap_bytes) if n.over_cap_bytes is not None else "-",
                          human_bytes(state.shown_free(n.fs_free)), statuses or "empty", key=n.node)

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        if self._view is None:
            return
        if event.table.id == "fleet-node-table":
            self._fill_nodes(self._view)
        else:
            self.apply_filter(self.filter_text)

    def _matrix_nodes(self) -> list[str]:
        return [n.node for n in self._view.nodes][:MAX_NODE_COLUMNS] if self._view is not None else []

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#fleet-matrix", FastTable)
        table.clear(columns=True)
        if self._view is None:
            return
        shown = self._matrix_nodes()
        table.add_column("key", key="key", width=16)
        table.add_column("size", key="size", width=10)
        for node in shown:
            busy = node in self._view.busy
            table.add_column(_plain(f"{node} (busy)" if busy else node, "bold yellow" if busy else ""),
                             key=f"node:{node}", width=max(len(node), 20) + (7 if busy else 0))
        hidden = len(self._view.nodes) - len(shown)
        if hidden:
            table.add_column(f"+{hidden} nodes", key="more", width=30)
        order = {"key": lambda r: r.key, "size": lambda r: r.total_bytes}
        for row in table.ordered(self._view.keys, order):
            statuses = dict(row.statuses)
            sizes = dict(row.sizes)
            haystack = f"{row.key} " + " ".join(f"{n} {s}" for n, s in row.statuses)
            if text and text not in haystack.lower():
                continue
            cells: list[Any] = [_plain(row.key), human_bytes(row.total_bytes)]
            for node in shown:
                status = statuses.get(node)
                if not status:
                    cells.append(Text("—", style="grey50"))
                    continue
                cell = _plain(f"{status} {human_bytes(sizes[node])}", STATUS_STYLE.get(status, ""))
                if self._view.entry_busy(node, row.key):
                    cell.append(" busy", style="bold yellow")
                cells.append(cell)
            if hidden:
                rest = [(n, s) for n, s in row.statuses if n not in set(shown)]
                by_status: dict[str, list[str]] = {}
                for n, s in rest:
                    by_status.setdefault(s, []).append(n)
                cells.append(_plain("; ".join(f"{s} {compress_hostlist(ns)}" for s, ns in sorted(by_status.items()))))
            table.add_row(*cells, key=row.key)
        if self._selected_key is not None and self._selected_key in table.rows:
            table.move_cursor(row=table.get_row_index(self._selected_key))
        table._mark_sorted()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "fleet-matrix" and event.row_key is not None:
            self._selected_key = event.row_key.value

    @staticmethod
    def slurm_text(view: Any) -> PlainText:
        """Slurm's view of the scanned nodes: the jobs on them (the cache owners' first), or why it is unknown."""
        text = PlainText()
        state = view.slurm
        if state is None:
            return text
        if state.note:
            text.append(printable(state.note) + "\n", style="yellow")
        busy_ids = {j.job_id for jobs, _keys in view.busy.values() for j in jobs}
        wanted = set(view.selection.nodes)
        jobs = sorted(state.jobs, key=lambda j: j.job_id not in busy_ids)
        for job in jobs[:8]:
            nodes = compress_hostlist(n for n in job.nodes if n in wanted)
            line = printable(f"{job.job_id} {job.user} ({job.name}) {job.state.lower()} on {nodes}")
            if job.job_id in busy_ids:
                text.append("⚑ node busy: ", style="bold yellow").append(
                    f"job {line}, the cache owner's: entries there may be in use by it\n")
            else:
                text.append(f"  job {line}\n")
        if len(jobs) > 8:
            text.append(f"  … {len(jobs) - 8} more jobs\n")
        for problem in state.problems:
            text.append(printable(problem) + "\n", style="yellow")
        return text

    def _show_findings(self, view: Any) -> None:
        text = self.slurm_text(view)
        for finding in view.findings[:8]:
            text.append("⚠ ", style="yellow").append(printable(finding.message) + "\n")
        if len(view.findings) > 8:
            text.append(f"… {len(view.findings) - 8} more findings\n", style="yellow")
        for n in view.nodes:
            if not n.ok:
                text.append(printable(f"✗ {n.node}: {node_error(n)}") + "\n", style="bold red")
        if not text.plain:
            text.append(f"No cross-node findings. RECLAIMABLE = {RECLAIMABLE_SUM} (press i to evict them).",
                        style="italic")
        self.query_one("#fleet-detail", PlainStatic).update(text)

    # ------------------------------------------------------------ eviction

    def action_refuse(self, what: str) -> None:
        self.refuse_read_only(what)

    def action_evict_invalid(self) -> None:
        self._preview(f"evict {INVALID_SELECTS}", EvictionSelectors(invalid=True))

    def action_evict_cap(self) -> None:
        self._preview("evict each node to its cap", EvictionSelectors(max_gb_from_env=True))

    def action_evict_key(self) -> None:
        if self._selected_key is None:
            self.notify("select a key in the matrix first", severity="warning")
            return
        self._preview(printable(f"evict {self._selected_key} on every node"),
                      EvictionSelectors(keys=(self._selected_key,)))

    def _preview(self, what: str, selectors: EvictionSelectors) -> None:
        if self.refuse_read_only(what):
            return
        if self._view is None:
            self.notify("scan first (ctrl+r)", severity="warning")
            return
        if self._busy:
            self.notify("busy: wait for the running eviction", severity="warning")
            return
        _job, _nodes, root = self._form()
        self.run_preview(what, root, self._view.selection, list(selectors.argv()), self._start_progress("planning"))

    @work(thread=True, exclusive=True, group="fleet-plan", exit_on_error=False)
    def run_preview(self, what: str, root: str, selection: Any, selectors: list[str], progress: ThreadProgress) -> None:
        with self.failures(FleetFailed):
            self.deliver(FleetPreviewed(what, root, self.dispatcher.preview(selection, root, selectors, progress)))

    def on_fleet_previewed(self, message: FleetPreviewed) -> None:
        what, root, preview = message.what, message.root, message.plan
        self._stop_progress()
        plans = preview.node_keys
        failed = [o for o in preview.outcomes if not o.ok]
        self._show_preview(what, preview)
        if not any(plans.values()):
            self.notify(f"{what}: nothing to evict" + (f" ({len(failed)} node(s) failed)" if failed else ""),
                        severity="warning")
            return
        busy_nodes = [n for n, keys in plans.items() if keys]
        body = [f"Delete cache entries on {plural(len(busy_nodes), 'node')} "
                f"({compress_hostlist(busy_nodes)}) under {printable(root)}, "
                f"freeing {human_bytes(preview.freed_bytes)}:"]
        rows = [o for o in preview.outcomes if o.ok and plans.get(o.node)]
        body += elided(rows, self._node_line, lambda n: f"  … {n} more nodes", 10, 3)
        if failed:
            body.append(f"{len(failed)} node(s) failed to plan and will not be touched: "
                        f"{compress_hostlist(o.node for o in failed)}")
        body += [f"⚠ {warning}" for warning in preview.warnings]
        body.append("Each node re-checks every entry right before deleting it; symlinks are never followed.")
        self.app.push_screen(ConfirmScreen(f"{what.capitalize()}?", body, "Evict"),
                             lambda ok: self._confirmed(preview, ok))

    @staticmethod
    def _node_line(outcome: Any) -> str:
        doc = outcome.output or {}
        items = doc.get("evict") or []
        keys = ", ".join(str(i.get("key")) for i in items[:3]) + (f" +{len(items) - 3}" if len(items) > 3 else "")
        return printable(f"  {outcome.node}: {plural(len(items), 'entry', 'entries')}, "
                         f"{human_bytes(doc.get('freed_bytes') or 0)} ({keys})")

    def _show_preview(self, what: str, preview: Any) -> None:
        text = PlainText().append(f"Fleet eviction preview: {what}\n", style="bold")
        text.append(f"would free {human_bytes(preview.freed_bytes)} across "
                    f"{plural(len(preview.outcomes), 'node')}\n", style="bold red" if preview.freed_bytes else "")
        for o in preview.outcomes[:24]:
            if o.ok:
                text.append(self._node_line(o) + "\n")
            else:
                text.append(printable(f"  ✗ {o.node}: {node_error(o)}") + "\n", style="bold red")
        if len(preview.outcomes) > 24:
            text.append(f"  … {len(preview.outcomes) - 24} more nodes\n")
        for warning in preview.warnings:
            text.append(f"⚠ {printable(warning)}\n", style="bold yellow")
        self.query_one("#fleet-detail", PlainStatic).update(text)

    def _confirmed(self, plan: Any, ok: bool | None) -> None:
        if not ok:
            self.notify("fleet eviction cancelled: nothing deleted")
            return
        if self.refuse_read_only("eviction"):
            return
        self._busy = True
        self.run_execute(plan, self._start_progress("evicting"))

    @work(thread=True, exclusive=True, group="fleet-evict", exit_on_error=False)
    def run_execute(self, plan: Any, progress: ThreadProgress) -> None:
        with self.failures(FleetFailed):
            self.deliver(FleetExecuted(self.dispatcher.execute(plan, progress)))

    def on_fleet_executed(self, message: FleetExecuted) -> None:
        result = message.result
        self._busy = False
        self._stop_progress()
        failed = [o for o in result.outcomes if not o.ok]
        summary = f"fleet eviction freed {human_bytes(result.freed_bytes)}"
        text = PlainText().append(("✗ " if failed else "✓ ") + summary + "\n",
                             style="bold red" if failed else "bold green")
        for o in result.outcomes[:24]:
            if o.ok:
                text.append(self._node_line(o).replace("entr", "evicted entr", 1) + "\n")
            else:
                text.append(printable(f"  ✗ {o.node}: {node_error(o)}") + "\n", style="bold red")
        self.query_one("#fleet-detail", PlainStatic).update(text)
        if failed:
            self.notify(f"{summary}; {len(failed)} node(s) failed: {compress_hostlist(o.node for o in failed)}",
                        severity="error", timeout=10)
        else:
            self.notify(summary)
        self.action_scan()

    # ------------------------------------------------------------ helpers

    def _status(self, text: Text) -> None:
        self.query_one("#fleet-status", PlainStatic).update(text)

    def _start_progress(self, label: str) -> ThreadProgress:
        return self.query_one("#fleet-progress-row", ProgressRow).start(label)

    def _stop_progress(self) -> None:
        self.query_one("#fleet-progress-row", ProgressRow).stop()
