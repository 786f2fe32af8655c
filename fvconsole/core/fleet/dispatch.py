"""Run one headless fvconsole command on each selected node through ``srun``.

Design: **one srun per node**, run from a bounded thread pool. A single
``srun -N<count> --ntasks-per-node=1`` for all nodes would be one job step (cheapest for
slurmctld), but then one down or hung node stalls or fails the whole step and a timeout
can only kill every node at once. One ``srun -N1 -w <node>`` per node gives each node its
own exit status, output and timeout, so a bad node is reported while the others succeed.
The cost is one job step per node; ``parallel`` (default 32) bounds how many run at once,
so thousands of nodes take ``nodes / parallel`` rounds rather than thousands of
simultaneous srun processes.

With ``--job`` the job's nodes are read with ``squeue`` and each step runs inside that
allocation (``--jobid=J --overlap``), so it works while the training job still runs.

Each node runs ``<this interpreter> -m fvconsole.core.fleet.node <args>``: the same
interpreter path as on the login node (a shared filesystem is assumed), which prints one
``FVNODE <node> <json>`` line (see :mod:`fvconsole.core.fleet.node`).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from fvconsole.core.errors import UsageError
from fvconsole.core.fleet.node import MARKER
from fvconsole.core.fleet.selection import NodeSelection, find_srun, job_nodes, select_nodes
from fvconsole.core.progress import Progress, no_progress

DEFAULT_TIMEOUT = 60.0
DEFAULT_PARALLEL = 32
_KILL_GRACE = 5.0
_TAIL = 400

#: Outcome kinds: ok, failed (the command ran and refused/failed), timeout, invalid
#: (output that is not one well-formed result line), unreachable (no result line at all).
KINDS = ("ok", "failed", "timeout", "invalid", "unreachable")

__all__ = ["FleetPlan", "FleetRun", "NodeCommand", "NodeOutcome", "NodeSelection", "build_plan", "find_srun",
           "job_nodes", "node_command", "outcome_from_output", "parse_node_output", "run_plan", "select_nodes"]


@dataclass(frozen=True)
class NodeCommand:
    """The exact argv srun is started with for one node."""

    node: str
    argv: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "argv": list(self.argv)}


@dataclass(frozen=True)
class FleetPlan:
    """Exactly what will run: one command per node, with the per-node timeout."""

    selection: NodeSelection
    commands: tuple[NodeCommand, ...]
    timeout: float = DEFAULT_TIMEOUT
    parallel: int = DEFAULT_PARALLEL

    def to_json(self) -> dict[str, Any]:
        return {
            "selection": self.selection.to_json(),
            "timeout": self.timeout,
            "parallel": self.parallel,
            "commands": [c.to_json() for c in self.commands],
        }


@dataclass(frozen=True)
class NodeOutcome:
    """What one node answered (or why it did not)."""

    node: str
    kind: str  # one of KINDS
    exit_code: int | None  # the fvconsole command's exit code on the node
    output: dict[str, Any] | None  # its JSON document
    error: str | None  # one-line reason when kind != "ok"
    srun_exit: int | None = None
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def may_have_acted(self) -> bool:
        """True when a failed node may still have changed something (timed out, or exit 3)."""
        return self.kind == "timeout" or self.exit_code == 3

    def to_json(self) -> dict[str, Any]:
        """The node's own JSON document, or ``{"error": reason, ...}``."""
        if self.ok and self.output is not None:
            return self.output
        payload: dict[str, Any] = dict(self.output or {})
        payload["error"] = self.error or "failed"
        payload["failure"] = self.kind
        if self.exit_code is not None:
            payload["exit_code"] = self.exit_code
        return payload


@dataclass(frozen=True)
class FleetRun:
    """Every node's outcome, in selection order."""

    plan: FleetPlan
    outcomes: tuple[NodeOutcome, ...]

    @property
    def failed(self) -> tuple[NodeOutcome, ...]:
        return tuple(o for o in self.outcomes if not o.ok)

    def by_node(self) -> dict[str, NodeOutcome]:
        return {o.node: o for o in self.outcomes}


# --------------------------------------------------------------------------- commands


def node_command(srun: str, selection: NodeSelection, node: str, fv_args: Sequence[str]) -> NodeCommand:
    """``srun -N1 -n1 -w <node> [--jobid=J --overlap] ... <python> -m fvconsole.core.fleet.node <args>``."""
    argv = [srun, "--nodes=1", "--ntasks=1", "--ntasks-per-node=1", f"--nodelist={node}",
            "--job-name=fvconsole-fleet", "--quiet"]
    if selection.job_id is not None:
        argv += [f"--jobid={selection.job_id}", "--overlap"]
    if selection.partition:
        argv.append(f"--partition={selection.partition}")
    argv += list(selection.srun_args)
    argv += [sys.executable, "-m", "fvconsole.core.fleet.node", *fv_args]
    return NodeCommand(node, tuple(argv))


def build_plan(
    selection: NodeSelection,
    fv_args: Sequence[str] | Callable[[str], Sequence[str] | None],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    parallel: int = DEFAULT_PARALLEL,
    srun: str = "srun",
) -> FleetPlan:
    """One command per node; ``fv_args`` may depend on the node (None skips that node)."""
    if not math.isfinite(timeout) or timeout <= 0:  # nan/inf reached int() deep in the runner
        raise UsageError(f"--timeout must be a positive number of seconds (got {timeout:g})")
    if parallel < 1:
        raise UsageError(f"--parallel must be at least 1 (got {parallel})")
    exe = find_srun(srun)
    commands = []
    for node in selection.nodes:
        args = fv_args(node) if callable(fv_args) else fv_args
        if args is not None:
            commands.append(node_command(exe, selection, node, args))
    return FleetPlan(selection, tuple(commands), float(timeout), int(parallel))


