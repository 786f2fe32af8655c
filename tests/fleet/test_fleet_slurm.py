"""Fleet commands against a real emulated Slurm cluster (three slurmd on this host).

Each emulated node gets its own cache root through ``{node}``. Skipped with the reason
where a cluster cannot be started (see tests/slurm_cluster.py); CI installs Slurm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docs_examples import doc_example, with_settings
from mounts import tmpfs
from sized_cache import MIB, PAGE, sized_entry
from slurm_cluster import (  # noqa: F401  (registers `slurm_cluster`)
    SlurmCluster,
    slurm_cluster_fixture,
    slurm_cluster_session_fixture,
)

from fvconsole.core.cache import EvictionSelectors
from fvconsole.core.fleet.dispatch import DispatchOptions
from fvconsole.core.fleet.eviction import execute_fleet_eviction, preview_fleet_eviction
from fvconsole.core.fleet.node_commands import NodeEviction
from fvconsole.core.fleet.ops import fleet_ls
from fvconsole.core.fleet.selection import select_nodes
from fvconsole.demo.cache_builders import make_key, write_cache_entry

pytestmark = pytest.mark.slurm

KEY = make_key("fleet-model")  # the pathology key: manifest only on n1
OLD = make_key("fleet-old")  # complete everywhere, long unused
NODES = ("n1", "n2", "n3")


def _fleet(cluster: SlurmCluster, *args: str, timeout: float = 120,
           env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    out = subprocess.run([sys.executable, "-m", "fvconsole", "fleet", "cache", *args, "--json"],
                         capture_output=True, text=True, env=env or cluster.env, timeout=timeout)
    return out.returncode, json.loads(out.stdout), out.stderr


def _populate(base: Path) -> str:
    """n1: manifest + shard 0; n2, n3: their shard only (no manifest); all: OLD complete, 30 days unused."""
    for i, node in enumerate(NODES):
        root = base / node / "wcache"
        status = "partial" if node == "n1" else "incomplete"
        write_cache_entry(root, KEY, num_shards=3, present=[i], status=status, tensor_bytes=1024)
        write_cache_entry(root, OLD, num_shards=1, status="complete", tensor_bytes=1024,
                          last_used=time.time() - 30 * 86400)
    return str(base / "{node}" / "wcache")


def _entries(base: Path, node: str) -> list[str]:
    return sorted(p.name for p in (base / node / "wcache").iterdir())


def test_ls_aggregates_every_node(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template, "--full")
    assert code == 0, err
    assert set(doc["nodes"]) == set(NODES)
    for node in NODES:
        assert doc["nodes"][node]["root"] == str(tmp_path / node / "wcache")
        assert doc["nodes"][node]["node"] == node  # SLURMD_NODENAME on that node
    assert doc["keys"][KEY] == {"n1": "partial", "n2": "incomplete", "n3": "incomplete"}
    assert doc["keys"][OLD] == {n: "complete" for n in NODES}
    assert doc["total_bytes"] == sum(doc["nodes"][n]["total_bytes"] for n in NODES) > 0
    [finding] = doc["findings"]
    assert finding["key"] == KEY and finding["nodes"] == "n[2-3]"
    assert "partial on n1" in finding["message"]


def test_evict_removes_exactly_the_planned_entries(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    code, preview, err = _fleet(slurm_cluster, "evict", "--nodes", "n[1-3]", "--cache-root", template, "--invalid")
    assert code == 0, err
    assert preview["executed"] is False
    planned = {n: [e["key"] for e in preview["nodes"][n]["evict"]] for n in NODES}
    assert planned == {"n1": [], "n2": [KEY], "n3": [KEY]}
    assert all(_entries(tmp_path, n) == sorted([KEY, OLD]) for n in NODES)  # dry run deleted nothing
    code, done, err = _fleet(slurm_cluster, "evict", "--nodes", "n[1-3]", "--cache-root", template,
                             "--invalid", "--yes")
    assert code == 0, err
    assert done["executed"] is True and done["freed_bytes"] == preview["freed_bytes"] > 0
    assert _entries(tmp_path, "n1") == sorted([KEY, OLD])
    assert _entries(tmp_path, "n2") == [OLD] and _entries(tmp_path, "n3") == [OLD]


def test_core_preview_then_execute_by_max_gb(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """The core API the TUI uses: preview, then execute exactly that preview."""
    template = _populate(tmp_path)
    selection = select_nodes("n[1-3]")
    options = DispatchOptions(timeout=60)
    view = fleet_ls(selection, template, options)
    assert view.exit_code == 0 and {r.key for r in view.keys} == {KEY, OLD}
    preview = preview_fleet_eviction(selection, template, NodeEviction(EvictionSelectors(max_gb=0.0)), options=options)
    plans = preview.node_keys
    assert all(set(plans[n]) == {KEY, OLD} for n in NODES)
    # n3's OLD entry is used between preview and execution: the node's re-check must skip it.
    manifest = tmp_path / "n3" / "wcache" / OLD / "manifest.json"
    manifest.touch()
    result = execute_fleet_eviction(preview, options)
    assert result.executed and result.exit_code == 0
    assert _entries(tmp_path, "n1") == [] and _entries(tmp_path, "n2") == []
    assert _entries(tmp_path, "n3") == [OLD]
    n3 = next(o for o in result.outcomes if o.node == "n3").output
    assert [s["key"] for s in n3["skipped"]] == [OLD]


def test_missing_root_is_a_per_node_error(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    (tmp_path / "n2" / "wcache").rename(tmp_path / "n2" / "moved")
    code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template, "--full")
    assert code == 3
    assert "does not exist" in doc["nodes"]["n2"]["error"] and str(tmp_path / "n2") in doc["nodes"]["n2"]["error"]
    assert "entries" in doc["nodes"]["n1"] and "entries" in doc["nodes"]["n3"]
    assert doc["keys"][KEY] == {"n1": "partial", "n3": "incomplete"}
    assert "1 of 3 nodes failed (n2)" in err
    code, ev, err = _fleet(slurm_cluster, "evict", "--nodes", "n[1-3]", "--cache-root", template,
                           "--invalid", "--yes")
    assert code == 3
    assert "error" in ev["nodes"]["n2"] and ev["nodes"]["n3"]["executed"] is True
    assert _entries(tmp_path, "n3") == [OLD]


def _wait_running(cluster: SlurmCluster, job: str) -> str:
    deadline = time.monotonic() + 60
    state = ""
    while time.monotonic() < deadline:
        state = cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
        if state == "RUNNING":
            return state
        time.sleep(0.3)
    return state


def test_job_targets_the_running_jobs_nodes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    sub = slurm_cluster.run("sbatch", "--parsable", "-N2", "-w", "n[2-3]", "--output=/dev/null",
                            f"--chdir={tmp_path}", "--wrap", "sleep 300")
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    try:
        assert _wait_running(slurm_cluster, job) == "RUNNING"
        code, doc, err = _fleet(slurm_cluster, "ls", "--job", job, "--cache-root", template, "--full")
        assert code == 0, err
        assert set(doc["nodes"]) == {"n2", "n3"} and doc["selection"]["job_id"] == job
        assert doc["keys"][KEY] == {"n2": "incomplete", "n3": "incomplete"}
        # Without --job the busy nodes cannot get an allocation: they time out, n1 still answers
        # (6 s leaves n1 room on a loaded 2-core CI machine).
        for fanout in ("per-node", "single-step"):  # single step: srun --immediate fails, then one srun per node
            code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template,
                                    "--timeout", "6", "--fanout", fanout, "--full")
            assert code == 3, fanout
            assert "entries" in doc["nodes"]["n1"]
            assert doc["nodes"]["n2"]["failure"] == "timeout" and "timed out after 6s" in doc["nodes"]["n2"]["error"]
        # inside the job, a single step is one step with --overlap
        code, doc, err = _fleet(slurm_cluster, "ls", "--job", job, "--cache-root", template, "--fanout",
                                "single-step")
        assert code == 0, err
        assert doc["keys"][KEY]["statuses"] == {"incomplete": {"count": 2, "nodes": "n[2-3]"}}
        assert doc["node_sets"]["n[2-3]"] == ["n2", "n3"]
    finally:
        slurm_cluster.run("scancel", job)
    deadline = time.monotonic() + 30
    while slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.3)


# --------------------------------------------------------------------------- single-step fan-out

#: Counts job steps independently of the code under test: every srun call is logged, then run.
SRUN_SHIM = """#!/bin/sh
echo "$*" >> {log}
exec {srun} "$@"
"""

#: A real fault inside a real job step: on the named node, the runner's command dies (SIGKILL)
#: or hangs when it starts (the import of the CLI's cache commands), after the runner's start frame.
FAULTS = """
import os, sys, time
_act = {acts!r}.get(os.environ.get("SLURMD_NODENAME"))
class _Fault:
    def find_spec(self, name, path=None, target=None):
        if name == "fvconsole.cli.cache" and _act == "kill":
            os.kill(os.getpid(), 9)
        if name == "fvconsole.cli.cache" and _act == "hang":
            time.sleep(600)
        return None
