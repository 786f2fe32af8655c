"""The cache records read back from their own JSON (``from_json`` beside ``to_json``): what a fleet node sends.

Round trips over generated records (and over the very text ``cache ls --json`` writes, through
the untrusted decoder), the records of a real scan and a real verification, and damaged fields:
one UntrustedError naming the document, the part and the field, never a TypeError.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fvconsole.core.cache.model import CacheEntry, ManifestSummary
from fvconsole.core.cache.scan import scan_cache
from fvconsole.core.cache.verify import CacheVerification, EntryVerification, VerifyProblem, verify_cache
from fvconsole.core.shared.process_use import Holder
from fvconsole.core.shared.untrusted import UntrustedError, decode
from fvconsole.demo.cache_builders import make_key, write_cache_entry

#: Bounds written out here, not read from the code under test.
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
FIRST_DATE, LAST_DATE = -62_135_596_800, 253_402_300_799  # 0001-01-01 and 9999-12-31T23:59:59, UTC

texts = st.text(max_size=12)
str_tuples = st.lists(texts, max_size=3).map(tuple)
sizes = st.integers(0, I64_MAX)
times = st.none() | st.floats(min_value=FIRST_DATE, max_value=LAST_DATE, allow_nan=False)
counts = st.dictionaries(texts, sizes, max_size=3).map(lambda d: tuple(sorted(d.items())))  # sorted, as a scan has them
#: Every field of each record, with its values (a field added without one here fails
#: test_every_field_is_generated, so the round trips below cover it).
FIELDS: dict[type, dict[str, st.SearchStrategy]] = {}
FIELDS[Holder] = {"pid": st.integers(1, 2**31 - 1), "command": texts, "how": st.sampled_from(["open", "mapped"])}
FIELDS[ManifestSummary] = {"params": sizes, "numel": sizes, "dtypes": counts, "kinds": counts}
holders, summaries = st.builds(Holder, **FIELDS[Holder]), st.builds(ManifestSummary, **FIELDS[ManifestSummary])
FIELDS[CacheEntry] = {
    "key": texts, "path": texts, "bytes": sizes, "last_used": times, "num_shards": st.none() | sizes,
    "shards_present": st.lists(sizes, max_size=4).map(tuple),
    "status": st.sampled_from(["complete", "partial", "incomplete", "empty", "invalid"]) | texts,
    "writing": st.booleans(), "explanation": texts, "manifest_mtime_ns": st.none() | st.integers(I64_MIN, I64_MAX),
    "newest_mtime": times, "shard_files": str_tuples, "tmp_files": str_tuples, "problems": str_tuples,
    "summary": st.none() | summaries, "is_symlink": st.booleans(), "symlink_target": st.none() | texts,
    "mounts": str_tuples, "disk_bytes": st.none() | sizes, "in_use_by": st.lists(holders, max_size=2).map(tuple),
    "owner_uid": st.none() | st.integers(0, 2**32 - 1)}
FIELDS[VerifyProblem] = {"shard": st.none() | texts, "param": st.none() | texts, "problem": texts}
problems = st.builds(VerifyProblem, **FIELDS[VerifyProblem])
FIELDS[EntryVerification] = {
    "key": texts, "path": texts, "shards_checked": str_tuples, "problems": st.lists(problems, max_size=2).map(tuple),
    "deep": st.booleans(), "bytes_read": sizes, "not_verifiable": st.none() | texts}
verdicts = st.builds(EntryVerification, **FIELDS[EntryVerification])
FIELDS[CacheVerification] = {"root": texts, "entries": st.lists(verdicts, max_size=3).map(tuple),
                             "missing": str_tuples, "deep": st.booleans()}
entries = st.builds(CacheEntry, **FIELDS[CacheEntry])
verifications = st.builds(CacheVerification, **FIELDS[CacheVerification])


@pytest.mark.parametrize("record", list(FIELDS), ids=lambda r: r.__name__)
def test_every_field_is_generated(record: type) -> None:
    assert set(FIELDS[record]) == {f.name for f in dataclasses.fields(record)}


@settings(max_examples=300, deadline=None)
@given(entries)
def test_an_entry_reads_back_from_its_json_and_from_the_text_cache_ls_writes(entry: CacheEntry) -> None:
    assert CacheEntry.from_json(entry.to_json()) == entry
    assert CacheEntry.from_json(decode(entry.json_text(), "line", "entry")) == entry


@settings(max_examples=200, deadline=None)
@given(summaries, holders, problems)
def test_the_small_records_read_back(summary: ManifestSummary, holder: Holder, problem: VerifyProblem) -> None:
    assert ManifestSummary.from_json(summary.to_json(), "n1", "summary") == summary
    assert Holder.from_json(holder.to_json(), "n1", "holder") == holder
    assert VerifyProblem.from_json(problem.to_json(), "n1", "problem") == problem


@settings(max_examples=200, deadline=None)
@given(verifications)
def test_a_verification_reads_back_through_json_text(verification: CacheVerification) -> None:
    doc = decode(json.dumps(verification.envelope()), "n1", "cache verify JSON")
    assert CacheVerification.from_json(doc) == verification
    for verdict in verification.entries:
        assert EntryVerification.from_json(verdict.to_json()) == verdict


def test_a_real_scan_and_verification_read_back(tmp_path: Path) -> None:
    root = tmp_path / "wc"
    write_cache_entry(root, make_key("good"), num_shards=2, status="complete", tensor_bytes=256, last_used=1.5e9)
    write_cache_entry(root, make_key("odd"), num_shards=2, seed=1, status="disagreeing-shard", tensor_bytes=256)
    write_cache_entry(root, make_key("half"), num_shards=3, present=[1], status="incomplete", tensor_bytes=256)
    write_cache_entry(root, make_key("none"), status="empty")
    scan = scan_cache(str(root))
    assert len(scan.entries) == 4 and any(e.summary is not None for e in scan.entries)
    doc = decode(json.dumps(scan.envelope(list(scan.entries), cap=None, cap_error=None)), "n1", "cache ls JSON")
    assert tuple(CacheEntry.from_json(e) for e in doc["entries"]) == scan.entries
    verification = verify_cache(scan)
    assert any(v.problems for v in verification.entries) and any(v.not_verifiable for v in verification.entries)
    assert CacheVerification.from_json(json.loads(json.dumps(verification.envelope()))) == verification


def test_an_older_node_s_entry_reads_with_unknowns() -> None:
    """Only key, status and bytes are required: what an older node leaves out reads as unknown."""
    entry = CacheEntry.from_json({"key": "k", "status": "stale", "bytes": 7, "summary": None})
    assert entry == CacheEntry("k", "", 7, None, None, (), "stale", False, "", None, None)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"key": "k", "status": "complete", "bytes": -1},
         "n1: entries[0] field 'bytes' is out of range (must be 0..9223372036854775807)"),
        ({"key": "k", "status": "complete", "bytes": True}, "n1: entries[0] field 'bytes' must be an integer (got boolean)"),
        ({"key": "k", "status": 3, "bytes": 1}, "n1: entries[0] field 'status' must be a string (got integer)"),
        ({"status": "complete", "bytes": 1}, "n1: entries[0] field 'key' is missing"),
        ({"key": "k", "status": "complete", "bytes": 1, "num_shards": False},
         "n1: entries[0] field 'num_shards' must be an integer (got boolean)"),
        ({"key": "k", "status": "complete", "bytes": 1, "last_used": 1e300},
         "n1: entries[0] field 'last_used' is out of range (must be -6.21356e+10..2.53402e+11)"),
        ({"key": "k", "status": "complete", "bytes": 1, "owner_uid": 2**32},
         "n1: entries[0] field 'owner_uid' is out of range (must be 0..4294967295)"),
        ({"key": "k", "status": "complete", "bytes": 1, "shards_present": [0, "1"]},
         "n1: entries[0] field 'shards_present' must be a list of non-negative integers"),
        ({"key": "k", "status": "complete", "bytes": 1, "in_use_by": [{"pid": 0, "command": "x", "how": "open"}]},
         "n1: entries[0] in_use_by[0] field 'pid' is out of range (must be 1..2147483647)"),
        ({"key": "k", "status": "complete", "bytes": 1,
          "summary": {"params": 1, "numel": 1, "dtypes": {"torch.float32": -1}, "kinds": {}}},
         "n1: entries[0] summary field 'dtypes' must map names to non-negative integers"),
        ([], "n1: entries[0] must be a JSON object (got list)"),
    ],
)
def test_a_damaged_entry_is_one_error_naming_the_field(doc: object, message: str) -> None:
    with pytest.raises(UntrustedError) as caught:
        CacheEntry.from_json(doc, "n1", "entries[0]")
    assert str(caught.value) == message


def test_a_verdict_whose_ok_contradicts_its_problems_is_refused() -> None:
    problem = {"shard": "shard0-of-1.safetensors", "param": "w", "problem": "dtype"}
    with pytest.raises(UntrustedError) as caught:
        EntryVerification.from_json({"key": "k", "ok": True, "problems": [problem]}, "n1", "entries[0]")
    assert str(caught.value) == "n1: entries[0] field 'ok' is true but the rest of it says otherwise"
    with pytest.raises(UntrustedError) as caught:
        CacheVerification.from_json({"root": "/r", "entries": [], "missing": ["k"], "ok": True}, "n1", "verify")
    assert str(caught.value) == "n1: verify field 'ok' is true but the rest of it says otherwise"
    with pytest.raises(UntrustedError) as caught:
        EntryVerification.from_json({"key": "k", "problems": [{"shard": None}]}, "n1", "entries[0]")
    assert str(caught.value) == "n1: entries[0] problems[0] field 'problem' is missing"
