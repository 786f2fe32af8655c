"""The console's elastic resume: the world-size change, the three modes side by side, the chosen one confirmed."""

from __future__ import annotations

import json
import os

import pytest
from console_apps import make_app, running, work_copy
from tour import press, select_row

from fvconsole.tui.migration.view import MigrationView
from fvconsole.tui.modals import ConfirmScreen

pytestmark = pytest.mark.tui


@pytest.fixture
def work_paths(demo_ws, tmp_path) -> dict[str, str]:
    """Copies of the demo's output dir and cache root for one test."""
    return work_copy(demo_ws, tmp_path)


async def _preview(app, pilot, overrides: str, mode: str | None) -> MigrationView:
    await select_row(app, pilot, "#ckpt-table", "checkpoint-300")
    await press(app, pilot, "m")
    view = app.query_one(MigrationView)
    view.query_one("#mig-overrides").value = overrides
    select = view.query_one("#mig-reshard")
    if mode is None:
        select.clear()
    else:
        select.value = mode
    await press(app, pilot, "ctrl+r")
    return view


@pytest.mark.parametrize("size", [(80, 24), (140, 42)])
async def test_a_world_size_change_shows_every_mode_and_confirms_the_chosen_one(work_paths, size) -> None:
    app = make_app(**work_paths)
    async with running(app, size) as pilot:
        view = await _preview(app, pilot, "training.distributed.num_gpus=16", None)
        banner = " ".join(str(view.query_one("#mig-banner").render()).split())
        assert "choose a reshard mode in the form" in banner, banner
        panel = view.query_one("#mig-reshard-panel")
        assert panel.display
        text = str(panel.render())
        assert "world size 8 -> 16" in text
        for mode in ("next-epoch", "epoch-start", "nearest"):
            assert mode in text
        assert all(len(line) <= 78 for line in text.splitlines()), text
        view = await _preview(app, pilot, "training.distributed.num_gpus=16", "nearest")
        assert app.query_one("#mig-ranks").row_count == 16
        assert "nearest *" in str(view.query_one("#mig-reshard-panel").render())
        await press(app, pilot, "ctrl+e")
        assert isinstance(app.screen, ConfirmScreen)
        body = " ".join(str(app.screen.query_one("#dialog-body PlainStatic").render()).split())
        assert "Elastic resume, mode nearest: world size 8 -> 16" in body, body
        await press(app, pilot, "left", "enter")
        out = view.query_one("#mig-output").value
        with open(os.path.join(out, "migration_receipt.json")) as fh:
            receipt = json.load(fh)
        assert receipt["world_size"] == 16 and receipt["reshard"]["mode"] == "nearest"


async def test_the_panel_is_hidden_without_a_topology_change(work_paths) -> None:
    app = make_app(**work_paths)
    async with running(app, (140, 42)) as pilot:
        view = await _preview(app, pilot, "", None)
        assert app.query_one("#mig-ranks").row_count == 8
        assert not view.query_one("#mig-reshard-panel").display
