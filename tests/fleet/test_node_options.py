"""The node runner's own options are checked like the CLI's: one ``error:`` line, exit 2, no traceback.

Only a person typing ``python -m fvconsole.cli.node ...`` can get them wrong (the dispatcher writes
them), so a bad one is a usage error before any frame, fork or command.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fvconsole.cli.node import main

BAD = [
    (["--time-limit", "abc", "cache", "ls"], "--time-limit must be a positive number of seconds up to 86400"),
    (["--time-limit", "nan", "cache", "ls"], "--time-limit must be"),
    (["--time-limit", "-1", "cache", "ls"], "--time-limit must be"),
    (["--time-limit", "0", "cache", "ls"], "--time-limit must be"),
    (["--time-limit", "1e9", "cache", "ls"], "--time-limit must be"),
    (["--time-limit"], "--time-limit needs a value"),
    (["--time-limit", "5", "--time-limit", "6", "cache", "ls"], "--time-limit given twice"),
    (["--per-node"], "--per-node needs a value"),
    (["--per-node", "{not json"], "--per-node: unreadable table"),
    (["--per-node", "[1, 2]"], "--per-node: unreadable table"),
    (["--per-node", '{"n[1-": ["cache", "ls"]}'], "--per-node: unreadable table"),
    (["--per-node", '{"n1": "cache ls"}'], "--per-node: unreadable table"),
    (["--per-node", '{"n1": ["cache", 1]}'], "--per-node: unreadable table"),
    (["--per-node", '{"n1": ["cache", "ls"]}', "cache", "ls"], "--per-node takes the place of the command's arguments"),
    ([], "no command given"),
    (["--time-limit", "5"], "no command given"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(a) or "nothing" for a, _ in BAD])
def test_a_bad_option_is_one_line_and_exit_2(argv: list[str], message: str, capsys,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMD_NODENAME", "n1")
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "", "a usage error printed frames"
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert "usage: python -m fvconsole.cli.node" in err


def test_the_reported_case_has_no_traceback() -> None:
    env = {**os.environ, "SLURMD_NODENAME": "n1"}
    run = subprocess.run([sys.executable, "-m", "fvconsole.cli.node", "--time-limit", "abc", "cache", "ls"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("error: --time-limit must be") and run.stderr.count("\n") == 1, run.stderr
