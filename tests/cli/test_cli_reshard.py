"""`migrate --reshard`: the command line's modes are the core's, and a bad mode is a usage error."""

from __future__ import annotations

import pytest

from fvconsole.cli import main
from fvconsole.cli.migrate import RESHARD_MODES
from fvconsole.core.migration import RESHARD_MODES as CORE_MODES


def test_the_option_offers_the_cores_modes_in_its_order() -> None:
    assert RESHARD_MODES == CORE_MODES == ("next-epoch", "epoch-start", "nearest")


def test_an_unknown_mode_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["migrate", "--config", "c.yaml", "--checkpoint", "x", "--output-dir", "o", "--expected-step", "1",
              "--expected-world-size", "1", "--consumed-batches-per-rank", "1", "--reshard", "sideways"])
    assert stop.value.code == 2
    assert "--reshard" in capsys.readouterr().err
