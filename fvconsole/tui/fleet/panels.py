"""The fleet view's widgets: the form (job, nodes, cache root), the node table and the key × node
matrix. Both tables are bound to the view's ``scanned`` (the last aggregated scan) and refill
themselves from it; the matrix also from its filter.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import Button, Input, Label

from fvconsole.core.fleet import compress_hostlist
from fvconsole.core.shared import human_bytes
from fvconsole.tui.cache.text import STATUS_STYLE
from fvconsole.tui.fleet.text import node_cells, plain
from fvconsole.tui.messages import FormSubmitted
from fvconsole.tui.widgets.inputs import PathInput
from fvconsole.tui.widgets.tables import FastTable

#: Node columns shown in the matrix; more nodes are summarised in the last column.
MAX_NODE_COLUMNS = 12
NODE_COLUMNS = (("node", "node", 12), ("slurm", "slurm", 16), ("entries", "entries", 9), ("size", "size", 11),
                ("reclaimable", "reclaimable", 13), ("over cap", "over_cap", 10), ("free", "free", 11),
                ("status or error", "statuses", 60))


class FleetForm(Vertical):
    """Which nodes (a job id or a node list) and which cache root; Enter in a field posts ``FormSubmitted``."""

    def __init__(self, root: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.initial_root = root
        self.job_box = Input(value=os.environ.get("SLURM_JOB_ID", ""), placeholder="e.g. 1234", id="fleet-job",
                             compact=True)
        self._node_list = Input(placeholder="e.g. gpu[001-016]", id="fleet-nodes", compact=True)
        self._root = PathInput(root, placeholder="the same path on every node; {node} allowed", id="fleet-root",
                               compact=True)
        self.scan_button = Button("Scan ^R", id="fleet-scan", variant="primary", compact=True)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="form-row", id="fleet-select"):
            yield Label("job")
            yield self.job_box
            yield Label("nodes")
            yield self._node_list
        with Horizontal(classes="form-row", id="fleet-root-row"):
            yield Label("cache root")
            yield self._root
            yield self.scan_button

    @property
    def values(self) -> tuple[str | None, str | None, str]:
        """(job id or None, node list or None, cache root) as typed."""
        return self.job_box.value.strip() or None, self._node_list.value.strip() or None, self._root.value.strip()

    def offer_cache_root(self, old: str | None, new: str | None) -> None:
        """A cache root picked with `o`: use it here too, unless the field was edited (e.g. a {node} root)."""
        if new and self._root.value.strip() in ("", old or "", self.initial_root):
            self._root.value = new
            self.initial_root = new

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(FormSubmitted())


class NodeTable(FastTable):
    """Each node's totals (or its error) and Slurm's state of it."""

    scanned: var[Any] = var(None, always_update=True, init=False)

    NODE_SORT_KEYS: ClassVar[dict[str, Any]] = {
        "node": lambda n: n.node,
        "entries": lambda n: n.entries if n.ok else None,
        "size": lambda n: n.total_bytes if n.ok else None,
        "reclaimable": lambda n: n.reclaimable_bytes if n.ok else None,
        "over_cap": lambda n: n.over_cap_bytes if n.ok else None,
        "free": lambda n: n.fs_free if n.ok else None,
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, flex="statuses",
                         shrink={"statuses": 16, "node": 10, "slurm": 8}, optional=("over_cap", "entries"),
                         sortable=[key for _l, key, _w in NODE_COLUMNS if key != "statuses"], **kwargs)

    def on_mount(self) -> None:
        for label, key, width in NODE_COLUMNS:
            self.add_column(label, key=key, width=width)

    def watch_scanned(self) -> None:
        self.refill()

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        event.stop()
        self.refill()

    def refill(self) -> None:
        view = self.scanned
        if view is None:
            return
        self.clear()

        def slurm_sort(n: Any) -> Any:
            found = view.slurm.get(n.node) if view.slurm is not None else None
            return (not view.node_busy(n.node), (found.state if found else None) or "~", n.node)

        for n in self.ordered(view.nodes, {**self.NODE_SORT_KEYS, "slurm": slurm_sort}):
            self.add_row(*node_cells(view, n), key=n.node)


class KeyMatrix(FastTable):
    """Each key's status and size per node ("busy" where a job of the cache's owner may use it)."""

    scanned: var[Any] = var(None, always_update=True, init=False)
    filter_text: var[str] = var("", init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, sortable=("key", "size"), **kwargs)
        self.selected: str | None = None

    def watch_scanned(self) -> None:
        self.refill()

    def watch_filter_text(self) -> None:
        self.refill()

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        event.stop()
        if self.scanned is not None:
            self.refill()

    def on_strip_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        if event.row_key is not None:
            self.selected = event.row_key.value

    def refill(self) -> None:
        view, text = self.scanned, self.filter_text
        self.clear(columns=True)
        if view is None:
            return
        shown = [n.node for n in view.nodes][:MAX_NODE_COLUMNS]
        self.add_column("key", key="key", width=16)
        self.add_column("size", key="size", width=10)
        for node in shown:
            busy = node in view.busy
            self.add_column(plain(f"{node} (busy)" if busy else node, "bold yellow" if busy else ""),
                            key=f"node:{node}", width=max(len(node), 20) + (7 if busy else 0))
        hidden = len(view.nodes) - len(shown)
        if hidden:
            self.add_column(f"+{hidden} nodes", key="more", width=30)
        order = {"key": lambda r: r.key, "size": lambda r: r.total_bytes}
        for row in self.ordered(view.keys, order):
            statuses = dict(row.statuses)
            sizes = dict(row.sizes)
            haystack = f"{row.key} " + " ".join(f"{n} {s}" for n, s in row.statuses)
            if text and text not in haystack.lower():
                continue
            cells: list[Any] = [plain(row.key), human_bytes(row.total_bytes)]
            for node in shown:
                status = statuses.get(node)
                if not status:
                    cells.append(Text("—", style="grey50"))
                    continue
                cell = plain(f"{status} {human_bytes(sizes[node])}", STATUS_STYLE.get(status, ""))
                if view.entry_busy(node, row.key):
                    cell.append(" busy", style="bold yellow")
                cells.append(cell)
            if hidden:
                rest = [(n, s) for n, s in row.statuses if n not in set(shown)]
                by_status: dict[str, list[str]] = {}
                for n, s in rest:
                    by_status.setdefault(s, []).append(n)
                cells.append(plain("; ".join(f"{s} {compress_hostlist(ns)}" for s, ns in sorted(by_status.items()))))
            self.add_row(*cells, key=row.key)
        if self.selected is not None and self.selected in self.rows:
            self.move_cursor(row=self.get_row_index(self.selected))
        self._mark_sorted()
