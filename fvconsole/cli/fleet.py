"""`fvconsole fleet cache ls|evict`: node-local caches across a Slurm job, through srun.

Each selected node runs the ordinary headless command (`cache ls --json`, `cache evict
--json`) through `srun`; this module only parses the command line and renders the
aggregate. The work is in :mod:`fvconsole.core.fleet`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from fvconsole.cli.common import (
    Block,
    block,
    command_failed,
    emit_json,
    format_table,
    progress_printer,
    say,
    warn,
)
from fvconsole.cli.formats import add_format_args, output_format, write_output_file
from fvconsole.cli.options import (
    add_deep,
    add_force,
    add_grace,
    add_job,
    add_json,
    add_nodes,
    add_wait,
    add_yes,
)
from fvconsole.cli.outcome import Interruption, add_journal_args, journal_json, warn_if_unwritten
from fvconsole.cli.selectors import add_key_option, add_selector_args, selectors_from
from fvconsole.cli.streams import write_out
from fvconsole.core.cache import RECLAIMABLE_SUM, parse_keys
from fvconsole.core.fleet import (
    AUTO,
    DEFAULT_PARALLEL,
    DEFAULT_TIMEOUT,
    FANOUTS,
    FLEET_LISTING_FORMATS,
    MAX_NODE_OUTPUT,
    SINGLE_STEP_MIN_NODES,
    DispatchOptions,
    FleetCacheView,
    FleetEvictionOperation,
    FleetEvictionPlan,
    FleetEvictionResult,
    FleetVerification,
    KeyRow,
    NodeEviction,
    NodeOutcome,
    NodeSelection,
    SlurmJob,
    check_selection_args,
    compress_hostlist,
    find_srun,
    fleet_cache_root,
    fleet_csv,
    fleet_ls,
    fleet_verify,
    preview_fleet_eviction,
    ran_on,
    select_nodes,
)
from fvconsole.core.journal import appender
from fvconsole.core.shared import elided, flags, head_tail, human_bytes, parse_duration, plural, run_locked

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.cli.outcome import Invocation

#: Node rows printed without --full: every failed node up to this many, and ok nodes head + tail.
FAILED_ROWS = 20
OK_HEAD, OK_TAIL = 10, 5

FLEET_HELP = f"""\
Run `fvconsole cache ls|evict` on every node of a Slurm selection through srun, each node
bounded by --timeout, and aggregate the per-node JSON.

Fan-out (--fanout): per-node runs one `srun -N1` per node, at most --parallel at a time;
single-step runs one `srun -N<n> --ntasks-per-node=1` job step for all nodes (a failing or
hung node does not hold up the others; nodes that could not be started are retried one srun
each); auto (default) is per-node up to {SINGLE_STEP_MIN_NODES} nodes, single-step above.

Nodes: --nodes NODELIST (Slurm hostlist: n[1-3,5], gpu[01-04]) or --job JOBID (the nodes of
that running job; steps run inside it with --overlap); both: the job's nodes, restricted.
The cache root (--cache-root, default $FASTVIDEO_WEIGHT_SHARD_CACHE) is the same path on
every node; `{{node}}` in it is replaced on each node by its Slurm node name.
Each node runs this same Python interpreter path (a shared filesystem is assumed).

Output: `ls --json` prints a summary (per key: bytes and nodes by status; per node: outcome
and totals); `--full` prints every node's own `cache ls` object (text: every node row).
Each node's output is capped ({MAX_NODE_OUTPUT >> 20} MiB); a node that sends more, or anything but
one well-formed result, is reported `invalid` while the other nodes' results stand.

Slurm state: `ls` and `evict` also ask Slurm once for the whole node set (one `squeue`, one
`sinfo`) what each node runs: a SLURM column (`allocated, busy`), the jobs (id, user, name)
and "node busy" on the entries of a node that runs a job of the cache's owner (`--json`:
"slurm"), so you see which nodes are busy before evicting.

