"""What the headless commands say: ages in two units, tables that fit the terminal, no call to
run --yes when it would do nothing, one clear word on a broken metadata.json, --since's forms."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from terminals import read_until_closed

from fvconsole.cli import main
from fvconsole.demo.builders import build_run
from fvconsole.demo.cache_builders import build_demo_cache, make_key, write_cache_entry

DAY = 86400


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _on_a_terminal(argv: list[str], columns: int) -> str:
    """``python -m fvconsole ARGV`` with stdout on a real pseudo-terminal ``columns`` wide."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns)}
    proc = subprocess.Popen([sys.executable, "-m", "fvconsole", *argv], stdin=follower, stdout=follower,
                            stderr=subprocess.PIPE, env=env)
    os.close(follower)
    out = read_until_closed(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    return out.decode().replace("\r\n", "\n")


def _piped(argv: list[str], columns: int = 80) -> str:
    proc = subprocess.run([sys.executable, "-m", "fvconsole", *argv], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("x") / "projects" / "video-generation" / "wan2.1-t2v" / "shard-cache"
    build_demo_cache(str(root))
    return str(root)


def _seconds_ago(text: str) -> str:
    """What two runs a moment apart share: ages and the filesystem's free space move on."""
    text = re.sub(r"\b\d+s ago\b", "Ns ago", text)
    return re.sub(r"\bfree \d+(\.\d+)? [KMGTP]?i?B\b", "free N", text)


def _table_lines(text: str) -> list[str]:
    """The lines of the tables (between a KEY header and the line after the last row)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("KEY "))
    return [line for line in lines[start:]
            if not line.startswith(("total ", "would free", "foreign", "  ", "cache ", "warning: "))]


@pytest.mark.parametrize("command", [["cache", "ls"], ["cache", "evict", "--invalid", "--max-gb", "0.00001"]],
                         ids=["ls", "evict"])
def test_tables_fit_an_80_column_terminal_and_wide_shows_all(demo_cache, command) -> None:
    argv = [*command[:2], demo_cache, *command[2:]]
    narrow = _on_a_terminal(argv, 80)
    rows = _table_lines(narrow)
    assert rows and max(len(line) for line in rows) <= 80, "\n".join(line for line in rows if len(line) > 80)
    wide = _on_a_terminal([*argv, "--wide"], 80)
    assert max(len(line) for line in _table_lines(wide)) > 80  # the demo's notes do not fit 80 columns
    # piped: one row per line at full width, whatever $COLUMNS says, exactly as --wide on a terminal
    # (but for the age of the demo's entry being written, which ticks between the two runs)
    assert _seconds_ago(_piped(argv)) == _seconds_ago(wide)
    # every key is still there, and the note column was wrapped, not cut
    for key in (line.split()[0] for line in _table_lines(wide)[2:] if line[:1].isalnum()):
        assert key in narrow


def test_a_narrow_ls_names_the_columns_it_left_out(demo_cache) -> None:
    narrow = _on_a_terminal(["cache", "ls", demo_cache], 80)
    assert "(not shown at this width: WRITING, SHARDS; --wide shows every column)" in narrow
    assert "SHARDS" in _on_a_terminal(["cache", "ls", demo_cache], 200).splitlines()[1]


def test_ages_have_two_units_in_tables_and_reasons(tmp_path, capsys) -> None:
    now = time.time()
    key = make_key("old")
    write_cache_entry(tmp_path, key, num_shards=1, tensor_bytes=64, last_used=now - 9 * DAY - 26)
    code, out, _ = _run(["cache", "ls", str(tmp_path)], capsys)
    assert code == 0 and " 9d 0h " in out
    code, out, _ = _run(["cache", "evict", str(tmp_path), "--older-than", "7d", "--json"], capsys)
    assert json.loads(out)["evict"][0]["reason"] == "last used 9d 0h ago (older than 7d)"  # was "9d26s"


def test_a_dry_run_with_nothing_to_evict_does_not_ask_for_yes(tmp_path, capsys) -> None:
    write_cache_entry(tmp_path, make_key("fresh"), num_shards=1, tensor_bytes=64, last_used=time.time() - 3600)
    code, out, _ = _run(["cache", "evict", str(tmp_path), "--older-than", "7d"], capsys)
    assert code == 0 and "nothing to evict" in out and "--yes" not in out
    code, out, _ = _run(["cache", "evict", str(tmp_path), "--older-than", "1m"], capsys)
    assert code == 0 and "(1 entry); re-run with --yes" in out


def test_a_fleet_dry_run_with_nothing_to_evict_does_not_ask_for_yes(tmp_path, srun_on_path, capsys) -> None:
    for node in ("a1", "a2"):
        write_cache_entry(tmp_path / node / "c", make_key("kept"), num_shards=1, tensor_bytes=64)
    code, out, _ = _run(["fleet", "cache", "evict", "--nodes", "a[1-2]", "--cache-root",
                         str(tmp_path / "{node}" / "c"), "--invalid"], capsys)
    assert code == 0 and "--yes" not in out and "nothing to evict on any node" in out


@pytest.mark.parametrize("value", ["yesterday", "2025-13-01", "7"])
def test_the_since_error_names_both_forms(value, tmp_path, capsys) -> None:
    code, out, err = _run(["history", "--journal", str(tmp_path / "j.jsonl"), "--since", value], capsys)
    first = err.splitlines()[0]
    assert code == 2 and first.startswith(f"error: --since: {value!r} ")
    assert "7d" in first and "2025-06-01" in first  # a duration ago, or a date


def test_broken_metadata_is_said_once_and_the_step_line_is_clear(tmp_path, capsys) -> None:
    run = build_run(str(tmp_path / "run"), steps=(100,), kind="legacy", num_gpus=2, sp_size=1)
    ckpt = Path(run.checkpoint(100))
    (ckpt / "metadata.json").write_text("{not json")
    code, out, err = _run(["checkpoints", "show", str(ckpt)], capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[1] == "step: 100 (from the directory name; metadata.json is unreadable: see the error below)"
    assert "None" not in out
    meta = str(ckpt / "metadata.json")
    assert (out + err).count(meta) == 1, out + err  # said once, on the error line
    assert err.splitlines() == [f"error: {meta}: metadata.json is not valid JSON "
                                "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"]


def test_a_good_checkpoint_says_just_its_step(tmp_path, capsys) -> None:
    run = build_run(str(tmp_path / "run"), steps=(100,), kind="legacy", num_gpus=2, sp_size=1)
    code, out, _ = _run(["checkpoints", "show", str(run.checkpoint(100))], capsys)
    assert code == 0 and out.splitlines()[1] == "step: 100"



@pytest.mark.parametrize(
    ("how", "source"),
    [("option", "from --journal"), ("env", "from $FVCONSOLE_JOURNAL"),
     ("default", "the default: one per user, shared by all of their runs")],
)
def test_history_says_which_journal_and_how_to_choose_another(how, source, tmp_path, monkeypatch, capsys) -> None:
    journal = tmp_path / "state" / "fvconsole" / "journal.jsonl"
    argv = ["history"]
    monkeypatch.delenv("FVCONSOLE_JOURNAL", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    if how == "option":
        journal = tmp_path / "mine.jsonl"
        argv += ["--journal", str(journal)]
    elif how == "env":
        journal = tmp_path / "team.jsonl"
        monkeypatch.setenv("FVCONSOLE_JOURNAL", str(journal))
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert out.splitlines()[:2] == [
        f"journal {journal} ({source})",
        "another journal: --journal PATH or $FVCONSOLE_JOURNAL (e.g. a team's shared one)",
    ]


# ---------------------------------------------------------------- counts: one and many (issue 28 item 3)
# A count is said with its noun through humanize.plural: "1 shard", "2 shards", never "1 shard(s)".

def test_cache_ls_says_one_shard_and_two_shards(tmp_path, capsys) -> None:
    keys = {name: make_key(name) for name in ("one", "two", "one-written", "three-written")}
    write_cache_entry(tmp_path, keys["one"], num_shards=1, tensor_bytes=64)
    write_cache_entry(tmp_path, keys["two"], num_shards=2, tensor_bytes=64)
    write_cache_entry(tmp_path, keys["one-written"], num_shards=1, tensor_bytes=64, status="incomplete")
    write_cache_entry(tmp_path, keys["three-written"], num_shards=3, tensor_bytes=64, status="incomplete")
    code, out, _ = _run(["cache", "ls", str(tmp_path), "--json"], capsys)
    assert code == 0
    said = {e["key"]: e["explanation"] for e in json.loads(out)["entries"]}
    assert said[keys["one"]] == "all 1 shard present"
    assert said[keys["two"]] == "all 2 shards present"
    assert said[keys["one-written"]].startswith("1 shard file but no manifest.json: a write in progress")
    assert said[keys["three-written"]].startswith("3 shard files but no manifest.json: a write in progress")


def test_history_says_one_malformed_line_and_two_and_one_error_and_two(tmp_path, capsys) -> None:
    from fvconsole.core.journal.log import JournalRecord, append_record

    journal = tmp_path / "journal.jsonl"
    for errors in (("a: gone",), ("b: gone", "c: gone")):
        append_record(JournalRecord.now(action="cache evict", target=str(tmp_path), result="partial", exit_code=3,
                                        bytes=1, items=("k1", "k2", "k3"), errors=errors), str(journal))
    with open(journal, "a", encoding="utf-8") as fh:
        fh.write("not a journal line\n")
    code, out, err = _run(["history", "--journal", str(journal)], capsys)
    assert code == 0 and err == "warning: 1 malformed line skipped\n"
    assert "3 (1 error)" in out and "3 (2 errors)" in out
    with open(journal, "a", encoding="utf-8") as fh:
        fh.write("{}\n")
    code, out, err = _run(["history", "--journal", str(journal)], capsys)
    assert code == 0 and err == "warning: 2 malformed lines skipped\n"


def test_fleet_cache_ls_says_one_node_and_two_nodes(tmp_path, srun_on_path, capsys) -> None:
    for node in ("a1", "a2"):
        write_cache_entry(tmp_path / node / "c", make_key("kept"), num_shards=1, tensor_bytes=64)
    root = str(tmp_path / "{node}" / "c")
    code, out, _ = _run(["fleet", "cache", "ls", "--nodes", "a1", "--cache-root", root], capsys)
    assert code == 0 and "on a1 (1 node" in out and "across 1 node, 1 key; " in out
    code, out, _ = _run(["fleet", "cache", "ls", "--nodes", "a[1-2]", "--cache-root", root], capsys)
    assert code == 0 and "on a[1-2] (2 nodes" in out and "across 2 nodes, 1 key; " in out
    write_cache_entry(tmp_path / "a2" / "c", make_key("other"), num_shards=1, tensor_bytes=64)
    code, out, _ = _run(["fleet", "cache", "ls", "--nodes", "a[1-2]", "--cache-root", root], capsys)
    assert code == 0 and "across 2 nodes, 2 keys; " in out
    code, out, _ = _run(["fleet", "cache", "evict", "--nodes", "a1", "--cache-root", root, "--older-than", "1m"],
                        capsys)
    assert code == 0 and _freed_line(out).endswith(" across 1 node")
    code, out, _ = _run(["fleet", "cache", "evict", "--nodes", "a[1-2]", "--cache-root", root, "--older-than", "1m"],
                        capsys)
    assert code == 0 and _freed_line(out).endswith(" across 2 nodes")


def _freed_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("would free ")]
    return line
