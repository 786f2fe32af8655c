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
