"""Everything the console draws fits at 80×24 (issue 21, items 1 and 2).

Every dialog opened on the demo's real contents under a long path keeps its buttons on
screen, reachable with Tab and drawn on top; every visible table cell is its value, or its
value ellipsised (``…`` at the end, or a path elided in the middle that keeps its end).
The real app on a real demo workspace, driven with ``run_test``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable

import pytest
from textual.widgets import Button, DataTable

from fvconsole.demo.workspace import DemoWorkspace, build_demo_workspace
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.headless import settle, started
from fvconsole.tui.state import ConsoleState

pytestmark = pytest.mark.tui

#: A run directory as deep and as long as real ones (issue 21's reproduction).
LONG = os.path.join("projects", "video-generation", "wan2.1-t2v", "run-2026-11-30-finetune-ablation")


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory: pytest.TempPathFactory) -> DemoWorkspace:
    return build_demo_workspace(str(tmp_path_factory.mktemp("fit") / LONG))


@pytest.fixture
def work(demo_ws: DemoWorkspace, tmp_path) -> dict[str, str]:
    """Copies (mtimes kept) of the demo's output dir and cache under a long path: tests write into them."""
    base = tmp_path / LONG
    paths = {"config": demo_ws.config_path, "output": str(base / "output"), "cache": str(base / "shard-cache")}
    shutil.copytree(demo_ws.output_dir, paths["output"], symlinks=True)
    shutil.copytree(demo_ws.cache_root, paths["cache"], symlinks=True)
    return paths


def run(work: dict[str, str], size: tuple[int, int], body: Callable[[FvConsoleApp, object], Awaitable[None]]) -> None:
    app = FvConsoleApp(ConsoleState(config_path=work["config"], checkpoints_path=work["output"],
                                    cache_root=work["cache"]))

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await started(app, pilot)
            await body(app, pilot)

    asyncio.run(asyncio.wait_for(main(), 300))


def shown(app: FvConsoleApp, widget) -> bool:
    """Whether all of ``widget`` is on the screen and drawn on top (not under another widget)."""
    region = widget.region
    width, height = app.size
    if not (region.width > 0 and region.height > 0 and region.x >= 0 and region.y >= 0
            and region.right <= width and region.bottom <= height):
        return False
    return all(app.screen.get_widget_at(x, region.y)[0] is widget for x in (region.x, region.right - 1))


async def check_buttons(app: FvConsoleApp, pilot, name: str) -> None:
    """Each enabled button of the dialog on top is on screen, and Tab brings focus to it, still on screen."""
    dialog = app.screen
    buttons = [b for b in dialog.query(Button) if not b.disabled]
    assert buttons, name
    for button in buttons:
        assert shown(app, button), (name, button.id, button.region, app.size)
    for button in buttons:
        for _ in range(30):
            if app.focused is button:
                break
            await pilot.press("tab")
            await pilot.pause()
        assert app.focused is button, (name, button.id, "Tab never reaches it")
        assert shown(app, button), (name, button.id, "focused but off screen", button.region)
    assert app.screen is dialog, name


async def open_dialog(app: FvConsoleApp, pilot, *keys: str) -> None:
    await pilot.press(*keys)
    await settle(app, pilot)


def test_every_dialog_keeps_its_buttons_on_screen_at_80x24(work: dict[str, str]) -> None:
    async def body(app: FvConsoleApp, pilot) -> None:
        from fvconsole.tui.evict_dialog import EvictScreen
        from fvconsole.tui.modals import ConfirmScreen, HelpScreen, PathsScreen

        await open_dialog(app, pilot, "3")
        cases = [("evict invalid", ("i",), None), ("evict marked", ("A", "e"), None),
                 ("evict to cap", ("c",), "0.0000001"), ("evict to free space", ("f",), "99")]
        for name, keys, value in cases:
            await open_dialog(app, pilot, *keys)
            assert isinstance(app.screen, EvictScreen), name
            if value is not None:
                field = app.screen.query_one("#evict-cap" if name.endswith("cap") else "#evict-free-pct")
                field.value = value
                await settle(app, pilot)
            await check_buttons(app, pilot, name)
            # Continue… leads to the confirmation, whose buttons must fit too.
            app.screen.query_one("#evict-continue", Button).press()
            await settle(app, pilot)
            assert isinstance(app.screen, ConfirmScreen), name
            await check_buttons(app, pilot, f"{name}: confirm")
            await open_dialog(app, pilot, "escape")
            assert not isinstance(app.screen, (ConfirmScreen, EvictScreen)), name
            await open_dialog(app, pilot, "U")
        # The migration's confirmation.
        await open_dialog(app, pilot, "1")
        table = app.query_one("#ckpt-table", DataTable)
        keys = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]
        table.move_cursor(row=keys.index(os.path.join(work["output"], "checkpoint-300")))
        await open_dialog(app, pilot, "m", "ctrl+r", "ctrl+e")
        assert isinstance(app.screen, ConfirmScreen)
        await check_buttons(app, pilot, "migration confirm")
        await open_dialog(app, pilot, "escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        await check_buttons(app, pilot, "help")
        await open_dialog(app, pilot, "escape", "o")
        assert isinstance(app.screen, PathsScreen)
        await check_buttons(app, pilot, "paths")

    run(work, (80, 24), body)
