"""`fvconsole fleet cache ls|evict`: node-local caches across a Slurm job, through srun.

Each selected node runs the ordinary headless command (`cache ls --json`, `cache evict
--json`) through `srun`; this module only parses the command line and renders the
aggregate. The work is in :mod:`fvconsole.core.fleet`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fvconsole.cli.common import emit_json, format_table, head_tail, human_bytes, progress_printer
from fvconsole.cli.outcome import record_write
from fvconsole.core.errors import UsageError
from fvconsole.core.fleet.aggregate import FleetCacheView, FleetEviction, KeyRow
from fvconsole.core.fleet.dispatch import DEFAULT_PARALLEL, DEFAULT_TIMEOUT
from fvconsole.core.fleet.hostlist import compress_hostlist
from fvconsole.core.fleet.ops import (
    execute_fleet_eviction,
    fleet_cache_root,
    fleet_ls,
    preview_fleet_eviction,
)
from fvconsole.core.fleet.selection import NodeSelection, find_srun, select_nodes

FLEET_HELP = """\
Run `fvconsole cache ls|evict` on every node of a Slurm selection, one `srun -N1` per node
(at most --parallel at a time, each bounded by --timeout), and aggregate the per-node JSON.

Nodes: --nodes NODELIST (Slurm hostlist: n[1-3,5], gpu[01-04]) or --job JOBID (the nodes of
that running job; steps run inside it with --overlap); both: the job's nodes, restricted.
The cache root (--cache-root, default $FASTVIDEO_WEIGHT_SHARD_CACHE) is the same path on
every node; `{node}` in it is replaced on each node by its Slurm node name.
Each node runs this same Python interpreter path (a shared filesystem is assumed).

examples:
  fvconsole fleet cache ls --job 123456                       # the nodes of a running job
  fvconsole fleet cache ls --nodes 'gpu[01-08]' --cache-root /dev/shm/fastvideo-wcache --json
  fvconsole fleet cache ls --nodes 'n[1-3]' --cache-root '/scratch/{node}/wcache'
  fvconsole fleet cache evict --job 123456 --invalid          # preview on every node
  fvconsole fleet cache evict --job 123456 --max-gb 200 --yes

