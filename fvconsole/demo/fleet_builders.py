"""A fleet without Slurm, for screenshots and console tests: per-node cache roots and a stand-in srun.

``build_fleet(base, now)`` writes ``base/<node>/wcache`` for eight nodes showing the per-node
manifest pathology (rank 0's node holds the manifest, the others only their shards) and an
``srun`` that runs the command locally as the node named by ``--nodelist`` (``SLURMD_NODENAME``
set, so ``{node}`` roots resolve), and a stand-in ``squeue`` (answering ``-j``, ``--states``,
``--nodelist`` and ``-o`` as squeue does, so ``fleet cache ls --job 812345`` works) and ``sinfo``
printing what Slurm would: a job of the caches' owner on gpu[001-004] (so those nodes are busy), another
user's job on gpu006 (a ``|`` in its name), gpu008 drained. ``local_dispatcher`` is the real
``SrunDispatcher`` pointed at them, with the job's nodes given.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from fvconsole.core.shared.removal import remove_tree

FLEET_NODES = tuple(f"gpu{i:03d}" for i in range(1, 9))
#: The training job of the caches' owner on gpu[001-004] (the stand-in squeue knows it; ``--job`` works).
DEMO_JOB = "812345"

STAND_IN_SRUN = """#!{python}
# Stand-in srun: run the command locally as node --nodelist (SLURMD_NODENAME set).
import os, sys
args = sys.argv[1:]
os.environ["SLURMD_NODENAME"] = next(a.split("=", 1)[1] for a in args if a.startswith("--nodelist="))
cmd = args[next(i for i, a in enumerate(args) if not a.startswith("-")):]
os.execv(cmd[0], cmd)
"""


#: The stand-in squeue: the demo's jobs (a job of the caches' owner on gpu[001-004], so those nodes
#: are busy; another user's job on gpu006, a ``|`` in its name), answering as squeue does to what
#: fvconsole asks: ``-j JOB`` (unknown: squeue's own error, exit 1), ``--states``, ``--nodelist``
#: (a hostlist) and ``-o FORMAT`` (``%i %U %u %T %N %j``), ``-h``/``--noheader``.
STAND_IN_SQUEUE = """#!{python}
# Stand-in squeue for the fvconsole demo: a fixed job table, filtered and formatted like squeue.
import re, sys
JOBS = [
    {{"i": "{job}", "U": "{uid}", "u": "fvdemo", "T": "RUNNING", "N": "gpu[001-004]", "j": "wan2.1-t2v-14b finetune"}},
    {{"i": "812399", "U": "{other}", "u": "bob", "T": "RUNNING", "N": "gpu006", "j": "eval|vbench"}},
]


def expand(text):
    names = []
    for item in re.findall(r"[^,\\[]+(?:\\[[^\\]]*\\])?[^,]*", text):
        match = re.fullmatch(r"([^\\[]*)\\[([^\\]]*)\\](.*)", item)
        if not match:
            names.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            names += [f"{{prefix}}{{n:0{{len(lo)}}d}}{{suffix}}" for n in range(int(lo), int(hi or lo) + 1)]
    return names


args, opts, header = sys.argv[1:], {{}}, True
while args:
    arg = args.pop(0)
    if arg in ("-h", "--noheader"):
        header = False
    elif arg in ("-j", "--jobs", "-o", "--format", "-t", "--states", "-w", "--nodelist"):
        opts[arg.lstrip("-")[0] if len(arg) == 2 else arg] = args.pop(0) if args else ""
    elif "=" in arg:
        key, value = arg.split("=", 1)
        opts[key] = value
key = {{"--jobs": "j", "--format": "o", "--states": "t", "--nodelist": "w"}}
opts = {{key.get(k, k): v for k, v in opts.items()}}
jobs = JOBS
if "j" in opts:
    wanted = opts["j"].split(",")
    jobs = [job for job in jobs if job["i"] in wanted]
    if not jobs:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        sys.exit(1)
if "t" in opts:
    jobs = [job for job in jobs if job["T"] in opts["t"].upper().split(",")]
