"""Every reader of an untrusted JSON document, fed hostile documents: one bad record is that record's problem.

Journal lines (``history`` text and ``--json``, the History view), lock and evictor holder
records, cache manifests and safetensors headers, fleet frames and the ``reason`` in them.
Each expected value is written out here, never taken from the code under test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fvconsole.cli import main
from fvconsole.core.journal.log import JournalRecord, append_record

# One good-looking journal line, to damage one field at a time.
GOOD_LINE = {"format": "fvconsole-journal/v1", "time": "2026-01-01T00:00:00Z", "epoch": 1767225600.0,
             "user": "ann", "host": "login1", "pid": 4242, "command": "fvconsole cache evict --yes",
             "action": "cache evict", "target": "/dev/shm/wc", "result": "ok", "exit_code": 0, "bytes": 10,
             "items": ["k"], "items_total": 1, "errors": [], "errors_total": 0, "details": {}}

# (field, raw JSON text of its value): each makes the line unusable, never the command.
DAMAGED = [
    ("epoch", "1e400"),
    ("epoch", "-1e400"),
    ("epoch", "NaN"),
    ("epoch", "Infinity"),
    ("epoch", "1" + "0" * 400),
    ("epoch", "1" + "0" * 5000),
    ("epoch", "-5"),
    ("epoch", '"yesterday"'),
    ("pid", "[1]"),
    ("pid", "-1"),
    ("bytes", "-1"),
    ("bytes", "1" + "0" * 30),
    ("exit_code", '"0"'),
    ("exit_code", "true"),
    ("items", "[1, 2]"),
    ("items_total", "-3"),
    ("details", "[]"),
    ("user", "{}"),
]


def _line(field: str, raw: str) -> str:
    doc = dict(GOOD_LINE)
    doc[field] = "@@"
    return json.dumps(doc).replace('"@@"', raw)


def _journal(tmp_path: Path, bad: str) -> Path:
    path = tmp_path / "journal.jsonl"
    good = JournalRecord.now(action="cache evict", target="/dev/shm/wc", result="ok", exit_code=0, bytes=3 << 30,
                             command="fvconsole cache evict --yes")
    append_record(good, str(path))
    with open(path, "a") as fh:
        fh.write(bad + "\n")
    append_record(good, str(path))
    return path


def test_the_format_check_is_really_the_journal_format() -> None:
    assert JournalRecord.from_json(GOOD_LINE).time == 1767225600.0


@pytest.mark.parametrize(("field", "raw"), DAMAGED)
def test_history_skips_a_damaged_line_with_one_warning(tmp_path: Path, capsys, field: str, raw: str) -> None:
    path = _journal(tmp_path, _line(field, raw))
    assert main(["history", "--journal", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("cache evict") == 2 and "3.0 GiB" in captured.out
    assert captured.err == "warning: 1 malformed line skipped\n" and "warning" not in captured.out
    assert main(["history", "--journal", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == 2 and doc["malformed_lines"] == 1 and "error" not in doc


async def test_the_history_view_skips_a_damaged_line(tmp_path: Path) -> None:
    from tour import press, started

    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState

    path = _journal(tmp_path, _line("epoch", "1e400"))
    app = FvConsoleApp(ConsoleState(journal_path=str(path)))
    async with app.run_test(size=(100, 30)) as pilot:
        await started(app, pilot)
        await press(app, pilot, "5")
        assert app.query_one("#hist-table").row_count == 2
        banner = str(app.query_one("#hist-banner").render())
        assert "1 malformed line skipped" in banner


# --------------------------------------------------------------------------- lock and evictor holder records

# (field, raw JSON text): each makes a holder record unusable; the lock must still refuse cleanly.
DAMAGED_HOLDER = [
    ("pid", "1" + "0" * 30),
    ("pid", "-1"),
    ("pid", "0"),
    ("pid", "[1]"),
    ("pid", '"1"'),
    ("pidns", "1e400"),
    ("since_epoch", "1e400"),
    ("since_epoch", "NaN"),
    ("since_epoch", "1" + "0" * 400),
    ("since_epoch", "-1"),
    ("start_time", "-5"),
    ("start_time", "1" + "0" * 40),
    ("host", "{}"),
]


def _names_the_problem(err: str, field: str) -> bool:
    """The field at fault, or (a number no JSON reader should accept) the document's own problem."""
    return f"field '{field}'" in err or "non-finite number" in err


def _holder_record(field: str, raw: str) -> bytes:
    from fvconsole.core.shared.locks import Holder

    doc = Holder.current("fvconsole migrate --yes").to_json()
    doc[field] = "@@"
    return json.dumps(doc).replace('"@@"', raw).encode()


