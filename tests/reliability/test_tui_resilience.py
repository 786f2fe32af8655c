"""Acceptance 8: the console stays up when its inputs go bad under it.

The real ``FvConsoleApp`` is driven with ``run_test()`` + Pilot: the cache root vanishes
(and comes back), a checkpoint's metadata is corrupt, and the cache holds 10,000 entries.
Textual re-raises any unhandled exception from ``run_test``, so "stays up" is checked
both by the app still running after each step and by the test not raising.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from console_apps import make_app
from tour import press, settle

from .workspace import MigrationWorkspace, cheap_entries

pytestmark = pytest.mark.tui
SIZE = (140, 42)


@pytest.fixture(scope="session")  # a lookup in the session's cache: no reason to keep the file in one worker
def ws(migration_workspace) -> MigrationWorkspace:
    return migration_workspace(world=4)




async def started(app, pilot) -> None:
    for _ in range(1000):
        if getattr(app, "loaded", True):
            break
        await pilot.pause(0.02)
    await settle(app, pilot)


def text_of(app, selector: str) -> str:
    return str(app.query_one(selector).render())


@pytest.mark.fault("tui", "cache root deleted while the console shows it, then re-created")
def test_cache_root_vanishes(tmp_path: Path, trials) -> None:
    root = tmp_path / "cache"
    cheap_entries(root, 50)

    async def body() -> None:
        app = make_app(None, None, root)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            await press(app, pilot, "3")
            assert app.query_one("#cache-table").row_count == 50
            shutil.rmtree(root)
            for keys in (("r",), ("3", "r"), ("down", "space", "r")):
                await press(app, pilot, *keys)
                assert app.is_running
            assert app.query_one("#cache-table").row_count == 0
            assert str(root) in text_of(app, "#cache-root-line")
            trials.add("stays up, root shown as missing")
            cheap_entries(root, 7, prefix="back")
            await press(app, pilot, "r")
            assert app.query_one("#cache-table").row_count == 7
            trials.add("recovers when the root returns")

    asyncio.run(body())


@pytest.mark.fault("tui", "a checkpoint's metadata.json is corrupt (garbage, truncated, wrong types)")
@pytest.mark.parametrize("damage", [b"\x00\xffgarbage", b'{"step": 2, "config": ', b'{"step": "two", "config": []}'])
def test_corrupt_checkpoint_metadata(ws: MigrationWorkspace, tmp_path: Path, trials, damage: bytes) -> None:
    output = tmp_path / "output"
    shutil.copytree(ws.checkpoint.parent, output)
    good = output / "checkpoint-4"
    shutil.copytree(output / ws.checkpoint.name, good)
    meta = json.loads((good / "metadata.json").read_text())
    (good / "metadata.json").write_text(json.dumps(dict(meta, step=4)))
    (output / ws.checkpoint.name / "metadata.json").write_bytes(damage)

    async def body() -> None:
        app = make_app(ws.config, output, None)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            table = app.query_one("#ckpt-table")
            assert table.row_count == 2, "a checkpoint with corrupt metadata vanished from the list"
            for row in range(table.row_count):
                table.move_cursor(row=row)
                await settle(app, pilot)
                assert app.is_running
            detail = text_of(app, "#ckpt-detail")
            assert detail
            for keys in (("m",), ("2",), ("1",), ("r",)):
                await press(app, pilot, *keys)
                assert app.is_running
            trials.add("stays up, both checkpoints listed")

    asyncio.run(body())


@pytest.mark.slow
@pytest.mark.fault("tui", "10,000 cache entries: list, scroll to the end, detail follows the cursor, filter")
def test_ten_thousand_entries(tmp_path: Path, trials) -> None:
    root = tmp_path / "cache"
    keys = cheap_entries(root, 10_000)

    async def body() -> None:
        app = make_app(None, None, root)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            await press(app, pilot, "3")
            table = app.query_one("#cache-table")
            assert table.row_count == 10_000
            table.move_cursor(row=9_999)
            await settle(app, pilot)
            await press(app, pilot, "up")
            assert table.cursor_row == 9_998
            highlighted = table.coordinate_to_cell_key((9_998, 0)).row_key.value
            assert highlighted in text_of(app, "#cache-detail"), "detail pane does not follow the cursor"
            await pilot.press("slash")
            await pilot.press(*keys[1234][:6])
            await press(app, pilot, "enter")
            assert 1 <= table.row_count < 10_000
            assert app.is_running
            trials.add("stays up, all 10,000 listed and filterable")

    asyncio.run(body())