# --------------------------------------------------------------------------- running


def _one_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:_TAIL] if lines else ""


def _tail(text: str) -> str:
    return " | ".join(line.strip() for line in (text or "").splitlines()[-3:] if line.strip())[-_TAIL:]


def parse_node_output(node: str, stdout: str) -> tuple[dict[str, Any] | None, str | None]:
    """The node's result envelope from srun's stdout, or (None, reason)."""
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER + " ")]
    if not lines:
        return None, None
    if len(lines) > 1:
        return None, f"{len(lines)} result lines instead of one"
    parts = lines[0].split(" ", 2)
    if len(parts) != 3:
        return None, "truncated result line"
    if parts[1] != node:
        return None, f"answered as node {parts[1]!r}"
    try:
        payload = json.loads(parts[2])
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON in result line ({exc.msg} at char {exc.pos})"
    except (ValueError, RecursionError) as exc:  # digit limit, absurd nesting
        return None, f"unusable JSON in result line ({type(exc).__name__})"
    if not isinstance(payload, dict):
        return None, "result line is not a JSON object"
    return payload, None


def outcome_from_output(node: str, stdout: str, stderr: str, srun_exit: int | None) -> NodeOutcome:
    """Classify one node's srun output into an outcome."""
    tail = _tail(stderr)
    payload, problem = parse_node_output(node, stdout)
    if problem:
        return NodeOutcome(node, "invalid", None, None, problem, srun_exit, tail)
    if payload is None:
        why = _one_line(stderr) or (f"srun exit {srun_exit}" if srun_exit else "no output")
        return NodeOutcome(node, "unreachable", None, None, f"no result from node: {why}", srun_exit, tail)
    code = payload.get("exit")
    output = payload.get("output")
    if not isinstance(output, dict):
        snippet = str(payload.get("invalid_output", ""))[:120]
        if not snippet and code not in (0, None):  # e.g. a usage error: the reason is on stderr
            why = _one_line(stderr) or "no output"
            return NodeOutcome(node, "failed", code, None, f"exit {code}: {why}", srun_exit, tail)
        reason = f"command printed invalid JSON (exit {code}): {snippet!r}"
        return NodeOutcome(node, "invalid", code, None, reason, srun_exit, tail)
    if code != 0:
        reason = str(output.get("error") or f"exit {code}")
        return NodeOutcome(node, "failed", code, output, reason, srun_exit, tail)
    return NodeOutcome(node, "ok", 0, output, None, srun_exit, tail)


def _terminate(proc: subprocess.Popen) -> None:
    """SIGTERM srun's process group (srun cancels the step on the node), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=_KILL_GRACE)
            return
        except subprocess.TimeoutExpired:
            continue


class _Running:
    """The srun processes in flight, so an interrupted run can stop them all (they run in
    their own sessions and would not see the terminal's Ctrl-C)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.stopping = False

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)
        if self.stopping:
            _terminate(proc)

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        self.stopping = True
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            _terminate(proc)


def run_command(command: NodeCommand, timeout: float, running: _Running | None = None) -> NodeOutcome:
    """Run one node's srun with a timeout; never raises for node-side problems."""
    if running is not None and running.stopping:
        return NodeOutcome(command.node, "unreachable", None, None, "not started: interrupted")
    try:
        proc = subprocess.Popen(
            list(command.argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
    except OSError as exc:
        return NodeOutcome(command.node, "unreachable", None, None, f"cannot start srun: {exc.strerror}")
    if running is not None:
        running.add(proc)
    try:
        return _collect(command.node, proc, timeout)
    finally:
        if running is not None:
            running.discard(proc)


def _collect(node: str, proc: subprocess.Popen, timeout: float) -> NodeOutcome:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _terminate(proc)
        try:
            stdout, stderr = proc.communicate(timeout=_KILL_GRACE)
        except subprocess.TimeoutExpired:
            stdout, stderr = "", ""
        return NodeOutcome(node, "timeout", None, None, f"timed out after {timeout:g}s", proc.returncode,
                           _tail(stderr))
    return outcome_from_output(node, stdout, stderr, proc.returncode)


def run_plan(plan: FleetPlan, progress: Progress | None = None) -> FleetRun:
    """Execute exactly the plan's commands, ``plan.parallel`` at a time.

    On an interrupt (Ctrl-C) every srun in flight is terminated (which cancels its step)
    before the interrupt propagates.
    """
    report = progress or no_progress
    total = len(plan.commands)
    results: dict[str, NodeOutcome] = {}
    running = _Running()
    if total:
        pool = ThreadPoolExecutor(max_workers=min(plan.parallel, total), thread_name_prefix="fleet")
        try:
            futures = [pool.submit(run_command, c, plan.timeout, running) for c in plan.commands]
            for future in as_completed(futures):
                outcome = future.result()
                results[outcome.node] = outcome
                report(len(results), total, f"{outcome.node}: {outcome.kind}")
        except BaseException:
            running.stop_all()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return FleetRun(plan, tuple(results[c.node] for c in plan.commands))