exit codes: 0 ok, 1 refused (srun missing, empty selection, every node failed),
2 usage error, 3 some nodes failed while others succeeded (each node's reason is reported).
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `fleet cache ls` and `fleet cache evict`."""
    fleet = sub.add_parser("fleet", help="node-local caches across a Slurm job (through srun)",
                           description=FLEET_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    areas = fleet.add_subparsers(dest="fleet_area", metavar="AREA", required=True)
    cache = areas.add_parser("cache", help="weight shard caches on every node",
                             description=FLEET_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = cache.add_subparsers(dest="fleet_action", metavar="ACTION", required=True)
    ls = actions.add_parser("ls", help="list every node's cache and aggregate",
                            description=FLEET_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _selection_args(ls)
    ls.set_defaults(func=run_fleet_ls)
    ev = actions.add_parser("evict", help="plan (and with --yes run) an eviction on every node",
                            description=FLEET_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _selection_args(ev)
    ev.add_argument("--max-gb", nargs="?", const="", metavar="N",
                    help="per node: evict LRU until its total <= N GiB (no value: the node's $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB)")
    ev.add_argument("--key", action="append", default=[], metavar="KEY", help="evict this entry on every node (repeatable)")
    ev.add_argument("--invalid", action="store_true", help="evict invalid and incomplete entries")
    ev.add_argument("--older-than", metavar="D", help="evict entries last used more than D ago (12h, 7d)")
    ev.add_argument("--keep", action="append", default=[], metavar="KEY", help="never evict this entry")
    ev.add_argument("--force", action="store_true", help="also evict entries in use or being written")
    ev.add_argument("--yes", action="store_true", help="execute exactly the previewed plan (default: dry run)")
    ev.set_defaults(func=run_fleet_evict)


def _selection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", metavar="NODELIST", help="Slurm hostlist, e.g. n[1-3] or gpu[01-04],login1")
    parser.add_argument("--job", metavar="JOBID", help="target the nodes of this running job (srun --jobid --overlap)")
    parser.add_argument("--partition", metavar="NAME", help="passed to srun as --partition")
    parser.add_argument("--srun-arg", action="append", default=[], metavar="ARG",
                        help="extra srun argument, repeatable; use the = form: --srun-arg=--account=abc")
    parser.add_argument("--cache-root", dest="fleet_cache_root", metavar="DIR",
                        help="cache root on every node, may contain {node} (default: $FASTVIDEO_WEIGHT_SHARD_CACHE)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"per-node time limit (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL, metavar="N",
                        help=f"nodes contacted at once (default {DEFAULT_PARALLEL})")
    parser.add_argument("--grace", metavar="D", help="passed to each node's cache command (default there: 10m)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _selection(args: argparse.Namespace) -> NodeSelection:
    find_srun()  # "srun not found" first, before squeue is asked about --job
    return select_nodes(args.nodes, args.job, args.partition, args.srun_arg)


def _root(args: argparse.Namespace) -> str:
    return fleet_cache_root(args.fleet_cache_root or getattr(args, "cache_root", None))


def _grace(args: argparse.Namespace) -> list[str]:
    return ["--grace", args.grace] if args.grace else []


def _report_failures(outcomes: Any, total: int) -> None:
    failed = [o for o in outcomes if not o.ok]
    if failed:
        first = failed[0]
        print(f"error: {len(failed)} of {total} nodes failed ({compress_hostlist(o.node for o in failed)}); "
              f"first: {first.node}: {first.error}", file=sys.stderr)


# ---------------------------------------------------------------- ls


def run_fleet_ls(args: argparse.Namespace) -> int:
    """`fleet cache ls`: 0 all nodes answered, 3 some failed, 1 all failed."""
    root = _root(args)
    selection = _selection(args)
    view = fleet_ls(selection, root, timeout=args.timeout, parallel=args.parallel, extra=_grace(args),
                    progress=None if args.json else progress_printer("nodes"))
    if args.json:
        emit_json(view.to_json())
    else:
        print(render_fleet_ls(view, root))
    _report_failures(view.outcomes, len(view.outcomes))
    return view.exit_code


def _statuses_text(row: KeyRow) -> str:
    by_status: dict[str, list[str]] = {}
    for node, status in row.statuses:
        by_status.setdefault(status, []).append(node)
    return "; ".join(f"{status} on {compress_hostlist(nodes)}" for status, nodes in sorted(by_status.items()))


def render_fleet_ls(view: FleetCacheView, root: str) -> str:
    """Per-node table, then the key x node summary, then findings."""
    sel = view.selection
    where = f"job {sel.job_id}: " if sel.job_id else ""
    lines = [f"fleet cache {root} on {where}{compress_hostlist(sel.nodes)} ({len(sel.nodes)} nodes)"]
    rows = []
    for n in view.nodes:
        if not n.ok:
            rows.append((n.node, "-", "-", "-", "-", "-", f"error: {n.error}"))
            continue
        statuses = ", ".join(f"{count} {status}" for status, count in n.statuses) or "empty"
        free = human_bytes(n.fs_free) if n.fs_free is not None else "-"
        over = human_bytes(n.over_cap_bytes) if n.over_cap_bytes is not None else "-"
        rows.append((n.node, n.entries, human_bytes(n.total_bytes), human_bytes(n.reclaimable_bytes), over, free,
                     statuses))
    lines.append(format_table(("NODE", "ENTRIES", "SIZE", "RECLAIMABLE", "OVER CAP", "FREE", "STATUSES"), rows,
                              right=(1, 2, 3, 4, 5)))
    if view.keys:
        head, omitted, tail = head_tail(list(view.keys), head=20, tail=5)
        key_rows = [(r.key, len(r.statuses), human_bytes(r.total_bytes), _statuses_text(r)) for r in head]
        if omitted:
            key_rows.append((f"... {omitted} more keys", "", "", ""))
        key_rows += [(r.key, len(r.statuses), human_bytes(r.total_bytes), _statuses_text(r)) for r in tail]
        lines += ["", format_table(("KEY", "NODES", "SIZE", "STATUS BY NODE"), key_rows, right=(1, 2))]
    else:
        lines.append("(no cache entries on any node)")
    lines.append(f"\ntotal {human_bytes(view.total_bytes)} across {len(view.nodes)} nodes, {len(view.keys)} keys; "
                 "an eviction would free per node: RECLAIMABLE with `--invalid` (invalid + incomplete), "
                 "OVER CAP with `--max-gb` (the node's $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB cap)")
    for finding in view.findings:
        lines.append(f"finding: {finding.message}")
    return "\n".join(lines)


# ---------------------------------------------------------------- evict


def selectors(args: argparse.Namespace) -> list[str]:
    """The node-side `cache evict` selectors for these flags (a usage error when there are none)."""
    out: list[str] = []
    if args.max_gb is not None:
        out += ["--max-gb", args.max_gb] if args.max_gb else ["--max-gb"]
    for key in args.key:
        out += ["--key", key]
    if args.invalid:
        out.append("--invalid")
    if args.older_than:
        out += ["--older-than", args.older_than]
    for key in args.keep:
        out += ["--keep", key]
    if not (args.max_gb is not None or args.key or args.invalid or args.older_than):
        raise UsageError("nothing selected: give --max-gb, --key, --invalid or --older-than")
    return out


def protections(args: argparse.Namespace) -> list[str]:
    """Flags that change each node's re-check (never what is selected)."""
    return (["--force"] if args.force else []) + _grace(args)


def run_fleet_evict(args: argparse.Namespace) -> int:
    """`fleet cache evict`: preview on every node; with --yes execute exactly those plans."""
    picks = selectors(args)
    root = _root(args)
    selection = _selection(args)
    progress = None if args.json else progress_printer("nodes")
    preview = preview_fleet_eviction(selection, root, picks + protections(args), timeout=args.timeout,
                                     parallel=args.parallel, progress=progress)
    result = preview
    if args.yes:
        result = execute_fleet_eviction(preview, root, protections(args), timeout=args.timeout,
                                        parallel=args.parallel, progress=progress)
        if result.executed:
            record_write(f"the eviction ran on {compress_hostlist(result.selection.nodes)}")
    if args.json:
        emit_json(result.to_json())
    else:
        print(render_fleet_evict(result, root))
    _report_failures(result.outcomes, len(result.outcomes))
    return result.exit_code


def render_fleet_evict(result: FleetEviction, root: str) -> str:
    """One line per node: what it planned or freed, or why it failed."""
    verb = "freed" if result.executed else "would free"
    mode = "executed" if result.executed else "dry run"
    lines = [f"fleet eviction in {root} on {compress_hostlist(result.selection.nodes)} ({mode})"]
    rows = []
    for o in result.outcomes:
        if not o.ok:
            rows.append((o.node, "-", "-", f"error: {o.error}"))
            continue
        doc = o.output or {}
        items = doc.get("evict") or []
        keys = ", ".join(str(i.get("key")) for i in items[:3]) + (f" (+{len(items) - 3})" if len(items) > 3 else "")
        note = doc.get("note") or keys or "nothing to evict"
        rows.append((o.node, len(items), human_bytes(doc.get("freed_bytes") or 0), note))
    lines.append(format_table(("NODE", "ENTRIES", verb.upper(), "KEYS"), rows, right=(1, 2)))
    lines.append(f"{verb} {human_bytes(result.freed_bytes)} across {len(result.outcomes)} nodes")
    if not any(o.ok for o in result.outcomes):
        lines.append("no node could plan the eviction; nothing was executed")
    elif not result.executed:
        lines.append("dry run: re-run with --yes to execute exactly these per-node plans")
    return "\n".join(lines)
