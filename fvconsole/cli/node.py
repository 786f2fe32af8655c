"""Node-side runner: ``python -m fvconsole.cli.node [--time-limit S] [--per-node TABLE | ARGS...]``.

srun starts this once per node (see :mod:`fvconsole.core.fleet.dispatch`). It prints a start
frame at once, replaces ``{node}`` in every argument with the Slurm node name
(``SLURMD_NODENAME``) -- on the node, so sites whose node-local roots live side by side on
one filesystem (and the tests) can give each node its own root -- runs the ordinary headless
command in-process with stdout captured, and prints the result envelope as frames
(:mod:`fvconsole.core.fleet.frames`)::

    {"node": ..., "exit": <exit code>, "output": <the command's JSON or null>, ...}

The command runs in a forked child; the runner (the Slurm task itself) waits for it and
relays its frames, or reports how it died (``killed by SIGKILL``: the OOM killer, an admin).
Why: when a task of a step dies by a signal, srun force-terminates the step and stops
relaying output at its end, so the other nodes' results still in flight were lost (seen on
Slurm 22.05: the other tasks completed with exit 0, their frames never arrived). A runner
that outlives its command never dies by a signal itself.

``--time-limit S``: after S seconds the runner reports ``{"exit": null, "timeout": S}``,
kills its command and exits without waiting for it (a hung filesystem must not keep a
single job step, and every other node's result, waiting). ``--per-node TABLE``: a JSON object
``{"<hostlist>": [args...]}``, for single steps where nodes are asked different things (an
eviction executes each node's own keys); the node picks the entry that names it.
The command's stderr passes through untouched (srun labels it with the task). The runner's own
options are checked like the CLI's before anything runs: a bad one is one ``error:`` line on
stderr and exit 2, no frames (only a person typing the command can get one wrong).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from fvconsole.cli.outcome import CommandOutcome
from fvconsole.cli.streams import stdout_copy, write_err
from fvconsole.core.fleet import MAX_TIMEOUT, read_pipes, result_lines, start_line
from fvconsole.core.shared import (
    SIGNALS,
    FvError,
    UntrustedError,
    UsageError,
    decode,
    decode_object,
    printable,
    signal_name,
)

NODE_PLACEHOLDER = "{node}"
_SNIPPET = 300


def node_name() -> str | None:
    """The Slurm node name of this task (None outside a Slurm step)."""
    return os.environ.get("SLURMD_NODENAME") or None


def substitute_node(argv: Sequence[str], node: str) -> list[str]:
    """Replace ``{node}`` in every argument."""
    return [arg.replace(NODE_PLACEHOLDER, node) for arg in argv]


def run_captured(argv: Sequence[str]) -> tuple[CommandOutcome, str]:
    """Run ``fvconsole <argv>`` in-process; return (how it ended, captured stdout)."""
    from fvconsole.cli import run

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            outcome = run(list(argv))
        except SystemExit as exc:  # argparse usage errors
            outcome = CommandOutcome(exc.code if isinstance(exc.code, int) else 2)
    return outcome, buffer.getvalue()


def reported_reason(outcome: CommandOutcome) -> dict[str, Any] | None:
    """The refusal (as data) of a command that failed with one."""
    return outcome.reason.to_json() if outcome.exit_code and outcome.reason is not None else None


def envelope(node: str, code: int, stdout: str, reason: dict[str, Any] | None = None) -> dict[str, Any]:
    """Wrap the command's stdout: parsed JSON under "output", or a snippet when it is not JSON.

    ``reason``: the command's refusal as data (``Reason.to_json``), so the console can word it.
    """
    payload: dict[str, Any] = {"node": node, "exit": code, "output": None}
    if reason is not None:
        payload["reason"] = reason
    text = stdout.strip()
    try:
        parsed = decode(text, "output", "command output") if text else None
    except UntrustedError:
        parsed = None
    if isinstance(parsed, dict):
        payload["output"] = parsed
    else:
        payload["invalid_output"] = text[:_SNIPPET]
    return payload


def request_for(node: str, table_text: str) -> list[str] | None:
    """This node's arguments from a ``--per-node`` table (None: the table does not name it)."""
    from fvconsole.core.fleet import expand_hostlist

    table = decode_object(table_text, "--per-node", "table")
    for hostlist, args in table.items():
        if node in expand_hostlist(hostlist, "--per-node"):
            return [str(a) for a in args]
    return None


USAGE = "usage: python -m fvconsole.cli.node [--time-limit S] [--per-node TABLE | ARGS...]"
TIME_LIMIT, PER_NODE = "--time-limit", "--per-node"


