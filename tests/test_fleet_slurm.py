"""Fleet commands against a real emulated Slurm cluster (three slurmd on this host).

Each emulated node gets its own cache root through ``{node}``. Skipped with the reason
where a cluster cannot be started (see tests/slurm_cluster.py); CI installs Slurm.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster_fixture  # noqa: F401  (registers `slurm_cluster`)

from fvconsole.core.fleet.dispatch import select_nodes
from fvconsole.core.fleet.ops import execute_fleet_eviction, fleet_ls, preview_fleet_eviction
from fvconsole.demo.cache_builders import make_key, write_cache_entry

pytestmark = pytest.mark.slurm

KEY = make_key("fleet-model")  # the pathology key: manifest only on n1
OLD = make_key("fleet-old")  # complete everywhere, long unused
NODES = ("n1", "n2", "n3")


def _fleet(cluster: SlurmCluster, *args: str, timeout: float = 120) -> tuple[int, dict, str]:
    out = subprocess.run([sys.executable, "-m", "fvconsole", "fleet", "cache", *args, "--json"],
                         capture_output=True, text=True, env=cluster.env, timeout=timeout)
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
    code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template)
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
    view = fleet_ls(selection, template, timeout=60)
    assert view.exit_code == 0 and {r.key for r in view.keys} == {KEY, OLD}
    preview = preview_fleet_eviction(selection, template, ["--max-gb", "0"], timeout=60)
    plans = preview.plans()
    assert all(set(plans[n]) == {KEY, OLD} for n in NODES)
    # n3's OLD entry is used between preview and execution: the node's re-check must skip it.
    manifest = tmp_path / "n3" / "wcache" / OLD / "manifest.json"
    manifest.touch()
    result = execute_fleet_eviction(preview, template, timeout=60)
    assert result.executed and result.exit_code == 0
    assert _entries(tmp_path, "n1") == [] and _entries(tmp_path, "n2") == []
    assert _entries(tmp_path, "n3") == [OLD]
    n3 = next(o for o in result.outcomes if o.node == "n3").output
    assert [s["key"] for s in n3["skipped"]] == [OLD]


def test_missing_root_is_a_per_node_error(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    template = _populate(tmp_path)
    (tmp_path / "n2" / "wcache").rename(tmp_path / "n2" / "moved")
    code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template)
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
        code, doc, err = _fleet(slurm_cluster, "ls", "--job", job, "--cache-root", template)
        assert code == 0, err
        assert set(doc["nodes"]) == {"n2", "n3"} and doc["selection"]["job_id"] == job
        assert doc["keys"][KEY] == {"n2": "incomplete", "n3": "incomplete"}
        # Without --job the busy nodes cannot get an allocation: they time out, n1 still answers.
        code, doc, err = _fleet(slurm_cluster, "ls", "--nodes", "n[1-3]", "--cache-root", template,
                                "--timeout", "3")
        assert code == 3
        assert "entries" in doc["nodes"]["n1"]
        assert doc["nodes"]["n2"]["failure"] == "timeout" and "timed out after 3s" in doc["nodes"]["n2"]["error"]
    finally:
        slurm_cluster.run("scancel", job)
    deadline = time.monotonic() + 30
    while slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.3)
