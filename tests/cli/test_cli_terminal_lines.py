"""On a terminal, a progress line left open never glues to the next stdout or ``error:`` line.

Why: the progress line is rewritten in place on stderr without a newline; a command that
stops before its last step (``cache verify --deep`` counts the shard bytes of entries it then
cannot read; an error part-way) printed its next line right after it. These run the real CLI
on a real pseudo-terminal (stdout and stderr both on it, as an operator's shell has them) and
read what the terminal received.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from terminals import read_until_closed

from fvconsole.demo.cache_builders import write_cache_entry

pytest.importorskip("safetensors")

SIZE = r"\d+(?:\.\d)? (?:B|KiB|MiB)"
PROGRESS = re.compile(rf"verify {SIZE}/{SIZE}")


def _terminal_output(command: list[str]) -> tuple[int, str]:
    """Run ``command`` with stdin, stdout and stderr on one pty; (exit code, what the terminal received)."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "LINES": "50"}
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    received = read_until_closed(master)
    return proc.wait(timeout=60), received.decode("utf-8", "replace")


def _lines_seen(received: str) -> list[str]:
    """What stays on each terminal line: the text after the last carriage-return-and-erase."""
    return [line.split("\r\x1b[K")[-1] for line in received.replace("\r\n", "\n").split("\n")]


def test_verify_deep_results_start_on_their_own_line(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    good = write_cache_entry(root, num_shards=2, seed=1)
    stalled = write_cache_entry(root, num_shards=2, status="incomplete", seed=2)  # shards, no manifest: not read
    code, received = _terminal_output([sys.executable, "-m", "fvconsole", "cache", "verify", str(root), "--deep"])
    assert code == 0, received  # the stalled entry is not verifiable, not a failure (issue 29 item 1)
    lines = _lines_seen(received)
    for line in lines:  # a progress line holds the progress alone
        if PROGRESS.search(line):
            assert re.fullmatch(rf"verify {SIZE}/{SIZE}  [0-9a-f]{{16}}", line), repr(line)
    keys = {os.path.basename(good), os.path.basename(stalled)}
    assert {line.split()[0] for line in lines if line[:16] in keys} == keys, lines


def test_an_error_after_an_open_progress_line_starts_its_own_line(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from fvconsole.cli.common import progress_printer\n"
        "from fvconsole.cli.streams import guarded_streams, write_err, write_out\n"
        "with guarded_streams():\n"
        "    show = progress_printer('writing sidecars')\n"
        "    show(3, 8, 'rank 3')\n"
        "    write_err('error: disk full\\n')\n"
        "    show(4, 8, 'rank 4')\n"
        "    write_out('last result line\\n')\n"
        "    show(5, 8, 'rank 5')\n"
    )
    code, received = _terminal_output([sys.executable, "-c", script])
    assert code == 0, received
    lines = _lines_seen(received)
    assert lines == ["writing sidecars 3/8  rank 3", "error: disk full", "writing sidecars 4/8  rank 4",
                     "last result line", "writing sidecars 5/8  rank 5", ""]