if _act:
    sys.meta_path.insert(0, _Fault())
"""


def _env(cluster: SlurmCluster, tmp_path: Path, acts: dict[str, str] | None = None) -> tuple[dict[str, str], Path]:
    """Environment with the counting srun first on PATH (and node faults); returns (env, srun log)."""
    import shutil

    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    log = tmp_path / "srun-calls.log"
    (shim / "srun").write_text(SRUN_SHIM.format(log=log, srun=shutil.which("srun")))
    (shim / "srun").chmod(0o755)
    env = {**cluster.env, "PATH": f"{shim}:{cluster.env['PATH']}"}
    if acts:
        (shim / "sitecustomize.py").write_text(FAULTS.format(acts=acts))
        env["PYTHONPATH"] = str(shim)
    return env, log


def _steps(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_single_step_lists_every_node_in_one_job_step(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    env, log = _env(slurm_cluster, tmp_path)
    code, per_node, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template,
                                 "--fanout", "per-node", env=env)
    assert code == 0, err
    assert _steps(log) == 3
    log.unlink()
    code, single, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template,
                               "--fanout", "single-step", env=env)
    assert code == 0, err
    assert _steps(log) == 1
    assert single["keys"] == per_node["keys"]
    assert single["keys"][KEY]["statuses"] == {"incomplete": {"count": 2, "nodes": "n[2-3]"},
                                               "partial": {"count": 1, "nodes": "n1"}}
    assert (single["node_sets"]["n[2-3]"], single["node_sets"]["n1"]) == (["n2", "n3"], ["n1"])
    assert {n: d["outcome"] for n, d in single["nodes"].items()} == {n: "ok" for n in NODES}


def test_single_step_one_node_failing_one_timing_out(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    (tmp_path / "n2" / "wcache").rename(tmp_path / "n2" / "moved")  # n2: the command fails
    env, log = _env(slurm_cluster, tmp_path, {"n3": "hang"})  # n3: the command never returns
    started = time.monotonic()
    code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template,
                            "--fanout", "single-step", "--timeout", "5", "--full", env=env)
    elapsed = time.monotonic() - started
    assert code == 3, err
    assert _steps(log) == 1
    assert "entries" in doc["nodes"]["n1"] and doc["keys"][KEY] == {"n1": "partial"}
    assert doc["nodes"]["n2"]["failure"] == "failed" and "does not exist" in doc["nodes"]["n2"]["error"]
    assert doc["nodes"]["n3"]["failure"] == "timeout" and doc["nodes"]["n3"]["error"] == "timed out after 5s"
    assert elapsed < 5 + 8  # n3 stopped itself at its limit; the step did not wait for the login side's slack


@pytest.mark.parametrize("attempt", range(3))
def test_single_step_survives_a_command_that_dies(slurm_cluster: SlurmCluster, tmp_path: Path,
                                                  attempt: int) -> None:
    """n2's command is SIGKILLed as it starts; n1's and n3's results still arrive, every time.

    KillOnBadExit=1 on this cluster: without --kill-on-bad-exit=0, n2's death would end n1's and
    n3's tasks. And a task that dies by a signal makes srun force-terminate the step and drop
    output still in flight (most runs lost n1's or n3's result): the runner outlives its command.
    """
    del attempt  # the loss was a race: a few runs, each of which lost a result more often than not
    template = _populate(tmp_path)
    env, log = _env(slurm_cluster, tmp_path, {"n2": "kill"})
    code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template,
                            "--fanout", "single-step", "--full", env=env)
    assert code == 3, err
    assert doc["nodes"]["n2"]["failure"] == "failed", doc["nodes"]["n2"]
    assert doc["nodes"]["n2"]["error"] == "the command was killed by SIGKILL before it reported"
    assert doc["nodes"]["n2"]["exit_code"] == 137
    assert doc["keys"][KEY] == {"n1": "partial", "n3": "incomplete"}, (doc["nodes"], err)
    assert _steps(log) == 1


def test_single_step_eviction_runs_each_nodes_own_plan(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    extra = make_key("fleet-extra")
    write_cache_entry(tmp_path / "n3" / "wcache", extra, num_shards=2, present=[0], status="incomplete",
                      tensor_bytes=512)
    env, log = _env(slurm_cluster, tmp_path)
    args = ("evict", "--nodes", "n[1-3]", "--cache-root", template, "--invalid", "--fanout", "single-step")
    code, preview, err = _fleet(slurm_cluster, *args, env=env)
    assert code == 0, err
    assert {n: sorted(e["key"] for e in preview["nodes"][n]["evict"]) for n in NODES} == {
        "n1": [], "n2": [KEY], "n3": sorted([KEY, extra])}
    code, done, err = _fleet(slurm_cluster, *args, "--yes", env=env)
    assert code == 0, err
    # one step per preview (the dry run, and again under --yes) and one to execute, in which
    # n2 and n3 are asked different keys through one per-node table
    calls = log.read_text().splitlines()
    assert len(calls) == 3 and "--per-node" in calls[-1] and "--nodelist=n[2-3]" in calls[-1]
    assert done["freed_bytes"] == preview["freed_bytes"] > 0
    assert _entries(tmp_path, "n1") == sorted([KEY, OLD])
    assert _entries(tmp_path, "n2") == [OLD] and _entries(tmp_path, "n3") == [OLD]


# --------------------------------------------------------------------------- eviction on demand (issue 15)


def _journal_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_documented_epilog_evicts_after_a_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """docs/operations.md's epilog, installed as this cluster's Epilog hook: a job ends on n2, n2's cache is trimmed."""
    base = tmp_path / "nodes"
    journal, log = tmp_path / "journal.jsonl", tmp_path / "epilog.log"
    script = with_settings(doc_example("slurm-epilog"), FVCONSOLE=str(Path(sys.executable).parent / "fvconsole"),
                           FASTVIDEO_WEIGHT_SHARD_CACHE=f"{base}/$SLURMD_NODENAME/wcache",
                           FVCONSOLE_JOURNAL=str(journal), LOG=str(log))
    with tmpfs(base / "n2", 20 * MIB) as shm:
        root = shm / "wcache"
        # Three 5 MiB entries: 5 MiB - 3 pages free (and a page for the lock's record) < 30% = 6 MiB.
        keys = [sized_entry(root, name, 5, age) for name, age in (("A", 5 * 86400), ("B", 4 * 86400), ("C", 3 * 86400))]
        with slurm_cluster.epilog_hook("fvconsole-cache", script):
            job = slurm_cluster.run("srun", "-w", "n2", "-N1", "--job-name=epilog-test", "true", timeout=60)
            assert job.returncode == 0, job.stderr
            deadline = time.monotonic() + 60
            while not _journal_lines(journal) and time.monotonic() < deadline:
                time.sleep(0.3)
            # The journal line is written under the evictor's lock: wait for the lock file and the
            # holder record to go too (the epilog is still finishing), as the statvfs below counts them.
            held = (root / ".fvconsole-evictor.lock", shm / ".wcache.fvconsole-evictor")
            while any(p.exists() for p in held) and time.monotonic() < deadline:
                time.sleep(0.1)
        [line] = _journal_lines(journal)
        assert line["items"] == keys[:1], (line, log.read_text() if log.exists() else "no log")
        assert line["details"]["node"] == "n2" and line["details"]["free_target_reached"] is True
        assert line["command"].endswith("cache evict --min-free-percent 30 --yes --wait 60") and line["user"] == "root"
        assert sorted(p.name for p in root.iterdir()) == sorted(keys[1:])
        st = os.statvfs(shm)
        assert st.f_bavail * st.f_frsize == 10 * MIB - 2 * PAGE
    assert "evicted 1 entry from" in log.read_text()
    assert not (base / "n1").exists()  # the other nodes ran no job: no epilog, nothing created


