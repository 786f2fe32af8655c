"""Issue 31 item 5: view 1 marks checkpoints (space) and prunes them after a confirmation that says
what goes, what stays and why, and the bytes freed (focus on Cancel; it fits 80x24); --read-only
hides it. The real console under run_test, on a real output dir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from console_apps import make_app, running, shown_notifications, wait_until
from retention_runs import DAY, make_checkpoint
from tour import press, select_row, settle

from fvconsole.core.shared import human_bytes
from fvconsole.tui.checkpoints.view import CheckpointsView
from fvconsole.tui.modals import ConfirmScreen

SMALL = (80, 24)


@pytest.fixture()
def out(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    for step, days in ((100, 10), (200, 9), (300, 8), (400, 3)):
        make_checkpoint(out, step, age=days * DAY)
    return out


def notes(app) -> list[str]:
    return [n.message for n in shown_notifications(app)]


def dialog_text(app) -> str:
    from fvconsole.tui.widgets.statics import PlainStatic

    return "\n".join(str(w.render()) for w in app.screen.query(PlainStatic))


async def mark(app, pilot, *steps: int) -> None:
    for step in steps:
        await select_row(app, pilot, "#ckpt-table", f"checkpoint-{step}")
        await press(app, pilot, "space")


async def test_mark_confirm_and_prune(out: Path, tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    app = make_app(output=out, journal=journal)
    async with running(app, SMALL) as pilot:
        await select_row(app, pilot, "#ckpt-table", "checkpoint-400")
        await settle(app, pilot)
        assert "retention: kept: the newest complete checkpoint" in str(app.query_one("#ckpt-detail").render())
        await mark(app, pilot, 100, 200, 400)
        table = app.query_one("#ckpt-table")
        assert str(table.get_cell(str(out / "checkpoint-100"), "step")) == "● 100"
        await press(app, pilot, "p")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        body = dialog_text(app)
        assert "Delete 2 from" in body and "checkpoint-100" in body and "checkpoint-200" in body
        assert "checkpoint-400  the newest complete checkpoint: never deleted" in body
        size = sum(f.stat().st_size for step in (100, 200) for f in (out / f"checkpoint-{step}").rglob("*")
                   if f.is_file())
        assert f"Frees {human_bytes(size)}." in body
        # It fits 80x24: both buttons on screen; the focus starts on Cancel (Enter says no).
        for button in ("#confirm", "#cancel"):
            region = app.screen.query_one(button).region
            assert region.right <= SMALL[0] and region.bottom <= SMALL[1], (button, region)
        assert app.screen.focused.id == "cancel"
        await press(app, pilot, "enter")
        assert "prune cancelled: nothing deleted" in notes(app)
        assert sorted(p.name for p in out.iterdir()) == ["checkpoint-100", "checkpoint-200", "checkpoint-300",
                                                         "checkpoint-400"]
        await press(app, pilot, "p")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await press(app, pilot, "left", "enter")
        await wait_until(pilot, lambda: any(n.startswith("pruned 2 checkpoints") for n in notes(app)), "the prune")
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-300", "checkpoint-400"]
    [line] = journal.read_text().splitlines()
    assert json.loads(line)["items"] == ["checkpoint-200", "checkpoint-100"]


async def test_read_only_hides_the_prune(out: Path) -> None:
    app = make_app(output=out, read_only=True)
    async with running(app, SMALL) as pilot:
        await mark(app, pilot, 100)
        await press(app, pilot, "p")
        app.query_one(CheckpointsView).action_prune_marked()  # what the command palette calls
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert any(n.startswith("read-only mode: prune") for n in notes(app))
        assert not app.query_one(CheckpointsView).check_action("prune_marked", ())
    assert len(list(out.iterdir())) == 4


async def test_the_view_stays_shown_while_a_prune_is_judged(out: Path) -> None:
    """The view's own busy flag is not Textual's ``_pruning`` (a widget being removed): under
    that name a prune being judged or run made Textual take view 1 for one leaving the screen
    (``display`` False, ``mount`` into it a no-op)."""
    app = make_app(output=out)
    async with running(app, SMALL) as pilot:
        await mark(app, pilot, 100)
        view = app.query_one(CheckpointsView)
        view.action_prune_marked()  # the judging worker has started; its answer has not come back
        assert view.display and view.table.display
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        assert view.display


@pytest.mark.parametrize(("how", "opens"), [("fifo", "dcp/.metadata not a readable regular file"),
                                            ("rng", "interrupted save")])
async def test_a_fresh_incomplete_checkpoint_is_kept_for_what_it_lacks(out: Path, how: str, opens: str) -> None:
    """The detail pane's retention line and the confirmation's Keep line name the gaps as `checkpoints prune`
    does: "interrupted save" only for a cut-off save (both said it of a FIFO at dcp/.metadata before)."""
    ckpt = make_checkpoint(out, 500, age=60)
    if how == "fifo":
        (ckpt / "dcp" / ".metadata").unlink()
        os.mkfifo(ckpt / "dcp" / ".metadata")
    else:
        (ckpt / "rng_state_rank1.pt").unlink()
    says = f"{opens}, newer than the newest complete one, modified "
    app = make_app(output=out)
    async with running(app, (160, 48)) as pilot:
        await select_row(app, pilot, "#ckpt-table", "checkpoint-500")
        await settle(app, pilot)
        detail = " ".join(str(app.query_one("#ckpt-detail").render()).split())
        assert f"retention: kept: {says}" in detail and "(within the 10m grace: it may still be being written)" \
            in detail, detail
        await mark(app, pilot, 100, 500)
        await press(app, pilot, "p")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        body = dialog_text(app)
        assert f"checkpoint-500  {says}" in body, body
        await press(app, pilot, "escape")
