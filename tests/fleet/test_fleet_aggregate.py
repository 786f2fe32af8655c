"""Fleet aggregation over real per-node `cache ls` / `cache evict` JSON (no Slurm needed)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from fvconsole.cli import main
from fvconsole.cli.fleet import render_fleet_evict, render_fleet_ls
from fvconsole.core.cache import EvictionSelectors
from fvconsole.core.fleet.aggregate import aggregate_ls, planned_keys
from fvconsole.core.fleet.dispatch import FleetRun, NodeOutcome, NodeSelection, SrunSteps
from fvconsole.core.fleet.eviction import FleetEvictionPlan, execution_requests
from fvconsole.core.fleet.node_commands import NodeEviction
from fvconsole.demo.cache_builders import make_key, write_cache_entry

NODES = tuple(f"n{i}" for i in range(1, 9))


def _cli_json(argv: list[str]) -> tuple[int, dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    return code, json.loads(buf.getvalue())


def _run(outcomes: list[NodeOutcome]) -> FleetRun:
    sel = NodeSelection(tuple(o.node for o in outcomes))
    return FleetRun(SrunSteps(sel, ()), tuple(outcomes))


def _ok(node: str, doc: dict) -> NodeOutcome:
    return NodeOutcome(node, "ok", 0, doc, None)


def _pathology_fleet(tmp_path: Path) -> tuple[list[NodeOutcome], str, str]:
    """The per-node manifest pathology: n1 has the manifest, n2..n8 only their shards."""
    key, other = make_key("model-a"), make_key("model-b")
    outcomes = []
    for i, node in enumerate(NODES):
        root = tmp_path / node / "wcache"
        status = "partial" if i == 0 else "incomplete"
        write_cache_entry(root, key, num_shards=8, present=[i], status=status, tensor_bytes=512)
        if node == "n3":
            write_cache_entry(root, other, num_shards=1, status="complete", tensor_bytes=512)
        code, doc = _cli_json(["cache", "ls", str(root), "--json"])
        assert code == 0
        outcomes.append(_ok(node, doc))
    return outcomes, key, other


def test_keys_totals_and_pathology(tmp_path: Path) -> None:
    outcomes, key, other = _pathology_fleet(tmp_path)
    view = aggregate_ls(_run(outcomes))
    doc = view.to_json()
    assert doc["keys"][key] == {"n1": "partial", **{n: "incomplete" for n in NODES[1:]}}
    assert doc["keys"][other] == {"n3": "complete"}
    assert doc["total_bytes"] == sum(o.output["total_bytes"] for o in outcomes) > 0
    assert set(doc["nodes"]) == set(NODES) and doc["nodes"]["n1"]["entries"][0]["key"] == key
    [finding] = view.findings
    assert finding.key == key and finding.kind == "per-node-manifest"
    assert "partial on n1" in finding.message and "incomplete (shards, no manifest.json) on n[2-8]" in finding.message
    assert "rank 0" in finding.message
    summary = {n.node: n for n in view.nodes}
    assert summary["n1"].reclaimable_bytes == 0
    assert summary["n2"].reclaimable_bytes == summary["n2"].total_bytes > 0
    assert summary["n3"].statuses == (("complete", 1), ("incomplete", 1))
    text = render_fleet_ls(view, str(tmp_path / "{node}" / "wcache"))
    assert "incomplete on n[2-8]; partial on n1" in text and "finding:" in text


def test_no_finding_when_every_node_has_the_manifest(tmp_path: Path) -> None:
    key = make_key("shared")
    outcomes = []
    for i, node in enumerate(NODES[:3]):
        root = tmp_path / node
        write_cache_entry(root, key, num_shards=3, present=[i], status="partial", tensor_bytes=256)
        outcomes.append(_ok(node, _cli_json(["cache", "ls", str(root), "--json"])[1]))
    assert aggregate_ls(_run(outcomes)).findings == ()


def test_failed_nodes_are_reported_not_counted(tmp_path: Path) -> None:
    outcomes, key, _ = _pathology_fleet(tmp_path)
    code, err_doc = _cli_json(["cache", "ls", str(tmp_path / "missing"), "--json"])
    assert code == 1
    outcomes[4] = NodeOutcome("n5", "failed", 1, err_doc, err_doc["error"])
    outcomes[5] = NodeOutcome("n6", "timeout", None, None, "timed out after 60s")
    view = aggregate_ls(_run(outcomes))
    doc = view.to_json()
    assert "does not exist" in doc["nodes"]["n5"]["error"]
    assert doc["nodes"]["n6"] == {"error": "timed out after 60s", "failure": "timeout", "code": "timeout"}
    assert set(doc["keys"][key]) == set(NODES) - {"n5", "n6"}
    assert view.exit_code == 3
    assert "error: timed out after 60s" in render_fleet_ls(view, "/r")


def test_eviction_aggregate(tmp_path: Path) -> None:
    outcomes = []
    for node in NODES[:2]:
        root = tmp_path / node
        write_cache_entry(root, make_key("bad"), num_shards=2, status="incomplete", tensor_bytes=256)
        write_cache_entry(root, make_key("good"), num_shards=2, status="complete", tensor_bytes=256)
        code, doc = _cli_json(["cache", "evict", str(root), "--invalid", "--json"])
        assert code == 0
        outcomes.append(_ok(node, doc))
    request = NodeEviction(EvictionSelectors(invalid=True), force=True)
    preview = FleetEvictionPlan(NodeSelection(NODES[:2]), "/r", request, tuple(outcomes),
                                execution_requests("/r", outcomes, request))
    assert preview.node_keys == {"n1": (make_key("bad"),), "n2": (make_key("bad"),)}
    assert dict(preview.requests)["n2"] == ("cache", "evict", "/r", "--key", make_key("bad"), "--force", "--yes",
                                            "--json", "--no-journal")
    assert preview.freed_bytes == sum(o.output["freed_bytes"] for o in outcomes) > 0
    assert preview.to_json()["executed"] is False and preview.exit_code == 0
    assert "would free" in render_fleet_evict(preview, "/r")
    assert planned_keys({"evict": "nonsense"}) == ()


def test_aggregation_scales_to_a_thousand_nodes() -> None:
    keys = [make_key(f"k{i}") for i in range(200)]
    outcomes = [
        _ok(f"n{i}", {"entries": [{"key": k, "status": "partial", "bytes": 10} for k in keys], "total_bytes": 2000})
        for i in range(1000)
    ]
    view = aggregate_ls(_run(outcomes))
    assert len(view.keys) == 200 and view.total_bytes == 1000 * 2000
    assert len(view.to_json()["keys"][keys[0]]) == 1000


def test_over_cap_matches_the_nodes_own_eviction_plan(tmp_path: Path, monkeypatch) -> None:
    """The per-node "what --max-gb would free" equals that node's own `cache evict --max-gb` plan."""
    import time

    root = tmp_path / "n1"
    now = time.time()
    for i in range(5):
        write_cache_entry(root, make_key(f"cap{i}"), num_shards=1, status="complete", tensor_bytes=2048 * (i + 1),
                          last_used=now - 86400 * (5 - i))
    write_cache_entry(root, make_key("nomanifest"), num_shards=1, status="incomplete", tensor_bytes=512)
    cap_gb = 30000 / 2**30
    monkeypatch.setenv("FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB", repr(cap_gb))
    _, ls_doc = _cli_json(["cache", "ls", str(root), "--json"])
    code, plan = _cli_json(["cache", "evict", str(root), "--max-gb", "--json"])
    assert code == 0 and plan["evict"]
    [summary] = aggregate_ls(_run([_ok("n1", ls_doc)])).nodes
    assert summary.cap == int(cap_gb * 2**30)
    assert summary.over_cap_bytes == plan["freed_bytes"] > 0
    assert summary.over_cap_bytes < summary.total_bytes