if "w" in opts:
    nodes = set(expand(opts["w"]))
    jobs = [job for job in jobs if nodes & set(expand(job["N"]))]
fmt = opts.get("o", "%i %T %N")
if header:
    print(re.sub(r"%(.)", lambda m: {{"i": "JOBID", "U": "UID", "u": "USER", "T": "STATE", "N": "NODELIST",
                                     "j": "NAME"}}.get(m.group(1), m.group(1)), fmt))
for job in jobs:
    print(re.sub(r"%(.)", lambda m: job.get(m.group(1), m.group(0)), fmt))
"""
#: What the stand-in sinfo prints (``%N|%T``).
STAND_IN_SINFO = """gpu[001-004,006]|allocated
gpu[005,007]|idle
gpu008|drained
"""


@dataclass(frozen=True)
class Fleet:
    """A built fleet: the cache root with ``{node}``, the stand-in srun, squeue and sinfo, the nodes."""

    root: str
    srun: str
    nodes: tuple[str, ...]
    squeue: str = "squeue"
    sinfo: str = "sinfo"


def _stand_in(path: str, text: str) -> str:
    with open(path, "w") as fh:
        fh.write(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\n")
    os.chmod(path, 0o755)
    return path


def build_fleet(base: str, now: float, nodes: Sequence[str] = FLEET_NODES) -> Fleet:
    """Per-node cache roots ``base/<node>/wcache`` and ``base/bin/srun`` (``base`` is rebuilt)."""
    from fvconsole.demo.cache_builders import make_key, write_cache_entry

    with contextlib.suppress(OSError):  # a fixture dir the caller names (tests, screenshots)
        remove_tree(base)
    wan, flux, old = make_key("wan2.1-t2v-14b"), make_key("flux-dev"), make_key("wan2.1-i2v-old")
    for i, node in enumerate(nodes):
        root = os.path.join(base, node, "wcache")
        # rank 0's node (the first) wrote the manifest; every other node holds only its shards.
        write_cache_entry(root, wan, num_shards=8, present=[i % 8], status="partial" if i == 0 else "incomplete",
                          last_used=now - 3600, tensor_bytes=64 << 10, seed=1)
        if i < 4:
            write_cache_entry(root, flux, num_shards=2, status="complete", last_used=now - 86400 * 3,
                              tensor_bytes=32 << 10, seed=2)
        if i in (2, 5):
            write_cache_entry(root, old, num_shards=4, status="invalid-manifest", last_used=now - 86400 * 12,
                              tensor_bytes=16 << 10, seed=3)
    bindir = os.path.join(base, "bin")
    os.makedirs(bindir, exist_ok=True)
    srun = os.path.join(bindir, "srun")
    with open(srun, "w") as fh:
        fh.write(STAND_IN_SRUN.replace("{python}", sys.executable))
    os.chmod(srun, 0o755)
    uid = os.getuid()
    squeue = os.path.join(bindir, "squeue")
    with open(squeue, "w") as fh:
        fh.write(STAND_IN_SQUEUE.format(python=sys.executable, uid=uid, other=uid + 1, job=DEMO_JOB))
    os.chmod(squeue, 0o755)
    sinfo = _stand_in(os.path.join(bindir, "sinfo"), STAND_IN_SINFO)
    return Fleet(os.path.join(base, "{node}", "wcache"), srun, tuple(nodes), squeue, sinfo)


def local_dispatcher(fleet: Fleet):  # noqa: ANN201 - a core.fleet.ops.SrunDispatcher
    """The real SrunDispatcher with the stand-in srun, squeue and sinfo; a job's nodes are the fleet's."""
    from fvconsole.core.fleet.ops import SrunDispatcher
    from fvconsole.core.fleet.selection import NodeSelection
    from fvconsole.core.fleet.slurm_state import SlurmQuery

    class LocalDispatcher(SrunDispatcher):
        def select(self, nodes: str | None, job_id: str | None) -> NodeSelection:
            return NodeSelection(fleet.nodes, job_id)

    return LocalDispatcher(srun=fleet.srun, slurm=SlurmQuery(squeue=fleet.squeue, sinfo=fleet.sinfo))
