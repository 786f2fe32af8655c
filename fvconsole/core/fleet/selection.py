"""Which nodes a fleet command runs on: ``--nodes`` hostlists, ``--job`` allocations, srun lookup."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.fleet.hostlist import compress_hostlist, expand_hostlist
from fvconsole.core.shared.errors import FvError, UsageError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.reasons import reason

_JOB_ID = re.compile(r"^\d+([_+]\d+)?$")
#: What squeue says (exit 1) for a job id slurmctld does not know.
_UNKNOWN_JOB = "Invalid job id specified"


def _one_line(text: str, limit: int = 400) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


@dataclass(frozen=True)
class NodeSelection:
    """Which nodes to run on, and how srun reaches them."""

    nodes: tuple[str, ...]
    job_id: str | None = None
    partition: str | None = None
    srun_args: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, nodes=compress_hostlist(self.nodes), node_list=list(self.nodes), count=len(self.nodes))


def find_srun(srun: str = "srun") -> str:
    """Absolute path of srun, or the refusal every fleet command gives without Slurm."""
    found = shutil.which(srun)
    if not found:
        raise FvError(f"{srun} not found: fleet commands need Slurm (srun on PATH)")
    return found


def job_nodes(job_id: str, squeue: str = "squeue", timeout: float = 30.0) -> tuple[str, ...]:
    """The nodes a running job holds, read with ``squeue -j JOBID -o '%T %N'``."""
    if not _JOB_ID.match(job_id):
        raise UsageError.of(reason("fleet.job_id", "job", shown=repr(job_id[:40])))
    exe = shutil.which(squeue)
    if not exe:
        raise FvError(f"{squeue} not found: fleet commands need Slurm (squeue on PATH)")
    try:
        proc = subprocess.run(
            [exe, "-h", "-j", job_id, "-o", "%T %N"],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise FvError.of(reason("fleet.squeue_timeout", "job", job=job_id, timeout=f"{timeout:g}")) from exc
    if proc.returncode != 0:
        why = _one_line(proc.stderr) or f"exit {proc.returncode}"
        if _UNKNOWN_JOB in why:  # squeue's words for a job slurmctld does not know (finished and purged, or a typo)
            raise FvError.of(reason("fleet.no_such_job", "job", job=job_id))
        raise FvError.of(reason("fleet.squeue_failed", "job", job=job_id, why=why))
    lines = [line.split(None, 1) for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise FvError.of(reason("fleet.no_such_job", "job", job=job_id))
    nodes: dict[str, None] = {}
    states = set()
    for parts in lines:
        states.add(parts[0])
        if len(parts) == 2 and parts[1].strip() and parts[1].strip() != "(null)":
            nodes.update(dict.fromkeys(expand_hostlist(parts[1].strip(), f"squeue node list of job {job_id}")))
    if not nodes:
        raise FvError.of(reason("fleet.job_without_nodes", "job", job=job_id, states=", ".join(sorted(states))))
    return tuple(nodes)


def parse_node_list(nodes: str | None) -> tuple[str, ...] | None:
    """``--nodes`` expanded; a malformed or oversized hostlist is a usage error (exit 2)."""
    if nodes is None:
        return None
    try:
        return expand_hostlist(nodes, "nodes")
    except FvError as exc:
        problem = exc.message.removeprefix("nodes: ")
        raise UsageError.of(reason("fleet.nodes_bad", "nodes", problem=problem)) from None


def check_selection_args(nodes: str | None, job_id: str | None) -> None:
    """Everything about ``--nodes`` / ``--job`` that can be judged without Slurm (before srun/squeue run)."""
    if nodes is None and job_id is None:
        raise UsageError.of(reason("fleet.no_selection", "nodes"))
    if job_id is not None and not _JOB_ID.match(job_id):
        raise UsageError.of(reason("fleet.job_id", "job", shown=repr(job_id[:40])))
    parse_node_list(nodes)


def select_nodes(
    nodes: str | None = None,
    job_id: str | None = None,
    partition: str | None = None,
    srun_args: Sequence[str] = (),
    *,
    squeue: str = "squeue",
) -> NodeSelection:
    """Resolve ``--nodes`` / ``--job`` into a node selection (both: the job's nodes, restricted)."""
    check_selection_args(nodes, job_id)
    wanted = parse_node_list(nodes)
    if job_id is not None:
        held = job_nodes(job_id, squeue)
        if wanted is not None:
            held_set = set(held)
            outside = [n for n in wanted if n not in held_set]
            if outside:
                raise FvError.of(reason("fleet.nodes_outside_job", "nodes", outside=compress_hostlist(outside),
                                        job=job_id, held=compress_hostlist(held)))
        chosen = wanted if wanted is not None else held
    else:
        chosen = wanted or ()
    if not chosen:
        raise FvError.of(reason("fleet.nodes_empty", "nodes"))
    return NodeSelection(tuple(chosen), job_id, partition or None, tuple(srun_args))
