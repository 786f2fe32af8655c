"""Run one headless fvconsole command on each selected node through ``srun``.

Two fan-outs, same per-node outcomes (:mod:`.outcomes`):

- **per-node**: one ``srun -N1 --nodelist=<node>`` per node, ``parallel`` at a time. Each
  node has its own step, exit status and timeout, so a down or busy node cannot hold up
  the others; but 1,000 nodes are 1,000 job steps, which slurmctld creates one at a time.
- **single-step**: one ``srun -N<n> --ntasks-per-node=1 --kill-on-bad-exit=0 --label`` for
  all nodes: one job step. A task that fails does not end the step (``--kill-on-bad-exit=0``);
  each node's runner stops itself at ``--time-limit`` and reports a timeout, so one hung node
  costs the step its timeout, not forever; output is demultiplexed by the runner's framed
  lines (:mod:`.frames`). ``--immediate`` makes srun give up instead of waiting when a node
  is busy or down; nodes that never started (the step failed to launch) are then retried one
  srun per node, which isolates the bad node exactly as per-node fan-out does.

``auto`` (the default) uses per-node fan-out up to :data:`SINGLE_STEP_MIN_NODES` nodes and a
single step above. With ``--job`` every step runs inside that allocation (``--jobid=J
--overlap``), so it works while the training job still runs. Each node runs the node runner
(:mod:`fvconsole.cli.node`) with the same interpreter path and the same fvconsole package as on
the login node (a shared filesystem is assumed): :func:`node_command`.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

from fvconsole.core.fleet.demux import StepDemux
from fvconsole.core.fleet.hostlist import compress_hostlist
from fvconsole.core.fleet.outcomes import KINDS, NodeOutcome, classify, from_envelope
from fvconsole.core.fleet.process import Running, run_srun
from fvconsole.core.fleet.selection import NodeSelection, find_srun
from fvconsole.core.shared.errors import UsageError
from fvconsole.core.shared.progress import Progress, no_progress

DEFAULT_TIMEOUT = 60.0
DEFAULT_PARALLEL = 32
#: Longest --timeout accepted: a fleet command that needs more than a day is a mistake.
MAX_TIMEOUT = 86400.0
MAX_PARALLEL = 4096
PER_NODE, SINGLE_STEP, AUTO = "per-node", "single-step", "auto"
FANOUTS = (AUTO, PER_NODE, SINGLE_STEP)
#: ``auto`` uses one job step above this many nodes (below it, per-node steps are few).
SINGLE_STEP_MIN_NODES = 16
#: Bytes of stdout kept per node; more makes that node ``invalid`` (a cache listing of
#: thousands of entries is a few MiB).
MAX_NODE_OUTPUT = 16 << 20
#: The login side waits this much longer than the nodes' own limit in a single step (launch, I/O).
STEP_SLACK = 10.0
#: Longest per-node request table passed to one single step as an argument (Linux: 128 KiB per arg).
MAX_REQUEST_ARG = 64 << 10
NODE_MODULE = "fvconsole.cli.node"
#: The fvconsole package this process runs (``fvconsole/``), which every node must import too.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: ``python -c`` program that starts the node runner from :data:`PACKAGE_DIR`, whatever the node's
#: working directory holds. ``python -m`` would put that directory first on ``sys.path`` (srun keeps
#: the caller's, often a home holding a checkout named ``fvconsole``): an editable install then fails
#: to import and a real ``fvconsole/`` there shadows any install. ``-P`` needs Python 3.11 and ``-I``
#: drops ``PYTHONPATH`` and user site-packages, so the program drops the working directory from
#: ``sys.path`` itself (as ``-P`` does) and imports the package from its own location.
_BOOTSTRAP = ("import sys, importlib.util as u; sys.path[:1] = [p for p in sys.path[:1] if p]; "
              "spec = u.spec_from_file_location('fvconsole', {init!r}, submodule_search_locations=[{package!r}]); "
              "m = u.module_from_spec(spec); sys.modules['fvconsole'] = m; spec.loader.exec_module(m); "
              "from {module} import main; sys.exit(main())")  # one line: srun and ps show it as one

__all__ = ["DispatchOptions", "FleetRun", "KINDS", "NodeOutcome", "NodeSelection", "SrunStep", "SrunSteps",
           "build_steps", "check_options", "run_steps"]


def check_options(timeout: float, parallel: int, fanout: str) -> None:
    """Usage errors for dispatch settings (judged before anything runs, srun or not)."""
    if not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT:
        raise UsageError(f"--timeout must be a positive number of seconds up to {MAX_TIMEOUT:g} (got {timeout:g})")
    if not 1 <= parallel <= MAX_PARALLEL:
        raise UsageError(f"--parallel must be between 1 and {MAX_PARALLEL} (got {parallel})")
    if fanout not in FANOUTS:
        raise UsageError(f"--fanout must be one of {', '.join(FANOUTS)} (got {fanout[:40]!r})")


@dataclass(frozen=True)
class DispatchOptions:
    """How nodes are reached: which srun, time limit, concurrency, fan-out, output budget."""

    srun: str = "srun"
    timeout: float = DEFAULT_TIMEOUT
    parallel: int = DEFAULT_PARALLEL
    fanout: str = AUTO
    max_output: int = MAX_NODE_OUTPUT

    def check(self) -> DispatchOptions:
        check_options(self.timeout, self.parallel, self.fanout)
        return self

    def resolve(self, nodes: int) -> str:
        """The fan-out used for this many nodes."""
        if self.fanout != AUTO:
            return self.fanout
        return SINGLE_STEP if nodes > SINGLE_STEP_MIN_NODES else PER_NODE


@dataclass(frozen=True)
class SrunStep:
    """One srun invocation: the nodes it covers and its exact argv."""

    nodes: tuple[str, ...]
    argv: tuple[str, ...]


@dataclass(frozen=True)
class SrunSteps:
    """Exactly what will run: the srun steps, and what each node is asked (``requests``)."""

    selection: NodeSelection
    steps: tuple[SrunStep, ...]
    requests: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (node, fvconsole args), selection order
    options: DispatchOptions = field(default_factory=DispatchOptions)
    fanout: str = PER_NODE  # resolved: per-node or single-step
    expects: str | None = None  # documents.LS / documents.EVICT: the shape each node's JSON must have
    srun: str = "srun"  # the resolved srun path


@dataclass(frozen=True)
class FleetRun:
    """Every node's outcome, in selection order, and how many srun steps it took."""

    steps: SrunSteps
    outcomes: tuple[NodeOutcome, ...]
    job_steps: int = 0

    @property
    def selection(self) -> NodeSelection:
        return self.steps.selection

    @property
    def failed(self) -> tuple[NodeOutcome, ...]:
        return tuple(o for o in self.outcomes if not o.ok)

    def by_node(self) -> dict[str, NodeOutcome]:
        return {o.node: o for o in self.outcomes}


