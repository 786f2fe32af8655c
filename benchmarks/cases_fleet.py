"""Fleet fan-out on a simulated cluster: one job step for all nodes vs one step per node.

The simulated ``srun`` models what makes per-node fan-out costly on a real cluster:
slurmctld creates job steps one at a time, here ``STEP_SECONDS`` each, serialised through a
lock file shared by every srun of the run (the lock also counts the steps, independently
of fvconsole). Each node then works for ``WORK_SECONDS`` (nodes work in parallel) and
answers with what a real node answers: the frames the real node-side runner printed for a
real cache (captured once, then the node name substituted), labelled like ``srun --label``.
The login side is the real CLI in a fresh interpreter (``fvconsole fleet cache ls --json``).

Per-node fan-out costs at least nodes x STEP_SECONDS (1,000 nodes: 300 s); it is measured on
a subset and extrapolated linearly to the full node count, which the table says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from benchmarks import inputs
from benchmarks.harness import Row

STEP_SECONDS = 0.3
WORK_SECONDS = 0.2

SIM_SRUN = r'''#!{python}
"""Simulated srun: serialised step creation, parallel per-node work, canned node answers."""
import fcntl, os, re, sys, time
opts = {}
for arg in sys.argv[1:]:
    if not arg.startswith("-"):
        break
    key, _, value = arg.partition("=")
    opts[key] = value
match = re.fullmatch(r"([a-z]+)\[([0-9,\-]+)\]|([a-z]+[0-9]+)", opts["--nodelist"])
if match.group(3):
    nodes = [match.group(3)]
else:
    nodes = []
    for part in match.group(2).split(","):
        lo, _, hi = part.partition("-")
        nodes += [f"{match.group(1)}{n:0{len(lo)}d}" for n in range(int(lo), int(hi or lo) + 1)]
with open({lock!r}, "a+") as lock:  # slurmctld: one step at a time
    fcntl.flock(lock, fcntl.LOCK_EX)
    time.sleep({step})
    lock.write("step\n")
    lock.flush()
    fcntl.flock(lock, fcntl.LOCK_UN)
time.sleep({work})
with open({canned!r}, "rb") as handle:
    frames = handle.read().splitlines(keepends=True)
label = "--label" in opts
out = sys.stdout.buffer
for task, node in enumerate(nodes):
    name = node.encode()
    prefix = f"{task}: ".encode() if label else b""
    out.write(b"".join(prefix + line.replace({template!r}, name) for line in frames))
out.flush()
'''


def _node_names(count: int) -> tuple[str, str]:
    """(hostlist, first name): fixed-width names so the canned answer's name swaps in place."""
    return f"node[0001-{count:04d}]", "node0001"


def _setup(root: str) -> tuple[str, str, str]:
    """A real cache, the real runner's answer for it, the simulated srun; returns (cache, bin dir, lock)."""
    cache = inputs.cache_root(os.path.join(root, "cache"), 8, 4)
    env = {**os.environ, "SLURMD_NODENAME": "node0001"}
    answer = subprocess.run([sys.executable, "-m", "fvconsole.cli.node", "cache", "ls", cache, "--json"],
                            capture_output=True, env=env, check=True).stdout
    canned = os.path.join(root, "node-answer.frames")
    with open(canned, "wb") as handle:
        handle.write(answer)
    bindir = os.path.join(root, "bin")
    os.makedirs(bindir, exist_ok=True)
    lock = os.path.join(root, "slurmctld.steps")
    script = (SIM_SRUN.replace("{python}", sys.executable).replace("{lock!r}", repr(lock))
              .replace("{step}", repr(STEP_SECONDS)).replace("{work}", repr(WORK_SECONDS))
              .replace("{canned!r}", repr(canned)).replace("{template!r}", repr(b"node0001")))
    srun = os.path.join(bindir, "srun")
    with open(srun, "w", encoding="utf-8") as handle:
        handle.write(script)
    os.chmod(srun, 0o755)
    return cache, bindir, lock


def _fleet_ls(cache: str, bindir: str, lock: str, nodes: int, fanout: str,
              full: bool = False) -> tuple[float, int, str]:
    """Wall time, job steps created and the JSON text of one `fleet cache ls` run."""
    if os.path.exists(lock):
        os.unlink(lock)
    hostlist, _ = _node_names(nodes)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ["PATH"]}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fvconsole", "fleet", "cache", "ls", "--nodes", hostlist,
                           "--cache-root", cache, "--json", "--fanout", fanout, *(["--full"] if full else [])],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise AssertionError(f"fleet cache ls ({fanout}) exited {proc.returncode}: {proc.stderr[-500:]}")
    doc = json.loads(proc.stdout)
    answered = len(doc["nodes"]) if full else doc["outcomes"].get("ok", {}).get("count")
    if answered != nodes or len(doc["keys"]) != 8:
        raise AssertionError(f"fleet cache ls ({fanout}) did not list {nodes} nodes x 8 keys")
    with open(lock, encoding="utf-8") as handle:
        steps = len(handle.read().splitlines())
    return wall, steps, proc.stdout


def fanout_case(root: str, nodes: int, per_node_sample: int) -> list[Row]:
    """Single-step over ``nodes`` vs per-node fan-out (measured on ``per_node_sample`` nodes, extrapolated)."""
    cache, bindir, lock = _setup(root)
    single, single_steps, summary = _fleet_ls(cache, bindir, lock, nodes, "single-step")
    full_wall, _, full = _fleet_ls(cache, bindir, lock, nodes, "single-step", full=True)
    sample, sample_steps, _ = _fleet_ls(cache, bindir, lock, per_node_sample, "per-node")
    projected = sample * nodes / per_node_sample
    model = f"simulated slurmctld: {STEP_SECONDS:g} s per job step (serialised), {WORK_SECONDS:g} s per node"
    sizes = f"--json {len(summary) / 1024:,.0f} KiB (summary) vs {len(full) / 1024:,.0f} KiB (--full, {full_wall:.2f} s)"
    return [
        Row(f"fleet ls {nodes:,} nodes, single step", single, projected,
            f"per-node pool of 32, extrapolated from {per_node_sample} nodes", "<10 s, 1 job step",
            single < 10 and single_steps == 1,
            f"{single_steps} job step vs {nodes:,} ({model}); {sizes}"),
        Row(f"fleet ls {per_node_sample} nodes, per-node pool (measured)", sample, None, "", "", None,
            f"{sample_steps} job steps; {nodes:,} nodes would take >= {nodes * STEP_SECONDS:.0f} s "
            f"in step creation alone"),
    ]
