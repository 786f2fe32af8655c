"""`migrate --reshard`: the command line's modes are the core's, and a bad mode is a usage error."""

from __future__ import annotations

import pytest

from fvconsole.cli import main

# The option offers the core's modes (no copy in the CLI): tests/cli/test_cli_flags.py.


def test_an_unknown_mode_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["migrate", "--config", "c.yaml", "--checkpoint", "x", "--output-dir", "o", "--expected-step", "1",
              "--expected-world-size", "1", "--consumed-batches-per-rank", "1", "--reshard", "sideways"])
    assert stop.value.code == 2
    assert "--reshard" in capsys.readouterr().err