# --------------------------------------------------------------------------- building


def _srun_argv(srun: str, selection: NodeSelection, nodes: Sequence[str], single: bool,
               timeout: float) -> list[str]:
    count = len(nodes)
    argv = [srun, f"--nodes={count}", f"--ntasks={count}", "--ntasks-per-node=1",
            f"--nodelist={compress_hostlist(nodes)}", "--job-name=fvconsole-fleet", "--quiet", "--label"]
    if single:
        # one failing task must not end the step; a busy/down node fails the launch fast (then per-node retry)
        argv += ["--kill-on-bad-exit=0", f"--immediate={max(1, min(10, math.ceil(timeout)))}"]
    if selection.job_id is not None:
        argv += [f"--jobid={selection.job_id}", "--overlap"]
    if selection.partition:
        argv.append(f"--partition={selection.partition}")
    return argv + list(selection.srun_args)


def node_command(package: str = PACKAGE_DIR) -> list[str]:
    """The interpreter and program that run the node runner of ``package`` (its arguments follow)."""
    program = _BOOTSTRAP.format(init=os.path.join(package, "__init__.py"), package=package, module=NODE_MODULE)
    return [sys.executable, "-c", program]


def _runner(runner_args: Sequence[str]) -> list[str]:
    return [*node_command(), *runner_args]


def _per_node_steps(srun: str, selection: NodeSelection,
                    requests: Sequence[tuple[str, tuple[str, ...]]], timeout: float) -> list[SrunStep]:
    return [SrunStep((node,), tuple(_srun_argv(srun, selection, [node], False, timeout) + _runner(args)))
            for node, args in requests]


