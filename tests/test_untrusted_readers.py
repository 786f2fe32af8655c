"""Every reader of an untrusted JSON document, fed hostile documents: one bad record is that record's problem.

Journal lines (``history`` text and ``--json``, the History view), lock and evictor holder
records, cache manifests and safetensors headers, fleet frames and the ``reason`` in them.
Each expected value is written out here, never taken from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fvconsole.cli import main
from fvconsole.core.journal import JournalRecord, append_record

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
    assert captured.out.count("warning: 1 malformed line(s) skipped") == 1 and not captured.err
    assert main(["history", "--journal", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == 2 and doc["malformed_lines"] == 1 and "error" not in doc


async def test_the_history_view_skips_a_damaged_line(tmp_path: Path) -> None:
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.headless import settle, started
    from fvconsole.tui.state import ConsoleState

    path = _journal(tmp_path, _line("epoch", "1e400"))
    app = FvConsoleApp(ConsoleState(journal_path=str(path)))
    async with app.run_test(size=(100, 30)) as pilot:
        await started(app, pilot)
        await pilot.press("5")
        await settle(app, pilot)
        assert app.query_one("#hist-table").row_count == 2
        banner = str(app.query_one("#hist-banner").render())
        assert "1 malformed line skipped" in banner
