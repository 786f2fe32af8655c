"""A node's answer read into typed records (core/fleet/documents.py), and what does not fit: that node's problem.

Each node document is read through the untrusted-document door into the records its node made
(``CacheEntry``, ``CacheVerification``) or small records of the fleet's (``NodeListing``,
``NodeEviction``); a field of the wrong type or range makes that node ``invalid`` with one line
naming the node, the document and the field, and the other nodes' answers stand.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability.strategies import mutated_document

from fvconsole.cli import main
from fvconsole.cli.node import _run
from fvconsole.core.cache.scan import scan_cache
from fvconsole.core.fleet.aggregate import aggregate_ls
from fvconsole.core.fleet.demux import StepDemux
from fvconsole.core.fleet.dispatch import FleetRun, NodeSelection, SrunSteps
from fvconsole.core.fleet.documents import EVICT, LS, VERIFY, NodeEviction, NodeListing, NodeVerification
from fvconsole.core.fleet.frames import result_lines, start_line
from fvconsole.core.fleet.outcomes import KINDS, NodeOutcome, classify, from_envelope
from fvconsole.demo.cache_builders import make_key, write_cache_entry


def _cli_json(argv: list[str]) -> dict[str, Any]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(argv)
    return json.loads(buf.getvalue())


def _answer(output: Any, *, kind: str = LS, code: int = 0, node: str = "n1") -> NodeOutcome:
    return from_envelope(node, {"node": node, "exit": code, "output": output}, expects=kind, timeout=5)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("node") / "wc"
    write_cache_entry(root, make_key("good"), num_shards=2, status="complete", tensor_bytes=256, last_used=1.5e9)
    write_cache_entry(root, make_key("half"), num_shards=3, present=[0], status="incomplete", tensor_bytes=256)
    write_cache_entry(root, make_key("none"), status="empty")
    return root


@pytest.fixture(scope="module")
def documents(cache: Path) -> dict[str, dict[str, Any]]:
    """Each command's real JSON on that cache (an eviction dry run of everything reclaimable)."""
    return {LS: _cli_json(["cache", "ls", str(cache), "--json"]),
            EVICT: _cli_json(["cache", "evict", str(cache), "--invalid", "--grace", "0s", "--json"]),
            VERIFY: _cli_json(["cache", "verify", str(cache), "--json"])}


def test_a_listing_reads_into_the_scan_s_own_entries(cache: Path, documents: dict[str, dict[str, Any]]) -> None:
    doc = documents[LS]
    outcome = _answer(doc)
    assert outcome.ok and isinstance(outcome.document, NodeListing) and outcome.output is doc  # sent as it came
    listing = outcome.listing
    scan = scan_cache(str(cache))
    by_key = {e.key: e for e in scan.entries}
    assert {e.key: e for e in listing.entries} == by_key  # the same records, field for field
    assert (listing.root, listing.root_uid, listing.error) == (doc["root"], cache.stat().st_uid, None)


def test_an_eviction_reads_its_planned_keys_and_owners(cache: Path, documents: dict[str, dict[str, Any]]) -> None:
    doc = documents[EVICT]
    outcome = _answer(doc, kind=EVICT)
    eviction = outcome.eviction
    assert isinstance(eviction, NodeEviction) and eviction.freed_bytes == doc["freed_bytes"]
    assert sorted(i.key for i in eviction.evict) == sorted([make_key("half"), make_key("none")])
    assert {eviction.owner(i) for i in eviction.evict} == {cache.stat().st_uid}


