"""What a newcomer hit in the console (issue 38, items 7-10), each at the terminal sizes the
issue names: global keys that typed text into the Fleet view's job field, confirmations deaf to
``y``/``n``, a help screen that put the view's own keys below the fold, ``--read-only`` without
``-r``, columns cut with room to spare, and no word that pruning a migrated checkpoint orphans
its published sidecar set. The real app on copies of the demo workspace, under ``run_test``.
"""

from __future__ import annotations

import io
import os

import pytest
from console_apps import running, wait_until, work_copy
from rich.console import Console
from textual.containers import VerticalScroll
from textual.widgets import Input
from tour import FROZEN_NOW, check_cells, frozen_display, press, screen_lines, select_row

from fvconsole.cli import build_parser
from fvconsole.cli import main as cli_main
from fvconsole.core.journal.log import JournalRecord, append_record
from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui.modals import ConfirmScreen, HelpScreen

pytestmark = pytest.mark.tui


@pytest.fixture
def work(demo_ws: DemoWorkspace, tmp_path) -> dict[str, str]:
    return work_copy(demo_ws, tmp_path)


def console(work: dict[str, str], **kwargs):
    from console_apps import make_app

    return make_app(**work, **kwargs)


def written_sets(work: dict[str, str]) -> list[str]:
    root = os.path.join(work["output"], "dataloader-state")
    return sorted(set(os.listdir(root)) - {"validated-100"}) if os.path.isdir(root) else []


def migrate_by_cli(work: dict[str, str], step: int) -> str:
    ckpt = os.path.join(work["output"], f"checkpoint-{step}")
    out = os.path.join(work["output"], "dataloader-state", f"checkpoint-{step}")
    assert cli_main(["migrate", "--config", work["config"], "--checkpoint", ckpt, "--output-dir", out,
                     "--expected-step", str(step), "--expected-world-size", "8",
                     "--consumed-batches-per-rank", str(2 * step), "--yes"]) == 0
    return out


