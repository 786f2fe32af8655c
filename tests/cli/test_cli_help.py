"""`--help` tells an operator what a command's output holds, not only its flags (issue 22's items)."""

from __future__ import annotations

import pytest

from fvconsole.cli import main


@pytest.mark.parametrize("argv, phrases", [
    (["checkpoints", "ls"], ["streaming: migratable", "map-style", "free space", "saves"]),
    (["cache", "ls"], ["empty", "in use", "FastVideo's own GC counts them"]),
])
def test_help_names_what_the_listing_shows(argv: list[str], phrases: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert stop.value.code == 0
    for phrase in phrases:
        assert phrase in text, phrase