def _single_steps(srun: str, selection: NodeSelection,
                  requests: Sequence[tuple[str, tuple[str, ...]]], timeout: float) -> list[SrunStep]:
    """As few steps as possible: nodes asked the same thing share one; different requests
    travel as a ``--per-node`` table, split so that no table outgrows one argument."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for node, args in requests:
        groups.setdefault(args, []).append(node)
    batches: list[list[tuple[tuple[str, ...], list[str]]]] = [[]]
    size = 0
    for args, nodes in groups.items():
        entry = len(json.dumps({compress_hostlist(nodes): list(args)}))
        if batches[-1] and size + entry > MAX_REQUEST_ARG:
            batches.append([])
            size = 0
        batches[-1].append((args, nodes))
        size += entry
    limit = ["--time-limit", f"{timeout:g}"]
    steps = []
    for batch in batches:
        if not batch:
            continue
        nodes = [node for _, group in batch for node in group]
        if len(batch) == 1:
            runner = _runner([*limit, *batch[0][0]])
        else:
            table = {compress_hostlist(group): list(args) for args, group in batch}
            runner = _runner([*limit, "--per-node", json.dumps(table, separators=(",", ":"))])
        steps.append(SrunStep(tuple(nodes), tuple(_srun_argv(srun, selection, nodes, True, timeout) + runner)))
    return steps


def build_steps(
    selection: NodeSelection,
    fv_args: Sequence[str] | Mapping[str, Sequence[str]] | Callable[[str], Sequence[str] | None],
    options: DispatchOptions | None = None,
    *,
    expects: str | None = None,
) -> SrunSteps:
    """The srun steps for ``fv_args`` on every node (a mapping or callable may differ per node; None skips)."""
    options = (options or DispatchOptions()).check()
    srun = find_srun(options.srun)
    requests: list[tuple[str, tuple[str, ...]]] = []
    for node in selection.nodes:
        if isinstance(fv_args, Mapping):
            args = fv_args.get(node)
        else:
            args = fv_args(node) if callable(fv_args) else fv_args
        if args is not None:
            requests.append((node, tuple(args)))
    fanout = options.resolve(len(requests))
    build = _single_steps if fanout == SINGLE_STEP else _per_node_steps
    steps = build(srun, selection, requests, options.timeout) if requests else []
    return SrunSteps(selection, tuple(steps), tuple(requests), options, fanout, expects, srun)


# --------------------------------------------------------------------------- running


class _Reporter:
    """Progress per node, once each, from any thread."""

    def __init__(self, progress: Progress, total: int) -> None:
        self._progress = progress
        self._total = total
        self._done: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, node: str, kind: str) -> None:
        with self._lock:
            if node in self._done:
                return
            self._done.add(node)
            done = len(self._done)
        self._progress(done, self._total, f"{node}: {kind}")


def _run_step(plan: SrunSteps, step: SrunStep, report: _Reporter, running: Running,
              retry_unstarted: bool) -> dict[str, NodeOutcome | None]:
    """One srun. With ``retry_unstarted``, a node whose runner never started (srun could not
    launch it: a busy node under ``--immediate``, or slurmctld refusing the allocation or the
    step for the moment) maps to None: nothing ran there, so it is tried again alone, once."""
    opts = plan.options
    multi = plan.fanout == SINGLE_STEP

    early: dict[str, NodeOutcome] = {}  # classified as each result arrived: its document is read once

    def arrived(node: str) -> None:
        stream = demux.streams[node]
        early[node] = from_envelope(node, stream.result.payload or {}, expects=plan.expects, timeout=opts.timeout)
        report(node, early[node].kind)

    demux = StepDemux(step.nodes, opts.max_output, on_result=arrived)
    deadline = opts.timeout + STEP_SLACK if multi else opts.timeout
    ran = run_srun(step.argv, demux, deadline, running)
    srun_line = demux.srun_stderr[-1] if demux.srun_stderr else ""
    out: dict[str, NodeOutcome | None] = {}
    for node in step.nodes:
        stream = demux.streams[node]
        if retry_unstarted and not stream.started and not ran.timed_out and ran.start_error is None \
                and not running.stopping:
            out[node] = None
            continue
        read = early.get(node)
        outcome = classify(stream, expects=plan.expects, timeout=opts.timeout, cap=opts.max_output,
                           srun_exit=ran.exit_code, timed_out=ran.timed_out, srun_line=srun_line,
                           start_error=ran.start_error, document=read.document if read is not None else None)
        out[node] = outcome
        report(node, outcome.kind)
    return out


def _run_all(plan: SrunSteps, steps: Sequence[SrunStep], report: _Reporter,
             running: Running, retry_unstarted: bool) -> dict[str, NodeOutcome | None]:
    results: dict[str, NodeOutcome | None] = {}
    if len(steps) == 1:
        return _run_step(plan, steps[0], report, running, retry_unstarted)
    pool = ThreadPoolExecutor(max_workers=min(plan.options.parallel, len(steps)), thread_name_prefix="fleet")
    try:
        futures = [pool.submit(_run_step, plan, step, report, running, retry_unstarted) for step in steps]
        for future in as_completed(futures):
            results.update(future.result())
    except BaseException:
        running.stop_all()  # before waiting for the pool: its threads wait on these sruns
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def run_steps(plan: SrunSteps, progress: Progress | None = None) -> FleetRun:
    """Execute exactly the planned steps, then retry nodes whose runner never started one by one, once.

    On an interrupt (Ctrl-C) every srun in flight is terminated (which cancels its step)
    before the interrupt propagates.
    """
    report = _Reporter(progress or no_progress, len(plan.requests))
    running = Running()
    job_steps = len(plan.steps)
    try:
        results = _run_all(plan, plan.steps, report, running, True) if plan.steps else {}
        retry = [(node, args) for node, args in plan.requests if node in results and results[node] is None]
        if retry:
            again = _per_node_steps(plan.srun, plan.selection, retry, plan.options.timeout)
            per_node = replace(plan, fanout=PER_NODE)
            results.update(_run_all(per_node, again, report, running, False))
            job_steps += len(again)
    except BaseException:
        running.stop_all()
        raise
    outcomes = tuple(results[node] for node, _ in plan.requests if results.get(node) is not None)
    return FleetRun(plan, outcomes, job_steps)
