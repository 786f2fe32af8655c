"""Driving the console headlessly (``App.run_test``): shared by the tests, the screenshot
script and the TUI benchmarks."""

from __future__ import annotations

from typing import Any


async def settle(app: Any, pilot: Any, rounds: int = 200) -> None:
    """Wait until no worker runs and the screen has processed what the workers posted.

    Workers only post messages back, so one idle check is not enough: a message handled after
    the check may start another worker. Two consecutive idle checks are.
    """
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            await pilot.pause()
            if not any(w.is_running for w in app.workers):
                return
    raise RuntimeError("workers never settled")