def _fleet_summary(nodes: int, keys: int) -> dict:
    """``fleet cache ls --json`` of ``nodes`` nodes that each hold the same ``keys`` keys; on the first 10 nodes
    the last key is ``incomplete`` (the per-node manifest pathology), elsewhere every copy is ``partial``."""
    names = [make_key(f"k{i}") for i in range(keys)]

    def entries(node: int) -> list[dict]:
        return [{"key": k, "status": "incomplete" if node < 10 and k == names[-1] else "partial", "bytes": 10}
                for k in names]

    outcomes = [_ok(f"gpu{i:04d}", {"entries": entries(i), "total_bytes": 10 * keys}) for i in range(nodes)]
    return aggregate_ls(_run(outcomes)).to_summary_json()


def test_the_summary_names_each_node_set_once_and_grows_with_nodes_plus_keys() -> None:
    """Issue 38 item 15 left a node list beside every key's hostlist: the summary grew with nodes x keys
    (1,000 nodes, 200 keys: 2.2 MB of names). Each set is expanded once in node_sets; a key names its hostlist."""
    doc = _fleet_summary(1000, 200)
    every = [f"gpu{i:04d}" for i in range(1000)]
    rest, first = "gpu[0010-0999]", "gpu[0000-0009]"
    assert doc["node_sets"] == {"gpu[0000-0999]": every, rest: every[10:], first: every[:10]}
    key = make_key("k0")
    assert doc["keys"][key] == {"bytes": 10_000, "nodes": 1000,
                                "statuses": {"partial": {"count": 1000, "nodes": "gpu[0000-0999]"}}}
    assert doc["keys"][make_key("k199")]["statuses"] == {"incomplete": {"count": 10, "nodes": first},
                                                         "partial": {"count": 990, "nodes": rest}}
    [finding] = doc["findings"]
    assert finding["nodes"] == first and doc["node_sets"][finding["nodes"]] == every[:10]
    assert doc["outcomes"]["ok"]["node_list"] == every  # the outcomes name each node once: expanded beside
    # 200 keys more add what 200 keys' rows take, not 200 lists of 1,000 names (11 bytes each: 2.2 MB)
    grown = len(json.dumps(_fleet_summary(1000, 400))) - len(json.dumps(doc))
    assert 0 < grown < 200 * 300
