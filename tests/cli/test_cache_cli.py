"""`fvconsole cache ls|evict`: JSON shapes, human output, exit codes, startup imports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from reliability.harness import run_inproc

from fvconsole.cli import main
from fvconsole.demo.cache_builders import make_key, write_cache_entry

DAY = 86400.0
LS_FIELDS = {"key", "path", "bytes", "last_used", "num_shards", "shards_present", "status", "writing"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A root with one entry of most kinds, a foreign file and a crashed eviction's leftover."""
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE", raising=False)
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB", raising=False)
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    root = tmp_path / "wcache"
    now = time.time()
    keys = {}
    for seed, (status, age) in enumerate([("complete", 3 * DAY), ("complete", 1 * DAY), ("partial", 2 * DAY),
                                          ("incomplete", 4 * DAY), ("writing", 0), ("invalid-shard", 5 * DAY)]):
        path = write_cache_entry(root, status=status, last_used=now - age, seed=seed, tensor_bytes=2048 * (seed + 1))
        keys[f"{status}{seed}"] = os.path.basename(path)
    (root / "README.txt").write_text("foreign")
    leftover = root / f".evicting-{make_key('x')}-4194300"
    leftover.mkdir()
    return root, keys


def _run(capsys, *argv):
    return tuple(run_inproc(argv, capsys))


def _json(capsys, *argv):
    code, out, err = _run(capsys, *argv)
    lines = out.strip().splitlines()
    assert len(lines) == 1, out  # exactly one JSON object
    return code, json.loads(lines[0]), err


def test_ls_json_shape(cache, capsys, monkeypatch):
    root, keys = cache
    monkeypatch.setenv("SLURMD_NODENAME", "node017")
    code, payload, _ = _json(capsys, "cache", "ls", str(root), "--json")
    assert code == 0
    assert payload["root"] == str(root) and payload["hostname"] and payload["node"] == "node017"
    assert payload["foreign"] == ["README.txt"] and len(payload["leftovers"]) == 1
    assert len(payload["entries"]) == 6
    for entry in payload["entries"]:
        assert set(entry) >= LS_FIELDS and isinstance(entry["bytes"], int)
        assert entry["last_used"] is None or isinstance(entry["last_used"], float)
        assert entry["explanation"]
    assert payload["total_bytes"] == sum(e["bytes"] for e in payload["entries"])
    assert payload["cap_bytes"] == 300 * 2**30
    statuses = {e["key"]: e["status"] for e in payload["entries"]}
    assert statuses[keys["partial2"]] == "partial" and statuses[keys["invalid-shard5"]] == "invalid"
    assert [e["writing"] for e in payload["entries"] if e["key"] == keys["writing4"]] == [True]


def test_ls_sort_orders(cache, capsys):
    root, keys = cache
    _, lru, _ = _json(capsys, "cache", "ls", str(root), "--json")
    order = [e["key"] for e in lru["entries"]]
    # no manifest first (smaller first), then oldest manifest mtime
    assert order[:2] == [keys["writing4"], keys["incomplete3"]] or order[:2] == [keys["incomplete3"], keys["writing4"]]
    assert order[2:] == [keys["invalid-shard5"], keys["complete0"], keys["partial2"], keys["complete1"]]
    _, by_size, _ = _json(capsys, "cache", "ls", str(root), "--json", "--sort", "size")
    sizes = [e["bytes"] for e in by_size["entries"]]
    assert sizes == sorted(sizes, reverse=True)
    _, by_key, _ = _json(capsys, "cache", "ls", str(root), "--json", "--sort", "key")
    assert [e["key"] for e in by_key["entries"]] == sorted(keys.values())


def test_ls_human_table_and_footer(cache, capsys, monkeypatch):
    root, keys = cache
    monkeypatch.setenv("FASTVIDEO_WEIGHT_SHARD_CACHE", str(root))
    monkeypatch.setenv("FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB", "0.5")
    code, out, _ = _run(capsys, "cache", "ls")
    assert code == 0
    assert "KEY" in out and "STATUS" in out and keys["complete0"] in out
    assert "in 6 entries" in out and "cap 512.0 MiB" in out and "filesystem free" in out
    assert "README.txt" in out and ".evicting-" in out and "KiB" in out