# ----------------------------------------------------------------------------- item 7


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_global_keys_act_on_arrival_in_the_fleet_view(work: dict[str, str], size, monkeypatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    app = console(work)
    async with running(app, size) as pilot:
        job = app.query_one("#fleet-job", Input)
        await press(app, pilot, "4")
        assert app.query_one("#views").active == "fleet"
        await press(app, pilot, "5")
        assert app.query_one("#views").active == "history" and job.value == "", job.value
        await press(app, pilot, "4", "question_mark")
        assert isinstance(app.screen, HelpScreen) and job.value == ""
        await press(app, pilot, "escape")
        assert app.query_one("#views").active == "fleet"
        # A field entered on purpose takes the keys as text (Tab or a click: Scan has focus first).
        job.focus()
        await press(app, pilot, "1", "2")
        assert job.value == "12" and app.query_one("#views").active == "fleet"
        await press(app, pilot, "escape", "q")
        await wait_until(pilot, lambda: app.return_code is not None, "q after Esc quits")


# ----------------------------------------------------------------------------- item 8


async def test_a_confirmation_answers_n_and_y(work: dict[str, str]) -> None:
    app = console(work)
    async with running(app, (120, 40)) as pilot:
        await select_row(app, pilot, "#ckpt-table", "checkpoint-300")
        await press(app, pilot, "m", "ctrl+r", "ctrl+e")
        assert isinstance(app.screen, ConfirmScreen)
        await press(app, pilot, "n")
        assert not isinstance(app.screen, ConfirmScreen) and written_sets(work) == []
        await press(app, pilot, "ctrl+e")
        assert isinstance(app.screen, ConfirmScreen)
        await press(app, pilot, "enter")  # focus starts on Cancel: the default is still No
        assert not isinstance(app.screen, ConfirmScreen) and written_sets(work) == []
        await press(app, pilot, "ctrl+e", "y")
        assert not isinstance(app.screen, ConfirmScreen)
        assert written_sets(work) == ["checkpoint-300"]


def help_text(app) -> str:
    keys = app.screen.query_one("#help-keys")
    out = Console(width=keys.size.width, file=io.StringIO(), record=True, color_system=None)
    out.print(keys.content)
    return out.export_text()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_shows_the_views_keys_first_and_j_k_scroll_it(work: dict[str, str], size) -> None:
    app = console(work)
    async with running(app, size) as pilot:
        await press(app, pilot, "3", "question_mark")
        text = help_text(app)
        headings = [line.strip() for line in text.splitlines() if line.strip() in {
            "Everywhere", "Tables", "3 Shard cache (this view)", "1 Checkpoints", "5 History"}]
        assert headings[:3] == ["3 Shard cache (this view)", "Everywhere", "Tables"], headings
        assert "mark every entry shown" in text.split("Everywhere")[0]
        body = app.screen.query_one("#dialog-body", VerticalScroll)
        assert body.max_scroll_y > 2, "the list is longer than the dialog at this size"
        await press(app, pilot, "j", "j")
        assert body.scroll_y == 2
        await press(app, pilot, "k")
        assert body.scroll_y == 1


def test_read_only_has_a_short_flag() -> None:
    assert build_parser([]).parse_args(["-r"]).read_only is True
    assert build_parser([]).parse_args([]).read_only is False


# ----------------------------------------------------------------------------- item 9


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_an_age_is_shown_whole(work: dict[str, str], size) -> None:
    """"20m 15s" (and the longest, "999d 23h") are whole in view 1's age column (the clock frozen)."""
    stamp = FROZEN_NOW - (20 * 60 + 15)
    os.utime(os.path.join(work["output"], "checkpoint-500", "dcp", ".metadata"), (stamp, stamp))
    app = console(work)
    with frozen_display():
        async with running(app, size) as pilot:
            await press(app, pilot, "r")
            table = app.query_one("#ckpt-table")
            assert str(table.get_row(os.path.join(work["output"], "checkpoint-500"))[-1]) == "20m 15s"
            assert any("20m 15s" in line for line in screen_lines(app)), screen_lines(app)
            column = next(c for k, c in table.columns.items() if k.value == "age")
            assert column.width >= len("999d 23h")
            assert check_cells(app, "#ckpt-table") > 0


async def test_history_shows_every_action_whole_at_200_columns(work: dict[str, str], tmp_path) -> None:
    journal = str(tmp_path / "journal.jsonl")
    for action in ("checkpoints prune", "fleet cache evict", "cache evict", "migrate"):
        assert append_record(JournalRecord.now(action=action, target=work["output"], result="ok", exit_code=0,
                                               bytes=1), journal).written
    app = console(work, journal=journal)
    async with running(app, (200, 60)) as pilot:
        await press(app, pilot, "5")
        drawn = "\n".join(screen_lines(app))
        assert "checkpoints prune" in drawn and "fleet cache evict" in drawn, drawn
        assert check_cells(app, "#hist-table") > 0


async def reshard(app, pilot, mode: str) -> None:
    await select_row(app, pilot, "#ckpt-table", "checkpoint-300")
    await press(app, pilot, "m")
    form = app.query_one("#mig-form")
    form.query_one("#mig-overrides", Input).value = "training.distributed.num_gpus=16"
    output = form.query_one("#mig-output", Input)
    output.value = output.value + "-16-gpus"
    form.query_one("#mig-reshard").value = mode


async def test_next_ids_are_whole_at_120_columns_after_a_reshard(work: dict[str, str]) -> None:
    app = console(work)
    async with running(app, (120, 40)) as pilot:
        await reshard(app, pilot, "nearest")
        await press(app, pilot, "ctrl+r")
        ranks = app.query_one("#mig-ranks")
        assert ranks.row_count == 16
        ids = [str(ranks.get_row_at(i)[-1]) for i in range(ranks.row_count)]
        assert all(i.startswith("sample-") for i in ids), ids
        drawn = "\n".join(screen_lines(app))
        shown = [i for i in ids if i in drawn]
        assert shown, "the ids on screen are drawn whole, not 'sample-0…'"
        assert "sample-0…" not in drawn
        assert check_cells(app, ranks) > 0


async def test_the_reshard_selector_keeps_its_arrow_at_80_columns(work: dict[str, str]) -> None:
    app = console(work)
    async with running(app, (80, 24)) as pilot:
        await reshard(app, pilot, "epoch-start")
        await pilot.pause()
        select = app.query_one("#mig-reshard")
        region = select.region
        assert region.right <= app.size[0], region
        line = screen_lines(app)[region.y]
        assert "reshard: epoch-start" in line and "▼" in line, line


# ----------------------------------------------------------------------------- item 10


async def test_pruning_a_migrated_checkpoint_says_it_orphans_its_set(work: dict[str, str]) -> None:
    orphaned = migrate_by_cli(work, 100)
    app = console(work)
    async with running(app, (120, 40)) as pilot:
        await select_row(app, pilot, "#ckpt-table", "checkpoint-100")
        pane = " ".join(str(app.query_one("#ckpt-detail").render()).split())
        assert "retention: may be pruned" in pane
        assert "pruning it orphans its published sidecar set" in pane, pane
        await select_row(app, pilot, "#ckpt-table", "checkpoint-300")  # may go too, but has no set
        pane = " ".join(str(app.query_one("#ckpt-detail").render()).split())
        assert "retention: may be pruned" in pane and "orphans" not in pane, pane
        await select_row(app, pilot, "#ckpt-table", "checkpoint-100")
        await press(app, pilot, "space", "p")
        assert isinstance(app.screen, ConfirmScreen)
        body = " ".join(str(s.render()) for s in app.screen.query("#dialog-body Static"))
        assert "checkpoint-100" in body and "orphans its published sidecar set" in body, body
        assert orphaned in body
        await press(app, pilot, "n")
        assert os.path.isdir(os.path.join(work["output"], "checkpoint-100"))