def test_fleet_free_space_target_is_judged_per_node(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    base = tmp_path / "nodes"
    journal = tmp_path / "journal.jsonl"
    env = {**slurm_cluster.env, "FVCONSOLE_JOURNAL": str(journal)}
    with tmpfs(base / "n1", 20 * MIB) as n1, tmpfs(base / "n2", 20 * MIB) as n2:
        full = [sized_entry(n1 / "wcache", name, 5, age) for name, age in (("A", 5 * 86400), ("B", 4 * 86400),
                                                                           ("C", 3 * 86400))]
        roomy = [sized_entry(n2 / "wcache", name, 2, age) for name, age in (("D", 5 * 86400), ("E", 4 * 86400))]
        args = ("evict", "--nodes", "n[1-3]", "--cache-root", str(base / "{node}" / "wcache"),
                "--min-free-percent", "30")
        code, preview, err = _fleet(slurm_cluster, *args, env=env)
        assert code == 3, err  # n3 has no root
        assert [e["key"] for e in preview["nodes"]["n1"]["evict"]] == full[:1]
        assert preview["nodes"]["n2"]["evict"] == [] and preview["nodes"]["n2"]["free_target"]["reached"] is True
        assert "does not exist" in preview["nodes"]["n3"]["error"] and not journal.exists()
        code, done, err = _fleet(slurm_cluster, *args, "--yes", "--wait", "30", env=env)
        assert code == 3, err
        assert sorted(p.name for p in (n1 / "wcache").iterdir()) == sorted(full[1:])
        assert sorted(p.name for p in (n2 / "wcache").iterdir()) == sorted(roomy)
        # Each node executes exactly its previewed keys (not the target again); it measures the result.
        # (measured while the lock's holder record still took its page on the tmpfs)
        assert done["nodes"]["n1"]["fs_free_bytes_after"] == 10 * MIB - 3 * PAGE >= 6 * MIB
    [line] = _journal_lines(journal)
    assert line["action"] == "fleet cache evict" and line["items"] == [f"n1:{full[0]}"] and line["exit_code"] == 3
    assert line["details"]["outcomes"]["ok"]["nodes"] == "n[1-2]" and line["details"]["outcomes"]["failed"]["nodes"] == "n3"


# --------------------------------------------------------------------------- Slurm state per node (issue 22)

#: Counts squeue and sinfo calls independently of the code under test, then runs the real command.
COUNTING_SHIM = """#!/bin/sh
echo "$*" >> {log}
exec {real} "$@"
"""


def test_ls_shows_the_node_busy_with_the_owners_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """A real job holds n2 and n3: `fleet cache ls` shows both busy with that job's id, user and name
    (a `|` in it), from one squeue and one sinfo call; an entry of another owner there is not busy."""
    import shutil

    template = _populate(tmp_path)
    foreign_owned = tmp_path / "n2" / "wcache" / OLD
    os.chown(foreign_owned, 65534, 65534)  # nobody's entry on n2: nobody runs no job
    shim = tmp_path / "shim"
    shim.mkdir()
    log = tmp_path / "slurm-calls.log"
    for name in ("squeue", "sinfo"):
        (shim / name).write_text(COUNTING_SHIM.format(log=log, real=shutil.which(name)))
        (shim / name).chmod(0o755)
    env = {**slurm_cluster.env, "PATH": f"{shim}:{slurm_cluster.env['PATH']}"}
    sub = slurm_cluster.run("sbatch", "--parsable", "-N2", "-w", "n[2-3]", "--output=/dev/null",
                            f"--chdir={tmp_path}", "--job-name=train|wan 14b", "--wrap", "sleep 300")
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    try:
        assert _wait_running(slurm_cluster, job) == "RUNNING"
        code, doc, err = _fleet(slurm_cluster, "ls", "--job", job, "--cache-root", template, "--full", env=env)
        assert code == 0, err
        calls = log.read_text().splitlines()
        assert sum("--states=RUNNING,COMPLETING" in c for c in calls) == 1  # (the other squeue: --job's nodes)
        assert sum(c.startswith("--noheader --nodes=") for c in calls) == 1
        for node in ("n2", "n3"):
            slurm = doc["nodes"][node]["slurm"]
            assert slurm["state"] == "allocated" and slurm["busy"] is True and slurm["busy_jobs"] == [job]
            assert slurm["jobs"] == [{"job_id": job, "uid": 0, "user": "root", "name": "train|wan 14b",
                                      "state": "RUNNING", "nodes": "n[2-3]", "node_list": ["n2", "n3"]}]
        n2 = {e["key"]: e["node_busy"] for e in doc["nodes"]["n2"]["entries"]}
        assert n2 == {KEY: True, OLD: False}
        assert doc["slurm"]["busy_nodes"] == "n[2-3]" and doc["slurm"]["note"] is None
        out = subprocess.run([sys.executable, "-m", "fvconsole", "fleet", "cache", "ls", "--job", job,
                              "--cache-root", template], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "allocated, busy" in out.stdout and "train|wan 14b" in out.stdout
        assert "node busy: n[2-3] run a job of the cache's owner" in out.stdout
        code, preview, err = _fleet(slurm_cluster, "evict", "--job", job, "--cache-root", template, "--invalid",
                                    env=env)
        assert code == 0, err
        assert preview["slurm"]["busy"] == {"n2": {"jobs": [job], "keys": [KEY]}, "n3": {"jobs": [job], "keys": [KEY]}}
        assert preview["warnings"][0].startswith(f"node busy: n[2-3]: job {job} root (train|wan 14b)")
        assert {n: [e["key"] for e in preview["nodes"][n]["evict"]] for n in ("n2", "n3")} == {"n2": [KEY], "n3": [KEY]}
        # a node outside the job: idle, nothing running, not busy
        code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n1", "--cache-root", template, env=env)
        assert code == 0, err
        assert doc["nodes"]["n1"]["slurm"] == {"state": "idle", "jobs": [], "busy": False, "busy_jobs": [],
                                               "busy_entries": []}
    finally:
        slurm_cluster.run("scancel", job)
