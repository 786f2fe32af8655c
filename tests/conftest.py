"""Shared pytest configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_journal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The whole session (module fixtures and the processes tests start included) journals
    into a temp dir, never into ~/.local/state: executed migrations and evictions append there."""
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        patch.setenv("FVCONSOLE_JOURNAL", str(state / "fvconsole" / "journal.jsonl"))
        yield