def test_a_verification_that_found_problems_is_an_answer(tmp_path: Path) -> None:
    root = tmp_path / "wc"
    write_cache_entry(root, make_key("odd"), num_shards=2, seed=1, status="disagreeing-shard", tensor_bytes=256)
    payload = _run("n1", ["cache", "verify", str(root), "--json"], None)
    outcome = from_envelope("n1", payload, expects=VERIFY, timeout=5)
    assert outcome.kind == "failed" and outcome.exit_code == 1
    verification = outcome.verification
    assert isinstance(verification, NodeVerification) and verification.error == outcome.error
    [verdict] = verification.verification.entries
    assert verdict.key == make_key("odd") and not verdict.ok and verdict.problems
    refused = from_envelope("n1", {"node": "n1", "exit": 1, "output": {"error": "gone"}}, expects=VERIFY, timeout=5)
    assert refused.kind == "failed" and refused.verification.verification is None


ENTRY = {"key": "k", "status": "complete", "bytes": 1}


@pytest.mark.parametrize(
    ("kind", "output", "message"),
    [
        (LS, {"entries": [{**ENTRY, "bytes": -1}]},
         "n1: cache ls JSON entries[0] field 'bytes' is out of range (must be 0..9223372036854775807)"),
        (LS, {"entries": [{**ENTRY, "bytes": False}]}, "n1: cache ls JSON entries[0] field 'bytes' must be an integer (got boolean)"),
        (LS, {"entries": [ENTRY, {**ENTRY, "status": ["complete"]}]},
         "n1: cache ls JSON entries[1] field 'status' must be a string (got list)"),
        (LS, {"entries": [{**ENTRY, "in_use_by": [{"pid": 1, "command": "python"}]}]},
         "n1: cache ls JSON entries[0] in_use_by[0] field 'how' is missing"),
        (LS, {"entries": [ENTRY], "cap_bytes": 1.5}, "n1: cache ls JSON field 'cap_bytes' must be an integer (got number)"),
        (LS, {"entries": [ENTRY], "root": {"path": "/r"}}, "n1: cache ls JSON field 'root' must be a string (got object)"),
        (LS, {"entries": [ENTRY], "root_uid": -1}, "n1: cache ls JSON field 'root_uid' is out of range (must be 0..4294967295)"),
        (EVICT, {"evict": [{"bytes": 5}], "freed_bytes": 5}, "n1: cache evict JSON evict[0] field 'key' is missing"),
        (EVICT, {"evict": [], "freed_bytes": -5},
         "n1: cache evict JSON field 'freed_bytes' is out of range (must be 0..9223372036854775807)"),
        (EVICT, {"freed_bytes": 0}, "n1: cache evict JSON field 'evict' is missing"),
        (VERIFY, {"root": "/r", "entries": [{"key": "k", "ok": False}]},
         "n1: cache verify JSON entries[0] field 'ok' is false but the rest of it says otherwise"),
        (VERIFY, {"root": "/r", "entries": [{"key": "k", "problems": ["bad"]}]},
         "n1: cache verify JSON entries[0] problems[0] must be a JSON object (got string)"),
        ("other", {"error": 5}, "n1: the command's JSON field 'error' must be a string (got integer)"),
    ],
)
def test_a_document_that_does_not_fit_is_that_node_s_problem_naming_the_field(kind: str, output: dict,
                                                                              message: str) -> None:
    outcome = _answer(output, kind=kind)
    assert outcome.kind == "invalid" and outcome.output is None and outcome.document is None
    assert outcome.error == f"unexpected JSON from the command: {message}"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"exit": True, "output": {}}, "n1: result field 'exit' must be an integer (got boolean)"),
        ({"exit": 1 << 40, "output": {}}, "n1: result field 'exit' is out of range (must be -2147483648..2147483647)"),
        ({"exit": 0, "output": [{"entries": []}]}, "n1: result field 'output' must be an object (got list)"),
        ({"exit": 0, "output": None, "invalid_output": 5}, "n1: result field 'invalid_output' must be a string (got integer)"),
        ({"exit": None, "timeout": "soon"}, "n1: result field 'timeout' must be a number (got string)"),
        ({"exit": 1, "output": {"error": "x"}, "reason": {"code": 7, "field": "f", "values": {}}},
         "n1: result's reason field 'code' must be a string (got integer)"),
    ],
)
def test_an_envelope_that_does_not_fit_is_malformed(payload: dict, message: str) -> None:
    outcome = from_envelope("n1", {"node": "n1", **payload}, expects=LS, timeout=5)
    assert outcome.kind == "invalid" and outcome.error == f"malformed result: {message}"


