"""Slurm's view of the selected nodes: each node's state and running jobs, from ONE ``squeue``
and ONE ``sinfo`` call for the whole node set.

Why: before evicting an operator wants to see which nodes are busy. A job of the cache's
owner running on a node may be loading from that cache right now, or relaunch into it
(FastVideo reads the shards at every start). The per-node process check (``in_use_by``)
sees only files held open at that instant; Slurm knows the job. Never one call per node:
a thousand nodes are one ``squeue -w <hostlist>`` and one ``sinfo -n <hostlist>``.

Both outputs are untrusted text (job names and user names are anyone's): read bounded in
time and bytes, parsed with an explicit ``|``-delimited format, job name last and the job
id repeated after it (``%i|%U|%u|%T|%N|%j|%i``), so a ``|`` or a newline inside a job name
stays part of the name; node lists are expanded by :mod:`.hostlist`. Nothing here raises for
what Slurm does: a missing, failing or hung ``squeue``/``sinfo`` is the one note
"Slurm state unknown: <why>". The parsers are pure functions (tests feed them captured outputs).
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import subprocess
import threading
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.fleet.hostlist import MAX_HOSTS, compress_hostlist, expand_hostlist
from fvconsole.core.fleet.process import terminate
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import clipped
from fvconsole.core.shared.terminal_text import printable

#: squeue's format: job name last, the job id again after it (the record's end, see module doc).
SQUEUE_FORMAT = "%i|%U|%u|%T|%N|%j|%i"
#: The job states that hold a node (a pending job has none; a completing one still runs its epilog).
JOB_STATES = "RUNNING,COMPLETING"
#: sinfo's format: a node list and its state (one line per state group, hostlists expanded here).
SINFO_FORMAT = "%N|%T"
#: How long each call may take (squeue and sinfo run side by side).
DEFAULT_TIMEOUT = 10.0
#: Bytes of stdout kept from each call; more and the state is unknown (1,000 nodes of jobs are a few KiB).
MAX_OUTPUT = 8 << 20
_MAX_STDERR = 64 << 10
#: Characters of a job or user name kept (Slurm's own limit for a job name is far below).
MAX_NAME = 256
#: Lines that did not parse, named in the problems (the rest are counted).
MAX_PROBLEMS = 5

_JOB_HEAD = re.compile(r"(\d+(?:[_+]\d+)?)\|(\d*)\|([^|\n]*)\|([A-Z_]+)\|([^|\n]*)\|")
_NODE_LINE = re.compile(r"([^|\s]+)\|([A-Za-z_]+[*~#!%$@^+-]*)")


@dataclass(frozen=True)
class SlurmJob:
    """One running job as squeue reports it (``user`` and ``name`` are untrusted text)."""

    job_id: str
    uid: int | None
    user: str
    name: str
    state: str
    nodes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "uid": self.uid, "user": self.user, "name": self.name,
                "state": self.state, "nodes": compress_hostlist(self.nodes), "node_list": list(self.nodes)}

    def text(self) -> str:
        """``job 123 alice (train)``, made printable."""
        return printable(f"job {self.job_id} {self.user} ({self.name})")


@dataclass(frozen=True)
class NodeSlurm:
    """One node: sinfo's state (None: sinfo did not report it) and the jobs squeue lists on it."""

    node: str
    state: str | None
    jobs: tuple[SlurmJob, ...]

    def jobs_of(self, uids: Collection[int]) -> tuple[SlurmJob, ...]:
        """The jobs on this node run by one of ``uids`` (the cache's owners there)."""
        return tuple(j for j in self.jobs if j.uid is not None and j.uid in uids)

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "jobs": [j.job_id for j in self.jobs]}


@dataclass(frozen=True)
class SlurmState:
    """Slurm's state of a node set, or why it is unknown (``unknown``: one reason per failed call)."""

    nodes: tuple[NodeSlurm, ...]
    jobs: tuple[SlurmJob, ...] = ()
    #: Why squeue / sinfo could not be read; empty when both answered.
    unknown: tuple[str, ...] = ()
    #: Lines of their output that did not parse (shown, never fatal).
    problems: tuple[str, ...] = ()
    #: Whether squeue answered (jobs known); without it nothing can be judged busy.
    jobs_known: bool = True

    @property
    def note(self) -> str | None:
        """The one line an operator sees when Slurm's state could not be (fully) read."""
        return "Slurm state unknown: " + "; ".join(self.unknown) if self.unknown else None

    def get(self, node: str) -> NodeSlurm | None:
        return self._by_node.get(node)

    @property
    def _by_node(self) -> dict[str, NodeSlurm]:
        cached = self.__dict__.get("_index")
        if cached is None:
            cached = {n.node: n for n in self.nodes}
            object.__setattr__(self, "_index", cached)
        return cached

    def busy_jobs(self, node: str, uids: Collection[int]) -> tuple[SlurmJob, ...] | None:
        """Jobs of ``uids`` on ``node``; None when squeue could not be read (busy unknown)."""
        if not self.jobs_known:
            return None
        found = self.get(node)
        return found.jobs_of(uids) if found is not None else ()

    def to_json(self) -> dict[str, Any]:
        return {"ok": not self.unknown, "note": self.note, "problems": list(self.problems),
                "jobs_known": self.jobs_known, "nodes": {n.node: n.to_json() for n in self.nodes},
                "jobs": [j.to_json() for j in self.jobs]}


