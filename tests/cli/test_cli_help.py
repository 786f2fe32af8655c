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


def test_prune_help_names_every_gap_incomplete_selects(capsys) -> None:
    """It said "(no dcp/.metadata, or an rng_state_rank<r>.pt missing)": a FIFO or a directory there, or
    no dcp/ at all, was pruned by --incomplete unnamed. Now the gaps in the words `checkpoints show` uses."""
    from fvconsole.core.checkpoints.gaps import WORDS, GapKind

    with pytest.raises(SystemExit) as stop:
        main(["checkpoints", "prune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert stop.value.code == 0
    assert ("Incomplete checkpoints (no dcp/ directory, dcp/.metadata missing or not a readable regular file, "
            "or an rng_state_rank<r>.pt missing; `checkpoints show` says which) are selected by --incomplete") in text
    # one vocabulary: every kind a prune selects (an unreadable checkpoint is kept, never selected) in its
    # words; the two of dcp/.metadata share its name ("dcp/.metadata missing or not a readable regular file")
    named = text.replace("dcp/.metadata missing or not", "dcp/.metadata missing, dcp/.metadata not")
    assert all(WORDS[kind] in named for kind in GapKind if kind is not GapKind.UNREADABLE)
