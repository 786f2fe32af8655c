"""The journal (core/journal/log.py) and `fvconsole history`: one line per executed action, bounded reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from migration_runs import WORLD, build_legacy
from sized_cache import sized_entry
from slurm_cluster import write_fake_srun

from fvconsole.cli import main
from fvconsole.core.journal.log import (
    ENV_JOURNAL,
    LINE_MAX,
    JournalRecord,
    append_record,
    default_journal_path,
    encode_line,
    read_journal,
)

DAY = 86400.0


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _record(**over) -> JournalRecord:
    fields = {"action": "cache evict", "target": "/dev/shm/wc", "result": "ok", "exit_code": 0, "bytes": 10,
              "items": ("0123456789abcdef",), "command": "fvconsole cache evict --yes"}
    fields.update(over)
    return JournalRecord.now(**fields)


# --------------------------------------------------------------------------- where

def test_journal_location_follows_flag_env_and_xdg(tmp_path: Path) -> None:
    home = os.path.expanduser("~")
    assert default_journal_path({}) == f"{home}/.local/state/fvconsole/journal.jsonl"
    assert default_journal_path({"XDG_STATE_HOME": "/x/state"}) == "/x/state/fvconsole/journal.jsonl"
    assert default_journal_path({"XDG_STATE_HOME": "relative"}) == f"{home}/.local/state/fvconsole/journal.jsonl"
    assert default_journal_path({"XDG_STATE_HOME": "/x", ENV_JOURNAL: "/team/j.jsonl"}) == "/team/j.jsonl"


# --------------------------------------------------------------------------- one line, always

def test_every_record_is_one_line_under_pipe_buf_with_counts_kept() -> None:
    keys = tuple(f"{i:016x}" for i in range(5000))
    huge = _record(items=keys, errors=tuple("e" * 300 for _ in range(50)), command="fvconsole " + "x" * 900,
                   target="/" + "d" * 4000, details={"nodes": [{"node": f"n{i}"} for i in range(3000)]},
                   items_total=5000, errors_total=50)
    line = encode_line(huge)
    assert len(line) <= LINE_MAX == 4096 and line.endswith(b"\n") and line.count(b"\n") == 1
    doc = json.loads(line)
    assert doc["items_total"] == 5000 and doc["errors_total"] == 50 and doc["shortened"] is True
    assert set(doc["items"]) <= set(keys) and doc["items"] == list(keys[: len(doc["items"])])
    small = encode_line(_record())
    assert b"shortened" not in small and json.loads(small)["items"] == ["0123456789abcdef"]


def test_append_creates_the_private_directory_and_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "fvconsole" / "journal.jsonl"
    first = append_record(_record(), str(path))
    second = append_record(_record(bytes=20), str(path))
    assert first.written and second.written and first.error is None
    assert [r["bytes"] for r in _lines(path)] == [10, 20]
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    record = _lines(path)[0]
    assert record["user"] and record["host"] and record["pid"] == os.getpid() and record["format"].endswith("/v1")


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo", "parent is a file"])
def test_a_journal_that_cannot_be_written_is_reported_not_raised(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "journal.jsonl"
    if kind == "symlink":
        (tmp_path / "elsewhere").write_text("")
        path.symlink_to(tmp_path / "elsewhere")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "journal.jsonl"
    started = time.monotonic()
    result = append_record(_record(), str(path))
    assert not result.written and result.error
    assert time.monotonic() - started < 10  # a FIFO without a reader never blocks the writer
    if kind == "symlink":
        assert (tmp_path / "elsewhere").read_text() == "" and "symlink" in result.error


# --------------------------------------------------------------------------- reading

def test_read_skips_malformed_lines_and_filters(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    append_record(_record(target="/a"), str(path))
    with open(path, "ab") as handle:
        handle.write(b"not json\n\xff\xfe\n[1, 2]\n" + b'{"format": "fvconsole-journal/v1"}\n' + b"x" * 70000 + b"\n")
    append_record(_record(target="/b"), str(path))
    read = read_journal(str(path))
    assert [r.target for r in read.records] == ["/a", "/b"] and read.malformed == 5
    assert [r.target for r in read_journal(str(path), target="/b").records] == ["/b"]
    assert read_journal(str(path), since=time.time() + 60).records == ()
    assert read_journal(str(tmp_path / "missing.jsonl")).exists is False


def test_read_is_bounded_to_the_journals_tail(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    for i in range(200):
        append_record(_record(bytes=i), str(path))
    read = read_journal(str(path), max_bytes=10_000)
    assert 0 < len(read.records) < 200 and read.skipped_bytes > 0
    assert read.records[-1].bytes == 199 and read.malformed == 0  # the cut line is skipped, not "malformed"
    assert [r.bytes for r in read.records] == list(range(200 - len(read.records), 200))


# --------------------------------------------------------------------------- every executed action

def test_cache_evict_journals_executions_only(tmp_path: Path, capsys) -> None:
    root = tmp_path / "wcache"
    keys = [sized_entry(root, name, 1, (3 - i) * DAY) for i, name in enumerate("abc")]
    journal = tmp_path / "team" / "journal.jsonl"
    assert main(["cache", "evict", str(root), "--older-than", "2d", "--journal", str(journal)]) == 0  # dry run
    assert not journal.exists()
    capsys.readouterr()
    assert main(["cache", "evict", str(root), "--older-than", "2d", "--yes", "--json", "--journal", str(journal)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["journal"] == {"path": str(journal), "written": True, "error": None, "shortened": False}
    [line] = _lines(journal)
    assert line["action"] == "cache evict" and line["target"] == str(root) and line["result"] == "ok"
    assert line["exit_code"] == 0 and line["items"] == keys[:2] and line["bytes"] == payload["freed_bytes"]
    assert line["command"] == (f"fvconsole cache evict {root} --older-than 2d --yes --json --journal {journal}")
    assert line["details"]["fs_free_bytes_before"] == payload["fs_free_bytes_before"]
    # Nothing left to remove: an execution that changed nothing writes no line.
    assert main(["cache", "evict", str(root), "--older-than", "2d", "--yes", "--journal", str(journal)]) == 0
    assert len(_lines(journal)) == 1
    assert main(["cache", "evict", str(root), "--key", keys[2], "--yes", "--no-journal", "--journal",
                 str(journal)]) == 0
    assert len(_lines(journal)) == 1


def test_journal_failure_never_undoes_the_eviction(tmp_path: Path, capsys) -> None:
    root = tmp_path / "wcache"
    key = sized_entry(root, "a", 1, DAY)
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "journal.jsonl"
    assert main(["cache", "evict", str(root), "--key", key, "--yes", "--json", "--journal", str(bad)]) == 0
    out, err = capsys.readouterr()
    assert not (root / key).exists()
    assert json.loads(out)["journal"]["written"] is False
    assert err.startswith(f"warning: journal {bad}: ") and "the action itself is done" in err


def test_env_variable_points_every_command_at_a_shared_journal(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    key = sized_entry(root, "a", 1, DAY)
    shared = tmp_path / "shared.jsonl"
    env = {**os.environ, ENV_JOURNAL: str(shared)}
    run = subprocess.run([sys.executable, "-m", "fvconsole", "cache", "evict", str(root), "--key", key, "--yes"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    [line] = _lines(shared)
    assert line["items"] == [key] and line["pid"] not in (0, os.getpid())
    listed = subprocess.run([sys.executable, "-m", "fvconsole", "history", "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert json.loads(listed.stdout)["records"] == [line]


def test_migrate_journals_the_published_set(tmp_path: Path, capsys) -> None:
    legacy = build_legacy(str(tmp_path))
    journal = tmp_path / "journal.jsonl"
    assert main([*legacy.migrate_argv("--yes", "--json"), "--journal", str(journal)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["journal"]["written"] is True
    [line] = _lines(journal)
    names = sorted(os.listdir(legacy.out))
    assert line["action"] == "migrate" and line["target"] == os.path.abspath(legacy.out) and line["result"] == "ok"
    assert sorted(line["items"]) == names and line["items_total"] == WORLD + 1
    assert line["bytes"] == sum(os.path.getsize(os.path.join(legacy.out, n)) for n in names)
    assert line["details"]["step"] == payload["plan"]["step"]
    assert main([*legacy.migrate_argv("--yes"), "--journal", str(journal)]) == 1  # refused: nothing written
    assert len(_lines(journal)) == 1


def test_fleet_eviction_is_one_login_side_line(tmp_path: Path, capsys, monkeypatch) -> None:
    srun = write_fake_srun(tmp_path / "bin")
    monkeypatch.setenv("PATH", os.path.dirname(srun) + os.pathsep + os.environ["PATH"])
    keys = {}
    for node in ("a1", "a2"):
        keys[node] = sized_entry(tmp_path / node / "c", f"old-{node}", 1, 3 * DAY)
        sized_entry(tmp_path / node / "c", f"new-{node}", 1, 60)
    journal = tmp_path / "journal.jsonl"
    monkeypatch.setenv(ENV_JOURNAL, str(journal))  # the nodes inherit it: they must still not write
    argv = ["fleet", "cache", "evict", "--nodes", "a[1-3]", "--cache-root", str(tmp_path / "{node}" / "c"),
            "--older-than", "1d", "--json", "--fanout", "per-node"]
    assert main(argv) == 3 and not journal.exists()  # a3 has no root; a dry run journals nothing
    capsys.readouterr()
    assert main([*argv, "--yes", "--wait", "5"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["journal"]["written"] is True
    [line] = _lines(journal)  # one line for the fleet, none from the nodes
    assert line["action"] == "fleet cache evict" and line["result"] == "partial" and line["exit_code"] == 3
    assert sorted(line["items"]) == sorted(f"{n}:{k}" for n, k in keys.items())
    assert line["details"]["outcomes"] == {"failed": {"count": 1, "nodes": "a3"}, "ok": {"count": 2, "nodes": "a[1-2]"}}
    assert line["errors"][0].startswith("a3: ") and line["bytes"] == doc["freed_bytes"] > 0
    assert {n["node"]: n["evicted"] for n in line["details"]["nodes"]} == {"a1": 1, "a2": 1, "a3": 0}


# --------------------------------------------------------------------------- fvconsole history

def test_history_text_json_and_filters(tmp_path: Path, capsys) -> None:
    path = tmp_path / "journal.jsonl"
    append_record(_record(target="/dev/shm/wc", bytes=3 << 30), str(path))
    append_record(replace(_record(target="/other\x1b]0;pwned\x07"), user="mal\x1b[2Jlory"), str(path))
    assert main(["history", "--journal", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b" in out and "3.0 GiB" in out and "cache evict" in out
    assert main(["history", "--journal", str(path), "--json", "--root", "/dev/shm/wc"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["target"] for r in doc["records"]] == ["/dev/shm/wc"] and doc["count"] == 1
    assert main(["history", "--journal", str(path), "--json", "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["records"][0]["user"] == "mal\x1b[2Jlory"  # JSON stays exact
    assert main(["history", "--journal", str(path), "--since", "2099-01-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 0
    assert main(["history", "--journal", str(path), "--since", "1h", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 2
    assert main(["history", "--journal", str(tmp_path / "none.jsonl")]) == 0
    assert "no journal yet" in capsys.readouterr().out
    assert main(["history", "--journal", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path}: cannot read the journal") and len(err.splitlines()) == 1
    assert main(["history", "--journal", str(path), "--since", "yesterday"]) == 2


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (``from x import y`` counts x and x.y)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_journal_imports_nothing_of_the_domains() -> None:
    """core/journal/log.py is the generic journal: each action's record is built next to its domain."""
    journal = Path(__file__).resolve().parents[2] / "fvconsole" / "core" / "journal" / "log.py"
    domains = ("fvconsole.core.migration", "fvconsole.core.cache", "fvconsole.core.fleet")
    leaks = sorted(m for m in _imported_modules(journal) if m.startswith(domains))
    assert leaks == [], f"core/journal/log.py imports {leaks}"