# --------------------------------------------------------------------------- parsing (pure)


class _Names:
    """The node names one output's node lists may expand to, in all.

    Why: one line of ``n[0-99999]|idle`` (16 bytes) is 100,000 names; a budget per expression
    alone let 8 MiB of such lines cost hours. Real outputs name each selected node a few times
    (once per partition, once per job on it), so the whole output gets :func:`name_budget`.
    """

    def __init__(self, budget: int) -> None:
        self.left = budget
        self.budget = budget

    def expand(self, text: str, field: str) -> tuple[str, ...]:
        if self.left <= 0:
            raise FvError(f"{field}: the node lists of this output name more than {self.budget} nodes in all")
        nodes = expand_hostlist(text, field)
        self.left -= len(nodes)
        return nodes


def name_budget(nodes: int) -> int:
    """Node names an squeue or sinfo output about ``nodes`` selected nodes may expand to."""
    return MAX_HOSTS + 64 * nodes


def parse_squeue(text: str, max_names: int = MAX_HOSTS) -> tuple[tuple[SlurmJob, ...], tuple[str, ...]]:
    """Jobs of ``squeue --noheader -o '%i|%U|%u|%T|%N|%j|%i'`` output, and the lines that did not parse.

    A record starts with ``id|uid|user|STATE|nodes|`` and ends at the first line that ends
    with ``|id``: a newline or ``|`` in a job name is part of the name. Linear in the text
    whatever it holds: a record's lines are kept as a list and only each new line is looked
    at (a job name left open by a million lines rebuilt and sliced the whole record per line);
    node lists expand to at most ``max_names`` names in all.
    """
    jobs: list[SlurmJob] = []
    problems: list[str] = []
    bad = 0
    head: re.Match[str] | None = None
    record: list[str] = []
    first_line = 0
    names = _Names(max_names)

    def problem(lineno: int, line: str, why: str) -> None:
        nonlocal bad
        bad += 1
        if bad <= MAX_PROBLEMS:
            problems.append(printable(f"squeue line {lineno}: {why}: {line[:80]!r}"))

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for lineno, line in enumerate(lines, 1):
        if head is None:
            head = _JOB_HEAD.match(line)
            if head is None:
                problem(lineno, line, "not a job line")
                continue
            record, first_line = [line[head.end():]], lineno
        else:
            record.append(line)
        end = "|" + head.group(1)
        if not record[-1].endswith(end):
            continue  # the job name goes on on the next line
        rest = "\n".join(record)
        name = rest[: len(rest) - len(end)]
        job_id, uid, user, state, node_list = head.groups()
        whole = head.group(0) + rest
        head = None
        try:
            nodes = names.expand(node_list, f"squeue node list of job {job_id}") if node_list.strip() else ()
        except FvError as exc:
            problem(first_line, whole, exc.message)
            continue
        jobs.append(SlurmJob(job_id, int(uid) if uid else None, clipped(user, MAX_NAME), clipped(name, MAX_NAME), state, nodes))
    if head is not None:
        problem(first_line, head.group(0) + record[0], "a job line without its end")
    if bad > MAX_PROBLEMS:
        problems.append(f"squeue: {bad - MAX_PROBLEMS} more lines did not parse")
    return tuple(jobs), tuple(problems)


def parse_sinfo(text: str, max_names: int = MAX_HOSTS) -> tuple[dict[str, str], tuple[str, ...]]:
    """node -> state of ``sinfo --noheader -o '%N|%T'`` output (node lists expanded), and the bad lines.

    A node in two partitions is listed twice with the same state; the first one stands. The
    node lists expand to at most ``max_names`` names in all (linear in the text, not in what
    its brackets say).
    """
    states: dict[str, str] = {}
    problems: list[str] = []
    bad = 0
    names = _Names(max_names)
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _NODE_LINE.fullmatch(line.strip())
        why = "not a node line"
        if match is not None:
            try:
                for node in names.expand(match.group(1), "sinfo node list"):
                    states.setdefault(node, match.group(2))
                continue
            except FvError as exc:
                why = exc.message
        bad += 1
        if bad <= MAX_PROBLEMS:
            problems.append(printable(f"sinfo line {lineno}: {why}: {line[:80]!r}"))
    if bad > MAX_PROBLEMS:
        problems.append(f"sinfo: {bad - MAX_PROBLEMS} more lines did not parse")
    return states, tuple(problems)