def _time_limit(text: str) -> float:
    """``--time-limit S``: seconds, as ``fleet --timeout`` takes them (positive, at most a day)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT:
        raise UsageError(f"{TIME_LIMIT} must be a positive number of seconds up to {MAX_TIMEOUT:g} "
                         f"(got {text[:40]!r})")
    return value


def _table(text: str) -> str:
    """``--per-node TABLE``: a JSON object of hostlist -> list of arguments (checked here, picked per node later)."""
    try:
        table = decode_object(text, PER_NODE, "table")
        from fvconsole.core.fleet import expand_hostlist

        for hostlist, args in table.items():
            expand_hostlist(hostlist, PER_NODE)
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ValueError(f"the arguments of {hostlist[:40]!r} are not a list of strings")
    except (ValueError, FvError) as exc:  # the untrusted decoder's and the hostlist's errors are FvErrors
        raise UsageError(f"{PER_NODE}: unreadable table ({exc})") from None
    return text


def _options(args: list[str]) -> tuple[float | None, str | None, list[str]]:
    """The runner's options, then the command's arguments; UsageError for a bad or missing one."""
    limit: float | None = None
    table: str | None = None
    while args[:1] and args[0] in (TIME_LIMIT, PER_NODE):
        flag = args[0]
        if len(args) < 2:
            raise UsageError(f"{flag} needs a value")
        if (limit if flag == TIME_LIMIT else table) is not None:
            raise UsageError(f"{flag} given twice")
        if flag == TIME_LIMIT:
            limit = _time_limit(args[1])
        else:
            table = _table(args[1])
        args = args[2:]
    if table is not None and args:
        raise UsageError(f"{PER_NODE} takes the place of the command's arguments (got {args[0][:40]!r} after it)")
    if table is None and not args:
        raise UsageError("no command given")
    return limit, table, args


class _Out:
    """The runner's own stdout, kept apart from the command's (which is captured)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file = stdout_copy()  # fd 1 itself

    def lines(self, lines: Sequence[str]) -> None:
        with self._lock:
            self._file.write("".join(line + "\n" for line in lines))
            self._file.flush()

    def write(self, data: bytes) -> None:
        """Relay the command's frames as they were written."""
        with self._lock:
            self._file.flush()
            self._file.buffer.write(data)
            self._file.flush()


def _run(node: str, args: list[str], table: str | None) -> dict[str, Any]:
    if table is not None:
        try:
            picked = request_for(node, table)
        except (ValueError, AttributeError, TypeError) as exc:
            return {"node": node, "exit": 2, "output": {"error": f"--per-node: unreadable table ({exc})"}}
        if picked is None:
            return {"node": node, "exit": 2, "output": {"error": f"--per-node: no request for node {node}"}}
        args = picked
    ended, stdout = run_captured(substitute_node(args, node))
    outcome = ended if isinstance(ended, CommandOutcome) else CommandOutcome(int(ended))  # a bare code: no reason
    return envelope(node, outcome.exit_code, stdout, reported_reason(outcome))


class _Reporter:
    """Prints this node's one result: the command's (in the child), its death's or the time limit's."""

    def __init__(self, out: _Out, node: str) -> None:
        self._out = out
        self._node = node

    def time_up(self, limit: float) -> None:
        """The node's own time limit ran out before the command reported."""
        self._out.lines(result_lines(self._node, {"node": self._node, "exit": None, "output": None,
                                                  "timeout": limit}))

    def result(self, payload: dict[str, Any]) -> None:
        try:
            lines = result_lines(self._node, payload)
        except ValueError:  # NaN in the command's JSON: never sent as such
            lines = result_lines(self._node, {"node": self._node, "exit": payload.get("exit"), "output": None,
                                              "invalid_output": "command output contains NaN or Infinity"})
        self._out.lines(lines)


def _command(node: str, args: list[str], table: str | None, write_end: int) -> NoReturn:
    """The forked child: run the command, write its result frames into the pipe, exit."""
    os.dup2(write_end, 1)  # fd 1 is the pipe: the frames, and anything written to fd 1 directly
    os.close(write_end)
    code = 0
    try:
        try:
            payload = _run(node, args, table)
        except BaseException as exc:  # noqa: BLE001 - the runner must get a result either way
            payload = {"node": node, "exit": 1, "output": {"error": f"node runner: {type(exc).__name__}: {exc}"}}
        _Reporter(_Out(), node).result(payload)
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - nothing may unwind into the runner's code after fork
        code = 1
    os._exit(code)


def _died(node: str, status: int) -> dict[str, Any]:
    """The result for a command that ended without reporting one (a signal, most likely SIGKILL)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return {"node": node, "exit": 128 + sig,
                "output": {"error": f"the command was killed by {signal_name(sig)} before it reported"}}
    code = os.waitstatus_to_exitcode(status)
    return {"node": node, "exit": code or 1, "output": {"error": f"the command ended (exit {code}) without a result"}}


def _collect(read_end: int, limit: float | None) -> tuple[bytes, bool]:
    """Everything the child writes until it closes the pipe; (data, False) when the limit ran out first."""
    chunks: list[bytes] = []
    ended = read_pipes({read_end: chunks.append}, None if limit is None else time.monotonic() + limit)
    return b"".join(chunks), ended


def _forward_signals(pid: int) -> None:
    """SIGTERM/SIGINT/SIGHUP reach the command (scancel, a step's teardown): it stops in order and reports."""
    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for sig in SIGNALS:
        signal.signal(sig, forward)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command for this node and print its frames; exit 0 once it ran (or timed out).

    The command runs in the main thread of a forked child, so SIGTERM from ``scancel`` or a
    step's teardown reaches it as an orderly interruption (:mod:`fvconsole.core.shared.interrupts`):
    an eviction stops between files, unlocks, journals and reports exit 3 or 143 like on a
    login node (the runner forwards the signals it gets; a second one is ignored there).
    """
    try:
        limit, table, args = _options(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        write_err(f"error: {printable(str(exc))}; {USAGE}\n")
        return 2
    out = _Out()
    node = node_name()
    if node is None:
        out.lines(result_lines("?", {"node": None, "exit": 1,
                                     "output": {"error": "SLURMD_NODENAME is not set: run under srun"}}))
        return 1
    out.lines([start_line(node)])
    reporter = _Reporter(out, node)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _command(node, args, table, write_end)
    os.close(write_end)
    _forward_signals(pid)
    data, ended = _collect(read_end, limit)
    if not ended:
        reporter.time_up(limit or 0.0)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return 0  # never wait for a command stuck in the kernel (a hung filesystem)
    _, status = os.waitpid(pid, 0)
    if status == 0 and data:
        out.write(data)
    else:
        reporter.result(_died(node, status))
    return 0


if __name__ == "__main__":
    sys.exit(main())
