"""D31: terminal text. Invisible characters are escaped by the one door (`core/shared/terminal_text.py`)
on every path to a human (CLI tables, the console's text, inputs), and printing never fails
on a stdout whose encoding cannot show a character (backslash replacement instead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.text import Text
from sized_cache import sized_entry

from fvconsole.tui.plain import ControlPictures, PlainText, table_cell

DAY = 86400.0
#: A foreign directory name that reads like a cache key: 16 hex digits with a zero-width space.
LOOKALIKE = "0123456789abcdef\u200b"


def _run(argv: list[str], encoding: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.getcwd(), "PYTHONIOENCODING": encoding, **env},
                          text=True, encoding="utf-8", errors="strict")


#: What `cache ls` says after each foreign directory since issue 22 item 5 (docs/cli.md).
GC_NOTE = "  (FastVideo's GC counts this and may delete it)"


def _foreign_names(lines: list) -> list:
    """The listing's lines with the GC note after a foreign directory's name taken off."""
    note = GC_NOTE if isinstance(lines[0], str) else GC_NOTE.encode()
    return [line[: -len(note)] if line.endswith(note) else line for line in lines]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    (root / "caf\u00e9\u2026").mkdir()  # visible, but not ASCII
    (root / LOOKALIKE).mkdir()
    return root


def only_warnings(stderr: str) -> bool:
    """No error and no traceback: at most ``warning:`` lines (this machine's /proc may be partial)."""
    return all(line.startswith("warning: ") for line in stderr.splitlines())


def test_ascii_stdout_gets_backslash_escapes_not_an_internal_error(root: Path) -> None:
    run = _run(["-m", "fvconsole", "cache", "ls", str(root)], "ascii")
    assert run.returncode == 0 and only_warnings(run.stderr)
    lines = _foreign_names(run.stdout.splitlines())
    assert "  caf\\xe9\\u2026" in lines  # what ascii cannot show, backslash-escaped by the stream
    assert "  0123456789abcdef\\u200b" in lines  # the zero-width space escaped by printable
    run.stdout.encode("ascii")


def test_latin1_stdout_shows_what_it_can(root: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "fvconsole", "cache", "ls", str(root)], capture_output=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd(), "PYTHONIOENCODING": "latin-1"})
    assert run.returncode == 0 and only_warnings(run.stderr.decode("latin-1"))
    assert "  caf\u00e9\\u2026".encode("latin-1") in _foreign_names(run.stdout.splitlines())


def test_ascii_error_line_names_the_path_escaped(tmp_path: Path) -> None:
    missing = tmp_path / "caf\u00e9"
    run = _run(["-m", "fvconsole", "cache", "ls", str(missing)], "ascii")
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == f"error: {tmp_path}/caf\\xe9: cache root does not exist\n"


def test_the_node_runner_prints_on_an_ascii_stdout(root: Path) -> None:
    run = _run(["-m", "fvconsole.cli.node", "cache", "ls", str(root)], "ascii", SLURMD_NODENAME="n1")
    assert run.returncode == 0 and only_warnings(run.stderr)
    start, result = run.stdout.splitlines()
    assert start == "FVNODE n1 start" and result.startswith("FVNODE n1 0/1 ")
    assert json.loads(result.split(" ", 3)[3])["exit"] == 0
    missing = root / "caf\u00e9"
    run = _run(["-m", "fvconsole.cli.node", "cache", "ls", str(missing)], "ascii", SLURMD_NODENAME="n1")
    assert run.returncode == 0 and run.stderr == f"error: {root}/caf\\xe9: cache root does not exist\n"
    assert json.loads(run.stdout.splitlines()[1].split(" ", 3)[3])["exit"] == 1


def test_the_console_shows_invisible_characters_escaped() -> None:
    assert PlainText(f"key {LOOKALIKE}\n").plain == "key 0123456789abcdef\\u200b\n"
    cell = table_cell(LOOKALIKE)
    assert isinstance(cell, Text) and cell.plain == "0123456789abcdef\\u200b"
    assert table_cell("\ufeffcafe\u2028").plain == "\\ufeffcafe\\u2028"


def test_an_input_shows_invisible_characters_one_for_one() -> None:
    text = Text("ab\u200bc\u2066\x1bd\U000e0041")
    ControlPictures().highlight(text)
    assert text.plain == "ab\ufffdc\ufffd\u241bd\ufffd"  # same length: the cursor stays where it was
