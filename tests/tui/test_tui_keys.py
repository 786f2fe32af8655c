"""Keys at any speed: bursts of keys with no pause between them (as a terminal delivers a
paste or a fast typist), quit in the middle included, never produce a traceback.

Keys are queued on the app (``app.post_message``, where its terminal driver hands them) as
``Pilot.press`` builds them, but without waiting for the app to process each one, so screens are pushed while the app is
still handling the previous key, or already shutting down. ``run_test`` re-raises whatever
the app raised, so a test that returns saw no traceback.
"""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest
from console_apps import make_app, running, work_copy
from textual_test_private import key_event
from tour import settle, started

from fvconsole.core.shared.errors import FvError
from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.fleet.view import FleetView

pytestmark = pytest.mark.tui

#: Every key the console binds, plus typing and navigation keys.
ALPHABET = (
    "1", "2", "3", "4", "5", "f", "q", "question_mark", "o", "r", "slash", "escape", "enter", "tab", "shift+tab",
    "space", "up", "down", "left", "right", "home", "end", "pageup", "pagedown", "j", "k", "g", "G", "m",
    "e", "c", "i", "a", "A", "asterisk", "U", "y", "s", "n", "less_than_sign", "greater_than_sign",
    "ctrl+r", "ctrl+e", "ctrl+y", "ctrl+p", "x", "0", "7", "backspace", "delete",
)


def send_burst(app: FvConsoleApp, keys: list[str]) -> None:
    """Queue every key at once: none waits for the app to handle the one before."""
    for key in keys:
        event = key_event(key)
        event.set_sender(app)
        app.post_message(event)


class NoSlurm:
    """The fleet view's dispatcher in these tests: a scan fails like a machine without Slurm."""

    def select(self, nodes, job):  # noqa: ANN001, ANN201 - SrunDispatcher.select's shape
        raise FvError("srun: not available in this test")


def app_on_copy(demo_ws: DemoWorkspace, tmp_path) -> FvConsoleApp:
    """The console on copies of the demo's output dir and cache (keys may migrate and evict)."""
    return make_app(**work_copy(demo_ws, tmp_path, cache_name="cache"))


async def drain(app: FvConsoleApp, pilot, seconds: float = 120.0) -> None:
    """Wait until the app handled every queued key and its workers finished, or it exited. A
    deadline, not a number of pauses: on a loaded machine the keys take longer, and a test that
    went on before they were handled would check a half-handled burst."""
    deadline = time.monotonic() + seconds
    while app.return_code is None:
        if app.message_queue_size == 0 and not any(w.is_running for w in app.workers):
            await settle(app, pilot)
            if app.return_code is not None or app.message_queue_size == 0:
                return
        assert time.monotonic() < deadline, f"the app did not handle its keys within {seconds:g}s"
        await pilot.pause(0.02)


@pytest.mark.parametrize("second", ["question_mark", "o", "m", "3", "ctrl+p", "e", "ctrl+e"])
def test_a_key_right_after_quit_is_no_traceback(demo_ws: DemoWorkspace, tmp_path, second: str) -> None:
    """Defect: `q` then `?` (or `o`) within a few ms pushed a screen during shutdown -> NoMatches traceback."""

    async def body() -> None:
        app = app_on_copy(demo_ws, tmp_path)
        async with running(app, (80, 24)) as pilot:
            send_burst(app, ["q", second, second])
            await drain(app, pilot)
        assert app.return_code in (0, None)

    asyncio.run(body())


@pytest.mark.parametrize("keys", [["m", "q"], ["j", "m", "q", "m"], ["2", "q"]])
def test_quit_while_a_form_is_filled_leaves_no_warning_on_the_terminal(demo_ws: DemoWorkspace, tmp_path,
                                                                      keys: list[str]) -> None:
    """Defect: filling the migration form and quitting at once printed "coroutine
    'Suggester._get_suggestion' was never awaited" (a path completion cancelled before it began)."""
    import gc
    import warnings

    async def body() -> None:
        app = app_on_copy(demo_ws, tmp_path)
        async with running(app, (80, 24)) as pilot:
            send_burst(app, keys)
            await drain(app, pilot)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(body())
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_key_bursts_never_raise(demo_ws: DemoWorkspace, tmp_path, monkeypatch, seed: int) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    rng = random.Random(seed)
    bursts = [[rng.choice(ALPHABET) for _ in range(rng.randint(20, 80))] for _ in range(6)]
    size = ((80, 24), (200, 60))[seed % 2]

    async def body() -> None:
        app = app_on_copy(demo_ws, tmp_path)
        async with app.run_test(size=size) as pilot:
            await started(app, pilot)
            app.query_one(FleetView).dispatcher = NoSlurm()
            for burst in bursts:
                send_burst(app, burst)
                await drain(app, pilot)
                if app.return_code is not None:
                    break
                assert app.is_running

    asyncio.run(asyncio.wait_for(body(), 240))
    # Keys never write outside the workspace copies the app was given.
    assert sorted(os.listdir(tmp_path)) == ["cache", "output"]


@pytest.mark.parametrize("view_key", ["1", "3", "5"])
def test_keys_typed_right_after_slash_go_to_the_filter_not_to_actions(demo_ws: DemoWorkspace, tmp_path,
                                                                      view_key: str) -> None:
    """Defect: `/evict` at paste speed reached the view before the filter had focus: `i` opened
    "Evict invalid" and `t` ticked its force box. Every key after `/` belongs to the filter."""

    async def body() -> None:
        app = app_on_copy(demo_ws, tmp_path)
        async with running(app, (100, 30)) as pilot:
            send_burst(app, [view_key])
            await drain(app, pilot)
            main_screen = app.screen
            send_burst(app, ["slash", "e", "v", "i", "c", "t"])
            await drain(app, pilot)
            assert app.screen is main_screen, f"a dialog opened: {type(app.screen).__name__}"
            view = app.current_view()
            assert view is not None and view.filter_input().value == "evict"

    asyncio.run(body())
