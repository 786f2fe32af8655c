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