@pytest.mark.parametrize(("field", "raw"), DAMAGED_HOLDER)
def test_a_damaged_migration_lock_record_is_the_clean_refusal(tmp_path: Path, cli, field: str, raw: str) -> None:
    from migration_runs import build_legacy

    legacy = build_legacy(str(tmp_path))
    parent, name = os.path.split(legacy.out)
    lock = os.path.join(parent, f".{name}.fvconsole-lock")
    Path(lock).write_bytes(_holder_record(field, raw))
    for extra in ((), ("--yes",), ("--yes", "--break-lock")):
        code, out, err = cli(legacy.migrate_argv(*extra))
        assert code == 1, (extra, err)
        assert err.startswith("error: ") and len(err.splitlines()) == 1, err
        assert f"lock file {lock} is unreadable" in err and _names_the_problem(err, field), err
    assert not os.path.exists(legacy.out) and os.path.exists(lock)


@pytest.mark.parametrize(("field", "raw"), DAMAGED_HOLDER)
def test_a_damaged_evictor_record_never_breaks_a_dry_run(tmp_path: Path, cli, field: str, raw: str) -> None:
    from sized_cache import sized_entry

    from fvconsole.core.cache.roots import EVICTOR, evictor_lock

    root = tmp_path / "wcache"
    for i, key in enumerate("abc"):
        sized_entry(root, key, 1, (3 - i) * 86400.0)
    record = EVICTOR.record(os.path.realpath(root))
    Path(record).write_bytes(_holder_record(field, raw))
    code, out, err = cli(["cache", "evict", str(root), "--older-than", "2d"])  # nobody evicts: the record is ignored
    assert code == 0, err
    assert "re-run with --yes" in out
    # Someone evicts (the flock is held) and its record is damaged: the refusal names the record.
    holder = evictor_lock(str(root), command="cron")
    holder.acquire()
    try:
        Path(record).write_bytes(_holder_record(field, raw))
        for extra in ((), ("--yes",)):
            code, out, err = cli(["cache", "evict", str(root), "--older-than", "2d", *extra])
            if not extra and code == 0:
                continue  # a dry run reads only the record, which names nobody: no refusal to give
            assert code == 1, err
            assert err.startswith(f"error: {root}: another eviction is running") and len(err.splitlines()) == 1
            assert f"its holder record {record} is damaged" in err and _names_the_problem(err, field), err
    finally:
        holder.release()


# --------------------------------------------------------------------------- cache manifests and shard headers

HOSTILE_MANIFESTS = [
    ('{"format_version": NaN}', "invalid"),
    ('{"format_version": 1, "num_shards": 1e400}', "invalid"),
    ('{"format_version": 1, "num_shards": ' + "9" * 5000 + "}", "invalid"),
    ("[" + "{}," * 200_000 + "{}]", "invalid"),
    ("[" * 100_000, "invalid"),
]


@pytest.mark.parametrize(("text", "status"), HOSTILE_MANIFESTS)
def test_a_hostile_cache_manifest_is_that_entrys_problem(tmp_path: Path, cli, text: str, status: str) -> None:
    from sized_cache import sized_entry

    root = tmp_path / "wcache"
    good = sized_entry(root, "good", 1, 86400.0)
    bad = sized_entry(root, "bad", 1, 86400.0)
    (root / bad / "manifest.json").write_text(text)
    code, out, err = cli(["cache", "ls", str(root), "--json"])
    assert code == 0, err
    entries = {e["key"]: e for e in json.loads(out)["entries"]}
    assert entries[good]["status"] == "complete" and entries[bad]["status"] == status
    assert "manifest.json" in entries[bad]["explanation"]


def test_an_absurd_global_shape_counts_nothing_and_lists(tmp_path: Path, cli) -> None:
    """A shape of [10**300] * 20 made a 6000-digit element count that str() and json.dumps refuse."""
    from sized_cache import sized_entry

    root = tmp_path / "wcache"
    key = sized_entry(root, "e", 1, 86400.0)
    path = root / key / "manifest.json"
    doc = json.loads(path.read_text())
    doc["params"]["w"]["global_shape"] = [10**300] * 20
    doc["params"]["v"] = {"kind": "tensor", "dtype": "torch.float32", "global_shape": [2, 3]}
    path.write_text(json.dumps(doc))
    for argv in (["cache", "ls", str(root), "--json"], ["cache", "ls", str(root)]):
        code, out, err = cli(argv)
        assert code == 0, err
    entry = json.loads(cli(["cache", "ls", str(root), "--json"]).stdout)["entries"][0]
    assert entry["manifest"]["numel"] == 6 if "manifest" in entry else entry["summary"]["numel"] == 6


# --------------------------------------------------------------------------- fleet frames and the reason inside them

GOOD_REASON = {"code": "lock.evicting", "field": "lock",
               "values": {"subject": "/r", "what": "another eviction is running", "who": ""}}

