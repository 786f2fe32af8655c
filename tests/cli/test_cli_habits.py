"""What a newcomer hit on the command line (issue 38 items 11-15): each case failed before its fix.

Expected values are written by hand from the inputs each test builds.
"""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest
from terminals import read_until_closed

from fvconsole.cli import main
from fvconsole.demo.cache_builders import make_key, write_cache_entry

DAY = 86400.0


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """Three entries: an old crashed write (no manifest), one used four days ago, one used an hour ago."""
    root = tmp_path / "wcache"
    now = time.time()
    write_cache_entry(root, make_key("crashed"), num_shards=2, status="incomplete", tensor_bytes=64)
    write_cache_entry(root, make_key("old"), num_shards=1, tensor_bytes=64, last_used=now - 4 * DAY)
    write_cache_entry(root, make_key("new"), num_shards=1, tensor_bytes=64, last_used=now - 3600)
    return root


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- item 12: cache ls --format csv


def test_cache_ls_has_a_csv_format_like_the_fleets(cache: Path, capsys) -> None:
    listing = _json(capsys, "cache", "ls", str(cache), "--json")
    assert main(["cache", "ls", str(cache), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["node", "root", "key", "status", "bytes", "last_used_utc", "writing", "shards_present",
                       "num_shards", "fs_free_bytes"]
    by_key = {r[2]: r for r in rows[1:]}
    assert set(by_key) == {make_key("crashed"), make_key("old"), make_key("new")}
    for entry in listing["entries"]:
        row = by_key[entry["key"]]
        assert row[1] == str(cache) and row[3] == entry["status"] and row[4] == str(entry["bytes"])
        assert row[7] == str(len(entry["shards_present"])) and row[8] == str(entry["num_shards"])
    assert by_key[make_key("crashed")][5] == "" and by_key[make_key("old")][5].endswith("Z")
    assert out.endswith("\r\n")


# ---------------------------------------------------------------- item 13: REASON whole when piped or --wide


def test_cache_evict_reason_is_not_cut_when_piped(cache: Path, capsys) -> None:
    argv = ["cache", "evict", str(cache), "--key", make_key("old"), "--max-gb", "0.0000001", "--older-than", "1s",
            "--invalid", "--grace", "0s"]
    planned = _json(capsys, *argv, "--json")
    long = [e["reason"] for e in planned["evict"] if len(e["reason"]) > 100]
    assert long, planned["evict"]  # the case needs a reason over the old cut
    for extra in ((), ("--wide",)):
        assert main([*argv, *extra]) == 0
        out = capsys.readouterr().out
        assert all(reason in out for reason in long), out


# ---------------------------------------------------------------- item 11: checkpoints prune --step N


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Complete 100, 200, 300 (300 the newest: never deleted) and an interrupted 250 (five days old)."""
    from retention_runs import make_checkpoint

    out = tmp_path / "out"
    out.mkdir()
    for step, days in ((100, 9), (200, 8), (300, 1)):
        make_checkpoint(out, step, age=days * DAY)
    make_checkpoint(out, 250, complete=False, age=5 * DAY)
    return out


def test_prune_step_selects_checkpoints_by_name_under_the_never_delete_rules(out: Path, capsys) -> None:
    plan = _json(capsys, "checkpoints", "prune", str(out), "--step", "200", "--step", "250", "--step", "300", "--json")
    assert sorted(d["step"] for d in plan["delete"]) == [200, 250]
    kept = {k["step"]: k["reason"] for k in plan["kept"]}
    assert sorted(kept) == [100, 300] and "never deleted" in kept[300]  # the newest complete one stays
    assert {d["reason"] for d in plan["delete"]} == {"selected by its step (--step 200)",
                                                    "selected by its step (--step 250)"}
    assert plan["rules"]["marked"] == [200, 250, 300]
    assert main(["checkpoints", "prune", str(out), "--step", "200", "-y", "--no-journal"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-100", "checkpoint-250", "checkpoint-300"]


def test_prune_step_that_is_not_there_refuses_the_prune(out: Path, capsys) -> None:
    assert main(["checkpoints", "prune", str(out), "--step", "100", "--step", "150", "--yes", "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == f"error: checkpoint-150: not a checkpoint of {out} (--step); nothing pruned"
    assert json.loads(captured.out)["missing"] == [150]
    assert (out / "checkpoint-100").is_dir()
    assert main(["checkpoints", "prune", str(out), "--step", "100", "--keep", "100"]) == 2
    assert capsys.readouterr().err.startswith("error: --step 100 and --keep 100 contradict each other\n")


# ---------------------------------------------------------------- item 15: JSON


def test_prune_kept_items_have_bytes(out: Path, capsys) -> None:
    plan = _json(capsys, "checkpoints", "prune", str(out), "--keep-last", "1", "--json")
    listing = _json(capsys, "checkpoints", "ls", str(out), "--json")
    sizes = {c["step"]: c["bytes"] for c in listing["checkpoints"]}
    assert plan["kept"] and all(k["bytes"] == sizes[k["step"]] for k in plan["kept"])


def test_latest_has_keys_that_name_its_three_meanings(out: Path, capsys) -> None:
    from retention_runs import make_checkpoint

    make_checkpoint(out, 400, complete=False, age=60)  # the newest save, interrupted: `latest` resumes from it
    doc = _json(capsys, "checkpoints", "ls", str(out), "--json")
    assert doc["latest"] == doc["latest_resume_path"] == str(out / "checkpoint-400")
    assert doc["disk"]["latest"] == doc["disk"]["latest_complete_path"] == str(out / "checkpoint-300")
    assert doc["fastvideo"]["latest"] == doc["fastvideo"]["latest_resume_step"] == 400


def test_every_json_error_has_a_stable_code(cache: Path, tmp_path: Path, capsys) -> None:
    cases = [
        (["cache", "evict", str(cache), "--json"], 2, "evict.nothing_selected"),  # a reason's code
        (["cache", "evict", str(cache), "--json", "--bogus"], 2, "usage"),  # argparse's
        (["cache", "evict", str(cache), "--key", "f" * 16, "--json"], 1, "refused"),
        (["cache", "ls", str(tmp_path / "absent"), "--json"], 1, None),
    ]
    for argv, code, expected in cases:
        try:
            got = main(argv)
        except SystemExit as stop:
            got = stop.code
        doc = json.loads(capsys.readouterr().out)
        assert got == code and "error" in doc, argv
        assert isinstance(doc["code"], str) and doc["code"], argv
        if expected is not None:
            assert doc["code"] == expected, (argv, doc)


# ---------------------------------------------------------------- item 14: wording


def test_a_wrong_typed_value_leads_with_its_type_and_suggests_no_override(ws, tmp_path: Path, capsys) -> None:
    code = main(ws.migrate_args(tmp_path / "out", "--set", "training.distributed.num_gpus=eight", yes=False))
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.startswith("error: training.distributed.num_gpus: must be an integer"), captured.err
    both = captured.out + captured.err
    # No override is suggested: the checkpoint's value (16) is never offered as a --set; the only override
    # named is the operator's own, as the source of the bad value (the mismatch table's "from" column).
    assert "num_gpus=16" not in both, both
    assert both.count("training.distributed.num_gpus=") == both.count("training.distributed.num_gpus=eight"), both


def test_an_empty_run_config_says_so(ws, tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    argv = ws.migrate_args(tmp_path / "out", yes=False)
    argv[argv.index("--config") + 1] = str(empty)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{empty}: run config is empty" in err and "NoneType" not in err


def test_no_jargon_and_the_helps_say_what_they_mean(capsys) -> None:
    package = Path(__import__("fvconsole").__file__).parent
    assert not [p for p in package.rglob("*.py") if "chimera" in p.read_text()]
    with pytest.raises(SystemExit):
        main(["migrate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the checkpoint's world size" in text and "the run's world size" not in text
    assert "--reshard" in text and "FastVideo-native" in text
    with pytest.raises(SystemExit):
        main(["history", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "`checkpoints prune --yes`" in text and "--oldest-first" in text


def test_after_a_reshard_the_next_step_names_the_world_size(ws, tmp_path: Path, capsys) -> None:
    argv = ws.migrate_args(tmp_path / "out", "--set", "training.distributed.num_gpus=8", "--reshard", "nearest",
                           "--no-journal")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "next step: resume training on world size 8 (sp size 2; this set is for 8 ranks) with" in out, out


def test_a_refusal_is_not_printed_twice_on_one_terminal(ws, tmp_path: Path) -> None:
    """stdout and stderr on one terminal: the `error:` line stays, the block's copy of it goes."""
    import os
    import pty
    import subprocess
    import sys

    argv = ws.migrate_args(tmp_path / "out", "--set", "training.distributed.num_gpus=eight", yes=False)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fvconsole", *argv], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, env={**os.environ, "COLUMNS": "200"})
    os.close(follower)
    text = read_until_closed(leader).decode()
    assert proc.wait(timeout=120) == 1
    first = "training.distributed.num_gpus: must be an integer"
    assert text.count(first) == 1, text  # on the error line only
    assert "error: " + first in text
    assert "refused (2 reasons); nothing written; the first is the error line below:" in text


def test_history_lists_newest_first(tmp_path: Path, capsys) -> None:
    from fvconsole.core.journal import JournalRecord, append_record

    journal = str(tmp_path / "journal.jsonl")
    for n, target in enumerate(("/r/first", "/r/second")):
        record = JournalRecord(action="cache evict", target=target, result="ok", exit_code=0, bytes=n, user="u",
                               host="h", pid=1, time=1_800_000_000.0 + n, command="fvconsole cache evict --yes")
        assert append_record(record, journal).written
    assert main(["history", "--journal", journal]) == 0
    out = capsys.readouterr().out
    assert out.index("/r/second") < out.index("/r/first")
    assert main(["history", "--journal", journal, "--oldest-first"]) == 0
    out = capsys.readouterr().out
    assert out.index("/r/first") < out.index("/r/second")
    doc = _json(capsys, "history", "--journal", journal, "--json", "--limit", "1")
    assert [r["target"] for r in doc["records"]] == ["/r/second"]
    doc = _json(capsys, "history", "--journal", journal, "--json")
    assert [r["target"] for r in doc["records"]] == ["/r/second", "/r/first"]