def test_a_status_this_side_does_not_know_is_shown_and_counted_not_refused() -> None:
    """A newer node's status (or a hostile one) is a string like any other: counted, never reclaimable."""
    outcome = _answer({"entries": [{**ENTRY, "status": "stale"}, {**ENTRY, "key": "j", "status": "incomplete"}]})
    [summary] = aggregate_ls(FleetRun(SrunSteps(NodeSelection(("n1",)), ()), (outcome,))).nodes
    assert summary.statuses == (("incomplete", 1), ("stale", 1)) and summary.reclaimable_bytes == 1


def test_one_node_that_does_not_fit_leaves_the_others_standing(documents: dict[str, dict[str, Any]]) -> None:
    good = documents[LS]
    outcomes = (_answer(good, node="n1"), _answer({"entries": [{**ENTRY, "bytes": "1"}]}, node="n2"),
                _answer(good, node="n3"))
    view = aggregate_ls(FleetRun(SrunSteps(NodeSelection(("n1", "n2", "n3")), ()), outcomes))
    assert [n.ok for n in view.nodes] == [True, False, True] and view.exit_code == 3
    assert "n2: cache ls JSON entries[0] field 'bytes' must be an integer (got string)" in view.nodes[1].error
    assert {row.key for row in view.keys} == {e["key"] for e in good["entries"]}
    assert view.total_bytes == 2 * good["total_bytes"]


def test_an_over_deep_document_through_the_frames_is_invalid_not_a_crash() -> None:
    deep: Any = "x"
    for _ in range(150):
        deep = {"a": deep}
    payloads = {"n1": {"node": "n1", "exit": 0, "output": {"entries": [{**ENTRY, "summary": deep}]}},
                "n2": {"node": "n2", "exit": 0, "output": {"entries": [ENTRY]}}}
    demux = StepDemux(("n1", "n2"), cap=1 << 20)
    for task, node in enumerate(payloads):
        lines = [start_line(node), *result_lines(node, payloads[node])]
        demux.feed_stdout("".join(f"{task}: {line}\n" for line in lines).encode())
    demux.finish()
    n1, n2 = (classify(demux.streams[n], expects=LS, timeout=5, cap=1 << 20, srun_exit=0, timed_out=False)
              for n in ("n1", "n2"))
    assert n1.kind == "invalid" and "nested more than 100 levels deep" in n1.error
    assert n2.ok and n2.listing.entries[0].key == "k"


def test_an_outcome_built_by_hand_is_read_when_asked() -> None:
    outcome = NodeOutcome("n1", "ok", 0, {"entries": [ENTRY], "root": "/r"}, None)
    assert outcome.document is None and outcome.listing.root == "/r" and outcome.listing.entries[0].bytes == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), kind=st.sampled_from([LS, EVICT, VERIFY]), code=st.sampled_from([0, 1, 3]))
def test_a_damaged_real_document_is_never_a_crash(data: st.DataObject, kind: str, code: int,
                                                   documents: dict[str, dict[str, Any]]) -> None:
    """One structural change anywhere in a real node document: classified, never raised; when it
    does not fit, the message names the node and the document."""
    path, doc = data.draw(mutated_document(documents[kind]))
    outcome = _answer(doc, kind=kind, code=code)
    assert outcome.kind in KINDS
    if outcome.kind == "invalid":
        assert outcome.error.startswith(("unexpected JSON from the command: n1: cache ", "command printed invalid JSON",
                                         "malformed result: n1: result field 'output'")), (path, outcome.error)
    elif outcome.output is not None:  # read once, at classification
        document = getattr(outcome, {LS: "listing", EVICT: "eviction", VERIFY: "verification"}[kind])
        assert document is outcome.document