DAMAGED_REASONS = [
    ({"code": ["lock.evicting"], "field": "lock", "values": {}}, "field 'code' must be a string"),
    ({"code": {"a": 1}, "field": "lock", "values": {}}, "field 'code' must be a string"),
    ({**GOOD_REASON, "values": {**GOOD_REASON["values"], "code": "x"}}, None),
    ({**GOOD_REASON, "values": {**GOOD_REASON["values"], "field": "x"}}, None),
    ({**GOOD_REASON, "values": {"subject": 1}}, "field 'values' must map names to strings"),
    ({**GOOD_REASON, "values": []}, "field 'values' must be an object"),
    ({**GOOD_REASON, "field": None}, "field 'field' is null"),
    ({"field": "lock", "values": {}}, "field 'code' is missing"),
]


@pytest.mark.parametrize(("doc", "problem"), DAMAGED_REASONS)
def test_a_damaged_reason_is_typed_not_a_crash(doc: dict, problem: str | None) -> None:
    from fvconsole.core.shared.untrusted import UntrustedError, parse_reason

    if problem is None:  # values named like Reason's own fields are just values
        parsed = parse_reason(doc)
        assert parsed is not None and parsed.code == "lock.evicting" and parsed.field == "lock"
        assert parsed.cli.startswith("/r: another eviction is running")
        return
    with pytest.raises(UntrustedError, match=problem):
        parse_reason(doc)


def _node_lines(node: str, doc: dict) -> list[str]:
    from fvconsole.core.fleet.frames import result_lines, start_line

    return [start_line(node), *result_lines(node, doc)]


@pytest.mark.parametrize(("doc", "problem"), [d for d in DAMAGED_REASONS if d[1]])
def test_a_damaged_node_reason_makes_that_node_invalid_only(doc: dict, problem: str) -> None:
    from fvconsole.core.fleet.demux import StepDemux
    from fvconsole.core.fleet.outcomes import classify

    envelopes = {"n1": {"node": "n1", "exit": 1, "output": {"error": "busy"}, "reason": doc},
                 "n2": {"node": "n2", "exit": 1, "output": {"error": "busy"}, "reason": GOOD_REASON}}
    demux = StepDemux(("n1", "n2"), cap=1 << 20)
    for task, node in enumerate(("n1", "n2")):
        demux.feed_stdout("".join(f"{task}: {line}\n" for line in _node_lines(node, envelopes[node])).encode())
    demux.finish()
    outcomes = {node: classify(demux.streams[node], expects="ls", timeout=5, cap=1 << 20, srun_exit=1,
                               timed_out=False) for node in ("n1", "n2")}
    assert outcomes["n1"].kind == "invalid" and problem in outcomes["n1"].error
    assert outcomes["n2"].kind == "failed" and outcomes["n2"].reason.code == "lock.evicting"


@pytest.mark.parametrize("text", ['{"node": "n1", "exit": 1e400}', '{"node": "n1", "exit": NaN}',
                                  '{"node": "n1", "exit": ' + "1" * 5000 + "}", "[" * 50_000 + "]" * 50_000])
def test_a_hostile_frame_is_that_nodes_problem(text: str) -> None:
    from fvconsole.core.fleet.frames import decode_result

    value, problem = decode_result(text)
    assert value is None and problem and "\n" not in problem


# --------------------------------------------------------------------------- receipts (the console's published-set column)

def _receipt(tmp_path: Path, **over: object) -> Path:
    from fvconsole.core.migration.receipt import RECEIPT_SCHEMA

    doc = {"schema": RECEIPT_SCHEMA, "source_checkpoint": "/ckpt/checkpoint-2", "step": 2, "world_size": 1,
           "consumed_batches_per_rank": 2, "created_at_utc": "2026-01-01T00:00:00Z",
           "sidecars": [{"rank": 0, "path": "dataloader_state_rank0.pt"}]}
    doc.update(over)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / "migration_receipt.json").write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("over", [{"sidecars": [{"path": []}]}, {"sidecars": [{"path": {"a": 1}}, "x"]}])
def test_a_receipt_with_odd_sidecar_paths_still_reads(tmp_path: Path, over: dict) -> None:
    from fvconsole.core.migration.published import read_published_set

    found = read_published_set(str(_receipt(tmp_path, **over)))
    assert found is not None and found.sidecars_listed == 0 and found.world_size == 1


@pytest.mark.parametrize(("over", "field"), [({"world_size": -1}, "world_size"), ({"step": [2]}, "step"),
                                             ({"world_size": 10**30}, "world_size"), ({"sidecars": {}}, "sidecars")])
def test_a_receipt_with_a_bad_field_is_one_error_naming_it(tmp_path: Path, over: dict, field: str) -> None:
    from fvconsole.core.migration.published import read_published_set
    from fvconsole.core.shared.errors import FvError

    out = _receipt(tmp_path, **over)
    with pytest.raises(FvError) as info:
        read_published_set(str(out))
    assert str(info.value).startswith(str(out / "migration_receipt.json")) and f"'{field}'" in str(info.value)