def slurm_state(nodes: Sequence[str], squeue_text: str | None, sinfo_text: str | None,
                unknown: Iterable[str] = ()) -> SlurmState:
    """The state of ``nodes`` from both outputs (None: that call failed, its why in ``unknown``)."""
    budget = name_budget(len(nodes))
    jobs, problems = parse_squeue(squeue_text, budget) if squeue_text is not None else ((), ())
    states, sinfo_problems = parse_sinfo(sinfo_text, budget) if sinfo_text is not None else ({}, ())
    wanted = set(nodes)
    by_node: dict[str, list[SlurmJob]] = {}
    for job in jobs:
        for node in job.nodes:
            if node in wanted:
                by_node.setdefault(node, []).append(job)
    per_node = tuple(NodeSlurm(n, states.get(n), tuple(by_node.get(n, ()))) for n in nodes)
    listed = tuple(j for j in jobs if any(n in wanted for n in j.nodes))
    return SlurmState(per_node, listed, tuple(unknown), problems + sinfo_problems,
                      jobs_known=squeue_text is not None)


# --------------------------------------------------------------------------- reading (bounded)


@dataclass(frozen=True)
class SlurmQuery:
    """Which squeue and sinfo to run and for how long (the console and tests point them at stand-ins)."""

    squeue: str = "squeue"
    sinfo: str = "sinfo"
    timeout: float = DEFAULT_TIMEOUT
    max_output: int = MAX_OUTPUT


#: The query every fleet listing and eviction preview makes unless told otherwise.
DEFAULT_QUERY = SlurmQuery()


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return printable(lines[-1][:300]) if lines else ""


def run_bounded(argv: Sequence[str], timeout: float, max_output: int) -> tuple[str | None, str]:
    """(stdout, "") of a command that exited 0 within ``timeout`` with at most ``max_output`` bytes,
    else (None, why). Never raises for what the command does."""
    name = os.path.basename(argv[0])
    exe = shutil.which(argv[0])
    if exe is None:
        return None, f"{name} not found"
    try:
        proc = subprocess.Popen([exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return None, f"cannot start {name}: {exc.strerror or exc}"
    out, err = bytearray(), bytearray()
    why = ""
    until = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, out)
            sel.register(proc.stderr, selectors.EVENT_READ, err)
            while sel.get_map() and not why:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    why = f"{name} did not answer within {timeout:g}s"
                    break
                for key, _ in sel.select(timeout=min(remaining, 0.5)):
                    data = os.read(key.fileobj.fileno(), 1 << 16)
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    key.data.extend(data)
                    if len(out) > max_output:
                        why = f"{name} printed more than {max_output >> 20} MiB"
                    del err[_MAX_STDERR:]
        if not why:
            try:
                proc.wait(timeout=max(0.1, until - time.monotonic()))
            except subprocess.TimeoutExpired:
                why = f"{name} did not answer within {timeout:g}s"
    finally:
        if proc.returncode is None:
            terminate(proc, grace=2)
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
    if why:
        return None, why
    if proc.returncode != 0:
        return None, f"{name} failed: {_last_line(bytes(err)) or f'exit {proc.returncode}'}"
    return bytes(out).decode("utf-8", "replace"), ""


def squeue_argv(query: SlurmQuery, hostlist: str) -> list[str]:
    return [query.squeue, "--noheader", f"--states={JOB_STATES}", f"--nodelist={hostlist}", "-o", SQUEUE_FORMAT]


def sinfo_argv(query: SlurmQuery, hostlist: str) -> list[str]:
    return [query.sinfo, "--noheader", f"--nodes={hostlist}", "-o", SINFO_FORMAT]


def read_slurm_state(nodes: Sequence[str], query: SlurmQuery | None = None) -> SlurmState:
    """One squeue and one sinfo call for all of ``nodes``, side by side, each bounded; never raises."""
    query = query or SlurmQuery()
    if not nodes:
        return SlurmState(())
    hostlist = compress_hostlist(nodes)
    results: dict[str, tuple[str | None, str]] = {}

    def call(which: str, argv: list[str]) -> None:
        results[which] = run_bounded(argv, query.timeout, query.max_output)

    sinfo = threading.Thread(target=call, args=("sinfo", sinfo_argv(query, hostlist)), daemon=True)
    sinfo.start()
    call("squeue", squeue_argv(query, hostlist))
    sinfo.join()
    unknown = [why for _text, why in (results["squeue"], results["sinfo"]) if why]
    return slurm_state(nodes, results["squeue"][0], results["sinfo"][0], unknown)