def test_root_from_global_option(cache, capsys):
    root, _ = cache
    code, payload, _ = _json(capsys, "--cache-root", str(root), "cache", "ls", "--json")
    assert code == 0 and payload["root"] == str(root)


def test_ls_errors_and_exit_codes(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE", raising=False)
    code, out, err = _run(capsys, "cache", "ls")
    assert code == 2 and "FASTVIDEO_WEIGHT_SHARD_CACHE" in err
    code, payload, err = _json(capsys, "cache", "ls", str(tmp_path / "missing"), "--json")
    assert code == 1 and "does not exist" in payload["error"] and "missing" in err
    code, _, err = _run(capsys, "cache", "ls", str(tmp_path), "--grace", "soon")
    assert code == 2 and "--grace" in err


def test_evict_dry_run_changes_nothing(cache, capsys):
    root, keys = cache
    before = sorted(os.listdir(root))
    code, out, _ = _run(capsys, "cache", "evict", str(root), "--older-than", "36h")
    assert code == 0 and sorted(os.listdir(root)) == before
    assert "would free" in out and "re-run with --yes" in out and keys["complete0"] in out
    code, payload, _ = _json(capsys, "cache", "evict", str(root), "--older-than", "36h", "--json")
    assert code == 0 and payload["executed"] is False and payload["errors"] == []
    assert {e["key"] for e in payload["evict"]} >= {keys["complete0"], keys["partial2"], keys["invalid-shard5"]}
    assert all({"key", "bytes", "reason"} <= set(e) for e in payload["evict"])
    assert {s["key"] for s in payload["skipped"]} == {keys["writing4"]}
    assert payload["freed_bytes"] == sum(e["bytes"] for e in payload["evict"])
    assert sorted(os.listdir(root)) == before


def test_evict_yes_json_executes(cache, capsys):
    root, keys = cache
    code, payload, _ = _json(capsys, "cache", "evict", str(root), "--invalid", "--key", keys["complete1"],
                             "--keep", keys["incomplete3"], "--yes", "--json")
    assert code == 0 and payload["executed"] is True and payload["errors"] == []
    evicted = {e["key"] for e in payload["evict"]}
    assert evicted == {keys["invalid-shard5"], keys["complete1"], make_key("x")}  # + the leftover
    skipped = {s["key"]: s["reason"] for s in payload["skipped"]}
    assert skipped[keys["incomplete3"]] == "kept (--keep)" and "being written" in skipped[keys["writing4"]]
    assert payload["freed_bytes"] == sum(e["bytes"] for e in payload["evict"]) > 0
    assert "fs_free_bytes_before" in payload and payload["hostname"]
    remaining = set(os.listdir(root))
    assert remaining == set(keys.values()) - {keys["invalid-shard5"], keys["complete1"]} | {"README.txt"}


def test_evict_max_gb_without_value_uses_the_environment(cache, capsys, monkeypatch):
    root, keys = cache
    monkeypatch.setenv("FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB", "0")
    code, payload, _ = _json(capsys, "cache", "evict", str(root), "--json", "--max-gb")
    assert code == 0 and payload["cap_bytes"] == 0
    assert {e["key"] for e in payload["evict"]} == set(keys.values()) - {keys["writing4"]} | {make_key("x")}
    code, out, _ = _run(capsys, "cache", "evict", str(root), "--max-gb", "0.5")
    assert code == 0 and "nothing to evict" not in out  # only the leftover; nothing over 0.5 GiB
    assert "would free" in out


@pytest.mark.parametrize(("argv", "needle"), [
    (["--older-than", "7"], "--older-than"),
    (["--older-than", "3 days"], "--older-than"),
    (["--grace", "x"], "--grace"),
    (["--key", "NOT-A-KEY"], "--key"),
    (["--keep", "abc"], "--keep"),
    (["--max-gb", "lots"], "--max-gb"),
    (["--max-gb=-1"], "--max-gb"),
    ([], "nothing selected"),
])
def test_evict_usage_errors_exit_2(cache, capsys, argv, needle):
    root, _ = cache
    before = sorted(os.listdir(root))
    code, payload, err = _json(capsys, "cache", "evict", str(root), "--json", "--yes", *argv)
    assert code == 2 and needle in payload["error"] and needle in err
    assert sorted(os.listdir(root)) == before


def test_evict_refuses_dangerous_roots_exit_1(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    key = os.path.basename(write_cache_entry(home, last_used=time.time() - DAY))
    monkeypatch.setenv("HOME", str(home))
    code, payload, _ = _json(capsys, "cache", "evict", str(home), "--max-gb", "0", "--yes", "--force", "--json")
    assert code == 1 and "home directory" in payload["error"] and (home / key).is_dir()
    code, _, err = _run(capsys, "cache", "evict", "~", "--max-gb", "0", "--yes")
    assert code == 1 and "home directory" in err and (home / key).is_dir()
    code, _, err = _run(capsys, "cache", "evict", "/", "--max-gb", "0", "--yes", "--force")
    assert code == 1 and "filesystem root" in err

    stuff = tmp_path / "stuff"
    stuff.mkdir()
    (stuff / "data.bin").write_bytes(b"d")
    code, _, err = _run(capsys, "cache", "evict", str(stuff), "--invalid", "--yes")
    assert code == 1 and "no cache-looking entries" in err
    code, _, _ = _run(capsys, "cache", "evict", str(stuff), "--invalid", "--yes", "--force")
    assert code == 0 and (stuff / "data.bin").read_bytes() == b"d"

    code, _, err = _run(capsys, "cache", "evict", str(tmp_path / "absent"), "--invalid")
    assert code == 1 and "does not exist" in err


def test_evict_failure_part_way_exits_3_with_report(tmp_path, capsys, pin_after_check):
    root = tmp_path / "cache"
    now = time.time()
    stuck = os.path.basename(write_cache_entry(root, last_used=now - 3 * DAY, seed=1))
    fine = os.path.basename(write_cache_entry(root, last_used=now - 2 * DAY, seed=2))
    pin_after_check(root / stuck, "manifest.json")  # immutable after the removability check
    code, payload, err = _json(capsys, "cache", "evict", str(root), "--max-gb", "0", "--yes", "--json")
    assert code == 3 and payload["executed"] is True
    assert [e["key"] for e in payload["evict"]] == [fine] and len(payload["errors"]) == 1
    assert "could not be evicted" in payload["error"] and "error:" in err


def test_cache_ls_json_does_not_import_heavy_libraries(cache):
    root, _ = cache
    probe = (
        "import contextlib, io, json, sys\n"
        "from fvconsole.cli import main\n"
        "buf = io.StringIO()\n"
        f"with contextlib.redirect_stdout(buf):\n    code = main(['cache', 'ls', {str(root)!r}, '--json'])\n"
        "print(json.dumps({'code': code, 'out': json.loads(buf.getvalue()),"
        " 'heavy': sorted(m for m in ('torch', 'textual', 'pyarrow', 'safetensors') if m in sys.modules)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and len(result["out"]["entries"]) == 6
    assert result["heavy"] == []


def test_evict_yes_human_output(cache, capsys):
    root, keys = cache
    code, out, _ = _run(capsys, "cache", "evict", str(root), "--key", keys["complete0"], "--yes")
    assert code == 0 and not (root / keys["complete0"]).exists()
    assert "evicted 2 entries" in out and keys["complete0"] in out  # the entry and the leftover
    assert "freed" in out and "(measured)" in out and "filesystem free" in out


def test_cache_without_action_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["cache"])
    assert exc.value.code == 2


def test_human_summaries_count_one_entry_in_the_singular(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB", raising=False)
    root = tmp_path / "wcache"
    key = os.path.basename(write_cache_entry(root, last_used=time.time() - 3 * DAY))
    code, out, _ = _run(capsys, "cache", "ls", str(root))
    assert code == 0 and " in 1 entry; " in out
    code, out, _ = _run(capsys, "cache", "evict", str(root), "--key", key)
    assert code == 0 and "(1 entry); re-run with --yes" in out
    code, out, _ = _run(capsys, "cache", "evict", str(root), "--key", key, "--yes")
    assert code == 0 and out.startswith("evicted 1 entry from ")


def test_ls_json_streamed_is_byte_for_byte_one_json_dumps(cache, capsys, monkeypatch):
    """`cache ls --json` writes its entries as they come; consumers get exactly json.dumps's bytes."""
    from fvconsole.cli import cache as cache_cli
    from fvconsole.cli.common import json_chunks
    from fvconsole.core.cache import listing_order, scan_cache

    root, _ = cache
    scan = scan_cache(root)
    entries = listing_order(scan.entries, "lru")
    whole = json.dumps(cache_cli.ls_payload(scan, entries), sort_keys=True, default=str) + "\n"
    head = cache_cli.ls_payload(scan, entries, with_entries=False)
    for batch in (1, 2, 512):
        assert "".join(json_chunks(head, "entries", (e.to_json() for e in entries), batch=batch)) == whole
    assert "".join(json_chunks({"a": 1, "z": [2]}, "m", iter(()))) == json.dumps({"a": 1, "m": [], "z": [2]}) + "\n"
    monkeypatch.setattr(cache_cli, "scan_cache", lambda *a, **k: scan)
    code, out, _ = _run(capsys, "cache", "ls", str(root), "--json")
    assert code == 0 and out == whole
    out_file = root.parent / "ls.json"
    code, _, _ = _run(capsys, "cache", "ls", str(root), "--json", "--output", str(out_file))
    assert code == 0 and out_file.read_text() == whole


def test_ls_notes_are_whole_when_piped_and_with_wide(cache, capsys, monkeypatch):
    # Piped (the in-process run's stdout is no terminal): each note whole, on its entry's one line.
    root, keys = cache
    code, payload, _ = _json(capsys, "cache", "ls", str(root), "--json")
    notes = {e["key"]: e["explanation"] for e in payload["entries"]}
    long_notes = {k: n for k, n in notes.items() if len(n) > 72}
    assert long_notes, notes  # the fixture has notes longer than a clipped column
    for argv in (("cache", "ls", str(root)), ("cache", "ls", str(root), "--wide")):
        code, out, _ = _run(capsys, *argv)
        assert code == 0 and "…" not in out
        rows = {line.split()[0]: line for line in out.splitlines() if line[:16] in notes}
        for key, note in long_notes.items():  # a note's age may tick between the two listings
            assert _ages(rows[key]).endswith(_ages(note)), (rows[key], note)


def _ages(text: str) -> str:
    """``text`` with every relative age ("3s ago", "1m 2s ago") as one placeholder."""
    return re.sub(r"\d+[smhd]( \d+[smhd])* ago", "N ago", text)


def test_evict_key_that_is_no_entry_refuses_as_verify_does(cache, capsys):
    root, keys = cache
    absent = make_key("absent")
    before = sorted(os.listdir(root))
    code, _, err = _run(capsys, "cache", "verify", str(root), "--key", absent)
    assert code == 1 and absent in err
    for extra in ((), ("--yes",), ("--invalid", "--yes")):
        code, out, err = _run(capsys, "cache", "evict", str(root), "--key", absent, *extra)
        assert code == 1, (extra, out, err)
        assert err.splitlines() == [f"error: {absent}: not an entry of {root} (--key); nothing evicted"]
        assert sorted(os.listdir(root)) == before  # the invalid entry and the leftover too
    code, payload, err = _json(capsys, "cache", "evict", str(root), "--key", absent, "--key", keys["complete0"],
                               "--json")
    assert code == 1 and payload["missing"] == [absent] and payload["error"] in err


def test_warnings_go_to_stderr_for_every_listing(cache, capsys, monkeypatch):
    # A scan that could not see every process warns: on stderr, never among the listing's lines
    # (this machine's /proc may be whole, so the pass over it is replaced by a partial one).
    root, _ = cache
    from fvconsole.core.cache import scan
    from fvconsole.core.shared.process_use import ProcessUse

    monkeypatch.setattr(scan, "scan_processes", lambda: ProcessUse(partial="process check partial: test"))
    for argv in (("cache", "ls", str(root)), ("cache", "ls", str(root), "--wide")):
        code, out, err = _run(capsys, *argv)
        assert code == 0 and out.strip() and "warning:" not in out, argv
        assert err.splitlines() == ["warning: process check partial: test"], argv