examples:
  fvconsole fleet cache ls --job 123456                       # the nodes of a running job
  fvconsole fleet cache ls --job 123456 --json --full         # every node's own listing
  fvconsole fleet cache ls --nodes 'gpu[01-08]' --cache-root /dev/shm/fastvideo-wcache --json
  fvconsole fleet cache ls --nodes 'n[1-3]' --cache-root '/scratch/{{node}}/wcache'
  fvconsole fleet cache evict --job 123456 --invalid          # preview on every node
  fvconsole fleet cache evict --job 123456 --max-gb 200 --yes
  fvconsole fleet cache evict --nodes 'n[1-8]' --min-free-percent 30 --yes --wait 60
  fvconsole fleet cache ls --nodes 'gpu[0001-1000]' --fanout single-step   # one job step
  fvconsole fleet cache ls --job 123456 --format csv > fleet.csv           # node x entry rows

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
    _selection_args(ls, json_flag=False)
    add_format_args(ls, FLEET_LISTING_FORMATS, output=True)
    ls.add_argument("--full", action="store_true",
                    help="every node's own listing (--json: each node's `cache ls` object; text: every node row); "
                         "default: a summary per key and per node")
    ls.set_defaults(func=run_fleet_ls)
    ev = actions.add_parser("evict", help="plan (and with --yes run) an eviction on every node",
                            description=FLEET_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _selection_args(ev)
    add_selector_args(ev, fleet=True)
    add_force(ev, "also evict entries in use or being written")
    add_yes(ev, "execute exactly the previewed plan (default: dry run)")
    add_wait(ev, "with --yes: each node waits up to SECONDS for another eviction of its root "
                 "(keep it below --timeout)")
    add_journal_args(ev)
    ev.set_defaults(func=run_fleet_evict)
    ver = actions.add_parser("verify", help="run `cache verify` on every node and list what fails where",
                             description=FLEET_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _selection_args(ver)
    add_key_option(ver, "verify this entry on every node (repeatable)")
    add_deep(ver, "each node also reads every byte of its shards")
    ver.set_defaults(func=run_fleet_verify)


def _selection_args(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    add_nodes(parser)
    add_job(parser)
    parser.add_argument("--partition", metavar="NAME", help="passed to srun as --partition")
    parser.add_argument("--srun-arg", action="append", default=[], metavar="ARG",
                        help="extra srun argument, repeatable; use the = form: --srun-arg=--account=abc")
    parser.add_argument("--cache-root", dest="fleet_cache_root", metavar="DIR",
                        help="cache root on every node, may contain {node} (default: $FASTVIDEO_WEIGHT_SHARD_CACHE)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"per-node time limit (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL, metavar="N",
                        help=f"per-node fan-out: nodes contacted at once (default {DEFAULT_PARALLEL})")
    parser.add_argument("--fanout", choices=FANOUTS, default=AUTO,
                        help=f"per-node: one srun per node; single-step: one job step for all nodes; "
                             f"auto (default): single-step above {SINGLE_STEP_MIN_NODES} nodes")
    add_grace(parser, "passed to each node's cache command (default there: 10m)")
    if json_flag:
        add_json(parser)


def _options(args: argparse.Namespace) -> DispatchOptions:
    """Dispatch settings, validated (usage errors come before srun is looked for)."""
    return DispatchOptions(timeout=args.timeout, parallel=args.parallel, fanout=args.fanout).check()


def _selection(args: argparse.Namespace) -> NodeSelection:
    find_srun()  # "srun not found" only once the command line is known to be valid; before squeue
    return select_nodes(args.nodes, args.job, args.partition, args.srun_arg)


def _root(args: argparse.Namespace) -> str:
    return fleet_cache_root(args.fleet_cache_root or getattr(args, "cache_root", None))


def _grace(args: argparse.Namespace) -> float | None:
    """--grace in seconds, checked on the login node (None: each node's default)."""
    return parse_duration(args.grace, flags.GRACE) if args.grace is not None else None


def _finish(code: int, outcomes: tuple[NodeOutcome, ...], doc: dict[str, Any] | None) -> int:
    """``code`` when every node answered; else raise the failure (``doc`` is the --json object)."""
    failed = [o for o in outcomes if not o.ok]
    if not code or not failed:
        if doc is not None:
            emit_json(doc)
        return code
    first = failed[0]
    raise command_failed(code, f"{len(failed)} of {plural(len(outcomes), 'node')} failed "
                               f"({compress_hostlist(o.node for o in failed)}); first: {first.node}: {first.error}", doc)


def _rows(outcomes: list[NodeOutcome], full: bool) -> tuple[list[NodeOutcome], int]:
    """Which node rows to print: all with --full, else every failed one (bounded) and the ok ones' head/tail."""
    if full:
        return outcomes, 0
    failed = [o for o in outcomes if not o.ok]
    ok = [o for o in outcomes if o.ok]
    head, omitted, tail = head_tail(ok, OK_HEAD, OK_TAIL)
    shown_failed, more_failed, _ = head_tail(failed, FAILED_ROWS, 0)
    keep = {id(o) for o in (*shown_failed, *head, *tail)}
    return [o for o in outcomes if id(o) in keep], omitted + more_failed


def _dispatch_note(fanout: str, job_steps: int) -> str:
    return f"{fanout} fan-out, {plural(job_steps, 'job step')}" if fanout else ""


# ---------------------------------------------------------------- ls


def run_fleet_ls(args: argparse.Namespace, _invocation: Invocation) -> int:
    """`fleet cache ls`: 0 all nodes answered, 3 some failed, 1 all failed."""
    fmt = output_format(args)
    grace = _grace(args)
    root = _root(args)
    options = _options(args)
    check_selection_args(args.nodes, args.job)
    selection = _selection(args)
    view = fleet_ls(selection, root, options, grace=grace,
                    progress=None if fmt != "text" else progress_printer("nodes"))
    doc = None
    if args.output:  # every format through the output-file door (a CSV for a spreadsheet, say)
        write_output_file(args.output, _ls_text(view, fmt, root, full=args.full))
    elif fmt == "csv":
        write_out(fleet_csv(view))
    elif args.json:
        doc = view.to_json() if args.full else view.to_summary_json()
    else:
        say(render_fleet_ls(view, root, full=args.full))
    return _finish(view.exit_code, view.outcomes, doc)


def _ls_text(view: FleetCacheView, fmt: str, root: str, *, full: bool) -> str:
    """The listing in ``fmt`` as the text ``--output`` writes (what stdout would get)."""
    if fmt == "csv":
        return fleet_csv(view)
    if fmt == "json":
        import json

        return json.dumps(view.to_json() if full else view.to_summary_json(), sort_keys=True, default=str) + "\n"
    return render_fleet_ls(view, root, full=full) + "\n"


def _statuses_text(row: KeyRow) -> str:
    by_status: dict[str, list[str]] = {}
    for node, status in row.statuses:
        by_status.setdefault(status, []).append(node)
    return "; ".join(f"{status} on {compress_hostlist(nodes)}" for status, nodes in sorted(by_status.items()))


def _outcomes_line(view: FleetCacheView) -> str:
    parts = []
    for kind, group in view.outcome_counts().items():
        parts.append(f"{group['count']} {kind}" + ("" if kind == "ok" else f" ({group['nodes']})"))
    return "nodes: " + ", ".join(parts) if parts else "nodes: none"


def render_fleet_ls(view: FleetCacheView, root: str, *, full: bool = False) -> Block:
    """Outcomes, the per-node table (summarised unless ``full``), the key x node summary, findings."""
    sel = view.selection
    where = f"job {sel.job_id}: " if sel.job_id else ""
    how = _dispatch_note(view.fanout, view.job_steps)
    lines = [f"fleet cache {root} on {where}{compress_hostlist(sel.nodes)} ({plural(len(sel.nodes), 'node')}"
             + (f"; {how})" if how else ")"), _outcomes_line(view)]
    shown, omitted = _rows(list(view.nodes), full)
    rows = []
    for n in shown:
        if not n.ok:
            rows.append((n.node, slurm_cell(view, n.node), "-", "-", "-", "-", "-", f"error: {n.error}"))
            continue
        statuses = ", ".join(f"{count} {status}" for status, count in n.statuses) or "empty"
        if n.in_use:
            statuses += f"; {n.in_use} in use"
        free = human_bytes(n.fs_free) if n.fs_free is not None else "-"
        over = human_bytes(n.over_cap_bytes) if n.over_cap_bytes is not None else "-"
        busy_keys = view.busy.get(n.node, ((), frozenset()))[1]
        if busy_keys:
            statuses += f"; node busy ({plural(len(busy_keys), 'entry', 'entries')})"
        rows.append((n.node, slurm_cell(view, n.node), n.entries, human_bytes(n.total_bytes),
                     human_bytes(n.reclaimable_bytes), over, free, statuses))
    if omitted:
        rows.append((f"... {omitted} more nodes (--full lists every node)", "", "", "", "", "", "", ""))
    lines.append(format_table(("NODE", "SLURM", "ENTRIES", "SIZE", "RECLAIMABLE", "OVER CAP", "FREE", "STATUSES"),
                              rows, right=(2, 3, 4, 5, 6)))
    lines += slurm_lines(view)
    if view.keys:
        def key_row(r: KeyRow) -> tuple[Any, ...]:
            busy = [node for node, _status in r.statuses if view.entry_busy(node, r.key)]
            text = _statuses_text(r) + (f"; node busy on {compress_hostlist(busy)}" if busy else "")
            return (r.key, len(r.statuses), human_bytes(r.total_bytes), text)

        key_rows = elided(view.keys, key_row, lambda n: (f"... {n} more keys", "", "", ""), 20, 5)
        lines += ["", format_table(("KEY", "NODES", "SIZE", "STATUS BY NODE"), key_rows, right=(1, 2))]
    else:
        lines.append("(no cache entries on any node)")
    lines += ["", f"total {human_bytes(view.total_bytes)} across {plural(len(view.nodes), 'node')}, "
                 f"{plural(len(view.keys), 'key')}; "
                 f"an eviction would free per node: RECLAIMABLE with `--invalid` ({RECLAIMABLE_SUM}), "
                 "OVER CAP with `--max-gb` (the node's $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB cap)"]
    for finding in view.findings:
        lines.append(f"finding: {finding.message}")
    return block(lines)


#: Jobs listed under the node table (head and tail beyond this many).
JOB_ROWS = 20


def slurm_cell(view: FleetCacheView, node: str) -> str:
    """The SLURM column: sinfo's state ("?" unknown), "busy" when a job of the cache's owner runs there."""
    if view.slurm is None:
        return "-"
    found = view.slurm.get(node)
    state = (found.state if found is not None else None) or "?"
    return f"{state}, busy" if view.node_busy(node) else state


def slurm_lines(view: FleetCacheView) -> list[str]:
    """The jobs on the listed nodes, one line per job (its nodes as a hostlist), or why Slurm's state is unknown."""
    state = view.slurm
    if state is None:
        return []
    lines: list[str] = []
    if state.note:
        lines.append(state.note)
    busy_ids = {j.job_id for jobs, _keys in view.busy.values() for j in jobs}
    wanted = set(view.selection.nodes)
    rows = elided(state.jobs, lambda job: _job_row(job, wanted, busy_ids),
                  lambda n: (f"... {n} more jobs", "", "", "", "", ""), JOB_ROWS, 5)
    if rows:
        lines += ["", format_table(("JOB", "USER", "NAME", "STATE", "NODES", "NOTE"), rows)]
    elif state.jobs_known:
        lines.append("no running jobs on these nodes")
    lines += [f"slurm: {p}" for p in state.problems]
    if view.busy:
        lines.append(f"node busy: {compress_hostlist(view.busy)} run a job of the cache's owner (the uid owning "
                     "the root or the entry on that node): entries there may be in use by it")
    return lines


def _job_row(job: SlurmJob, wanted: set[str], busy_ids: set[str]) -> tuple[str, ...]:
    nodes = compress_hostlist(n for n in job.nodes if n in wanted)
    return (job.job_id, job.user, job.name, job.state, nodes, "cache owner's job: node busy" if job.job_id in busy_ids
            else "")


# ---------------------------------------------------------------- evict


def node_eviction(args: argparse.Namespace) -> NodeEviction:
    """What every node is asked, as the core's typed request (usage errors on the login node, before srun)."""
    selectors = selectors_from(args, fleet=True)
    return NodeEviction(selectors, grace=_grace(args), force=args.force, wait=args.wait)


def run_fleet_evict(args: argparse.Namespace, invocation: Invocation) -> int | Interruption:
    """`fleet cache evict`: preview on every node; with --yes execute exactly that plan."""
    request = node_eviction(args)
    root = _root(args)
    options = _options(args)
    check_selection_args(args.nodes, args.job)
    selection = _selection(args)
    progress = None if args.json else progress_printer("nodes")
    plan = preview_fleet_eviction(selection, root, request, options, progress)
    result: FleetEvictionPlan | FleetEvictionResult = plan
    journal = None
    if args.yes:  # the runner: no lock here (each node locks its root), one journal line once a node was asked
        run = run_locked(FleetEvictionOperation(plan, command=invocation.command_line, options=options),
                         journal=appender(invocation.journal), progress=progress)
        warn_if_unwritten(run.journal)
        if run.stop is not None:
            return Interruption(run.stop)
        assert run.result is not None
        result, journal = run.result, run.journal
        if result.executed:
            invocation.record_write(ran_on(result))
    doc = None
    if args.json:
        doc = result.to_json()
        if journal is not None:
            doc["journal"] = journal_json(journal)
    else:
        say(render_fleet_evict(result, root))
        warn(*plan.warnings)
    return _finish(result.exit_code, result.outcomes, doc)


def render_fleet_evict(result: FleetEvictionPlan | FleetEvictionResult, root: str) -> Block:
    """One line per node (failed ones first, long fleets summarised): what it planned or freed, or why it failed."""
    verb = "freed" if result.executed else "would free"
    mode = "executed" if result.executed else "dry run"
    lines = [f"fleet eviction in {root} on {compress_hostlist(result.selection.nodes)} ({mode})"]
    shown, omitted = _rows(list(result.outcomes), False)
    rows = []
    for o in shown:
        if not o.ok:
            rows.append((o.node, "-", "-", f"error: {o.error}"))
            continue
        eviction = o.eviction
        items = eviction.evict
        keys = ", ".join(i.key for i in items[:3]) + (f" (+{len(items) - 3})" if len(items) > 3 else "")
        note = eviction.note or keys or "nothing to evict"
        rows.append((o.node, len(items), human_bytes(eviction.freed_bytes), note))
    if omitted:
        rows.append((f"... {omitted} more nodes", "", "", ""))
    lines.append(format_table(("NODE", "ENTRIES", verb.upper(), "KEYS"), rows, right=(1, 2)))
    lines.append(f"{verb} {human_bytes(result.freed_bytes)} across {plural(len(result.outcomes), 'node')}")
    if not any(o.ok for o in result.outcomes):
        lines.append("no node could plan the eviction; nothing was executed")
    elif not result.executed and any(o.eviction.evict for o in result.outcomes if o.ok):
        lines.append("dry run: re-run with --yes to execute exactly these per-node plans")
    elif not result.executed:
        lines.append("dry run: nothing to evict on any node")
    return block(lines)


# ---------------------------------------------------------------- verify


def run_fleet_verify(args: argparse.Namespace, _invocation: Invocation) -> int:
    """`fleet cache verify`: 0 every node verified everything, 1 a problem found, 3 some nodes did not answer."""
    keys = parse_keys(args.key)
    root = _root(args)
    options = _options(args)
    check_selection_args(args.nodes, args.job)
    selection = _selection(args)
    result = fleet_verify(selection, root, options, keys=keys, deep=args.deep,
                          progress=None if args.json else progress_printer("nodes"))
    if not args.json:
        say(render_fleet_verify(result))
    code = result.exit_code
    if code == 3 or (code and not result.failing):  # some nodes, or every node, did not answer
        return _finish(code, result.outcomes, result.to_json() if args.json else None)
    if code:
        node, entry = result.failing[0]
        first = entry.problems[0].problem if entry.problems else "not ok"
        nodes = compress_hostlist(dict.fromkeys(n for n, _ in result.failing))
        raise command_failed(code, f"{plural(len(result.failing), 'entry', 'entries')} failed verification on {nodes}; "
                                   f"first: {node}: {entry.key}: {first}", result.to_json() if args.json else None)
    if args.json:
        emit_json(result.to_json())
    return code




def render_fleet_verify(result: FleetVerification) -> Block:
    """One line per failing entry and node with its first problems; then the nodes that did not answer."""
    lines: list[str] = []
    for node, entry in result.failing:
        lines.append(f"{node}  {entry.key}  {plural(len(entry.problems), 'problem')}")
        for p in entry.problems[:5]:
            where = ": ".join(x for x in (p.shard, p.param) if x is not None)
            lines.append(f"  {where + ': ' if where else ''}{p.problem}")
    for o in result.unanswered:
        lines.append(f"{o.node}  no answer: {o.error}")
    if result.not_verifiable:
        nodes = compress_hostlist(dict.fromkeys(node for node, _ in result.not_verifiable))
        lines.append(f"not verifiable: {plural(len(result.not_verifiable), 'entry', 'entries')} on {nodes} without a manifest.json "
                     "(a write in progress or crashed, an empty entry, or, on a node-local cache, "
                     "any node but rank 0's)")
    answered = len(result.outcomes) - len(result.unanswered)
    if not answered:
        lines.append(f"no node answered ({len(result.outcomes)} asked): nothing was verified")
    elif not result.failing:
        lines.append(f"verified on {answered} of {plural(len(result.outcomes), 'node')}: every verifiable entry "
                     "agrees with its manifest")
    else:
        nodes = compress_hostlist(dict.fromkeys(node for node, _ in result.failing))
        lines.append(f"{plural(len(result.failing), 'entry', 'entries')} failed verification "
                     f"on {nodes} ({answered} of {plural(len(result.outcomes), 'node')} answered)")
    return block(lines)
