"""What the fleet view shows, as text: the scan's status line, the node table's cells, Slurm's
view of the nodes, the findings, an eviction's preview, confirmation and result.

Node names, keys, statuses and errors come from the nodes: untrusted, shown as plain text with
controls escaped (``plain``).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from fvconsole.core.cache import RECLAIMABLE_SUM
from fvconsole.core.fleet import NodeOutcome, compress_hostlist
from fvconsole.core.shared import WAIT, elided, human_bytes, plural, printable
from fvconsole.tui import state
from fvconsole.tui.cache.text import STATUS_STYLE
from fvconsole.tui.plain import PlainText
from fvconsole.tui.wording import REMEDIES, reason_text

#: The remedies the fleet view can say what to do for (it has no force or lock controls).
FLEET_REMEDIES = {WAIT: REMEDIES[WAIT]}


def node_error(failed: Any) -> str:
    """Why a node failed: its refusal worded with the console's words when the node sent it as data."""
    reason = getattr(failed, "reason", None)
    return reason_text(reason, FLEET_REMEDIES) if reason is not None else str(failed.error)


def plain(value: str, style: str = "") -> Text:
    """Untrusted text (node names, keys, statuses, errors from nodes) as one line of plain text:
    never markup, control characters (newlines too) shown escaped."""
    return PlainText(printable(value), style=style)


def scan_status(view: Any) -> PlainText:
    """The status line after a scan: the nodes, the job, the counts, the nodes that failed."""
    failed = [n for n in view.nodes if not n.ok]
    text = PlainText().append(compress_hostlist(view.selection.nodes), style="bold")
    if view.selection.job_id:
        text.append(f" (job {view.selection.job_id})")
    text.append(f" · {plural(len(view.nodes), 'node')}, {plural(len(view.keys), 'key')}, "
                f"{human_bytes(view.total_bytes)} fleet-wide")
    if failed:
        text.append(f" · {len(failed)} failed: {compress_hostlist(n.node for n in failed)}", style="bold red")
    return text


def slurm_cell(view: Any, node: str) -> Text:
    """sinfo's state of the node ("?": unknown), "busy" when a job of the cache's owner runs there."""
    if view.slurm is None:
        return Text("-", style="grey50")
    found = view.slurm.get(node)
    shown = (found.state if found is not None else None) or "?"
    if view.node_busy(node):
        return plain(f"{shown} · busy", "bold yellow")
    return plain(shown, "grey50" if shown == "?" else "")


def node_cells(view: Any, n: Any) -> tuple[Any, ...]:
    """One row of the node table: totals and statuses, or the node's error."""
    if not n.ok:
        return (plain(n.node), slurm_cell(view, n.node), "-", "-", "-", "-", "-",
                plain(f"error: {node_error(n)}", "bold red"))
    statuses = PlainText()
    for i, (status, count) in enumerate(n.statuses):
        statuses.append(("" if i == 0 else ", ") + f"{count} {printable(status)}", style=STATUS_STYLE.get(status, ""))
    if n.in_use:
        statuses.append(f"; {n.in_use} in use", style="bold yellow")
    busy_keys = view.busy.get(n.node, ((), ()))[1]
    if busy_keys:
        statuses.append(f"; node busy ({plural(len(busy_keys), 'entry', 'entries')})", style="bold yellow")
    return (plain(n.node), slurm_cell(view, n.node), str(n.entries), human_bytes(n.total_bytes),
            human_bytes(n.reclaimable_bytes),
            human_bytes(n.over_cap_bytes) if n.over_cap_bytes is not None else "-",
            human_bytes(state.shown_free(n.fs_free)), statuses or "empty")


def slurm_text(view: Any) -> PlainText:
    """Slurm's view of the scanned nodes: the jobs on them (the cache owners' first), or why it is unknown."""
    text = PlainText()
    slurm = view.slurm
    if slurm is None:
        return text
    if slurm.note:
        text.append(printable(slurm.note) + "\n", style="yellow")
    busy_ids = {j.job_id for jobs, _keys in view.busy.values() for j in jobs}
    wanted = set(view.selection.nodes)
    jobs = sorted(slurm.jobs, key=lambda j: j.job_id not in busy_ids)
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
    for problem in slurm.problems:
        text.append(printable(problem) + "\n", style="yellow")
    return text


def findings_text(view: Any) -> PlainText:
    """The detail pane after a scan: Slurm's view, the cross-node findings, the nodes that failed."""
    text = slurm_text(view)
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
    return text


def node_line(outcome: NodeOutcome) -> str:
    """One node of a plan or result (a node that answered): how many entries, how much, the first keys."""
    done = outcome.eviction
    items = done.evict
    keys = ", ".join(item.key for item in items[:3]) + (f" +{len(items) - 3}" if len(items) > 3 else "")
    return printable(f"  {outcome.node}: {plural(len(items), 'entry', 'entries')}, "
                     f"{human_bytes(done.freed_bytes)} ({keys})")


def preview_text(what: str, preview: Any) -> PlainText:
    """The detail pane for a fleet eviction's preview: each node's plan, or why it failed."""
    text = PlainText().append(f"Fleet eviction preview: {what}\n", style="bold")
    text.append(f"would free {human_bytes(preview.freed_bytes)} across "
                f"{plural(len(preview.outcomes), 'node')}\n", style="bold red" if preview.freed_bytes else "")
    for o in preview.outcomes[:24]:
        if o.ok:
            text.append(node_line(o) + "\n")
        else:
            text.append(printable(f"  ✗ {o.node}: {node_error(o)}") + "\n", style="bold red")
    if len(preview.outcomes) > 24:
        text.append(f"  … {len(preview.outcomes) - 24} more nodes\n")
    for warning in preview.warnings:
        text.append(f"⚠ {printable(warning)}\n", style="bold yellow")
    return text


def confirm_body(root: str, preview: Any) -> list[str]:
    """The confirmation's lines: which nodes, where, how much, what fails, what re-checks."""
    plans = preview.node_keys
    failed = [o for o in preview.outcomes if not o.ok]
    busy_nodes = [n for n, keys in plans.items() if keys]
    body = [f"Delete cache entries on {plural(len(busy_nodes), 'node')} "
            f"({compress_hostlist(busy_nodes)}) under {printable(root)}, "
            f"freeing {human_bytes(preview.freed_bytes)}:"]
    rows = [o for o in preview.outcomes if o.ok and plans.get(o.node)]
    body += elided(rows, node_line, lambda n: f"  … {n} more nodes", 10, 3)
    if failed:
        body.append(f"{plural(len(failed), 'node')} failed to plan and will not be touched: "
                    f"{compress_hostlist(o.node for o in failed)}")
    body += [f"⚠ {warning}" for warning in preview.warnings]
    body.append("Each node re-checks every entry right before deleting it; symlinks are never followed.")
    return body


def executed_text(result: Any) -> PlainText:
    """The detail pane after a fleet eviction: what each node evicted, or why it failed."""
    failed = [o for o in result.outcomes if not o.ok]
    text = PlainText().append(("✗ " if failed else "✓ ") + executed_summary(result) + "\n",
                              style="bold red" if failed else "bold green")
    for o in result.outcomes[:24]:
        if o.ok:
            text.append(node_line(o).replace("entr", "evicted entr", 1) + "\n")
        else:
            text.append(printable(f"  ✗ {o.node}: {node_error(o)}") + "\n", style="bold red")
    return text


def executed_summary(result: Any) -> str:
    return f"fleet eviction freed {human_bytes(result.freed_bytes)}"
