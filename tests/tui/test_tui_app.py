"""The real console driven with run_test() + Pilot over a real demo workspace."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from console_apps import Notified, make_app, running, shown_notifications, work_copy
from migration_runs import migrate_argv
from rich.console import Console
from textual_test_private import input_suggestion
from tour import line_slice, press, screen_lines, select_row, settle, started

from fvconsole.cli import main as cli_main
from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.cache.evict_dialog import EvictScreen
from fvconsole.tui.cache.view import CacheView
from fvconsole.tui.migration.view import MigrationView
from fvconsole.tui.modals import ConfirmScreen, HelpScreen, PathsScreen
from fvconsole.tui.state import ConsoleState

pytestmark = pytest.mark.tui
SIZE = (140, 42)


@pytest.fixture
def work(demo_ws: DemoWorkspace, tmp_path) -> dict[str, str]:
    """Copies of the output dir and the cache root for one test (the session's demo_ws stays as built)."""
    return work_copy(demo_ws, tmp_path)


def written_sets(paths: dict[str, str]) -> list[str]:
    """What is under the output's dataloader-state/ beyond the demo's upstream-validated set."""
    root = os.path.join(paths["output"], "dataloader-state")
    return sorted(set(os.listdir(root)) - {"validated-100"}) if os.path.isdir(root) else []


async def select_checkpoint(app: FvConsoleApp, pilot, step: int) -> None:
    await select_row(app, pilot, "#ckpt-table", f"checkpoint-{step}")


async def preview_300(app: FvConsoleApp, pilot, output_dir: str | None = None) -> str:
    """Start, open checkpoint-300's migration form (in ``output_dir`` if given) and preview: → the output dir."""
    await started(app, pilot)
    await select_checkpoint(app, pilot, 300)
    await press(app, pilot, "m")
    if output_dir is not None:
        app.query_one("#mig-output").value = output_dir
    out = app.query_one(MigrationView).query_one("#mig-output").value
    await press(app, pilot, "ctrl+r")
    return out


async def execute_confirmed(app: FvConsoleApp, pilot) -> None:
    """Execute, then confirm in the modal (its focus starts on Cancel)."""
    await press(app, pilot, "ctrl+e")
    await press(app, pilot, "left", "enter")


def notifications(app: FvConsoleApp) -> list[str]:
    return [n.message for n in shown_notifications(app)]


# --------------------------------------------------------------------------- migration


async def test_migration_through_modal_equals_cli(work: dict[str, str], tmp_path) -> None:
    import torch

    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        await select_checkpoint(app, pilot, 300)
        detail = str(app.query_one("#ckpt-detail").render())
        assert "matches" in detail and "dataloader.*" in detail
        await press(app, pilot, "m")
        assert app.query_one("#views").active == "migration"
        view = app.query_one(MigrationView)
        out = view.query_one("#mig-output").value
        assert out.endswith(os.path.join("dataloader-state", "checkpoint-300"))
        assert view.query_one("#mig-consumed").value == "600"
        await press(app, pilot, "ctrl+r")
        assert app.query_one("#mig-ranks").row_count == 8
        await press(app, pilot, "ctrl+e")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.focused.id == "cancel"
        await press(app, pilot, "left", "enter")
        assert not isinstance(app.screen, ConfirmScreen)
        assert app.query_one("#mig-export").text == "export FASTVIDEO_DATALOADER_STATE_DIR=" + out
        await press(app, pilot, "ctrl+y")
        assert "verify: 8 sidecars match" in str(app.query_one("#mig-banner").render())

    cli_out = str(tmp_path / "cli-sidecars")
    ckpt = os.path.join(work["output"], "checkpoint-300")
    code = cli_main(migrate_argv(work["config"], ckpt, cli_out, step=300, world=8, consumed=600,
                                 extra=("--yes", "--json")))
    assert code == 0
    with open(os.path.join(out, "migration_receipt.json")) as fh:
        tui_receipt = json.load(fh)
    with open(os.path.join(cli_out, "migration_receipt.json")) as fh:
        cli_receipt = json.load(fh)
    ignored = {"created_at_utc", "output_dir", "sidecars"}
    assert {k: v for k, v in tui_receipt.items() if k not in ignored} == {
        k: v for k, v in cli_receipt.items() if k not in ignored}
    strip = [{k: v for k, v in s.items() if k != "sha256"} for s in tui_receipt["sidecars"]]
    assert strip == [{k: v for k, v in s.items() if k != "sha256"} for s in cli_receipt["sidecars"]]
    for rank in range(8):
        name = f"dataloader_state_rank{rank}.pt"
        assert torch.load(os.path.join(out, name), weights_only=True) == torch.load(
            os.path.join(cli_out, name), weights_only=True)
    assert sorted(os.listdir(ckpt)) == sorted(os.listdir(os.path.join(os.path.dirname(ckpt), "checkpoint-100")))


async def test_what_execution_finds_is_shown_as_the_command_line_prints_it(work: dict[str, str]) -> None:
    """A staging dir of another host appears between the preview and Execute: the done banner says so
    (``migrate --yes`` prints it as a warning; the console had dropped execution's own findings)."""
    app = make_app(**work)
    async with app.run_test(size=SIZE) as pilot:
        out = await preview_300(app, pilot)
        assert app.query_one("#mig-ranks").row_count == 8
        os.makedirs(os.path.dirname(out), exist_ok=True)
        other = os.path.join(os.path.dirname(out),
                             f".{os.path.basename(out)}.fvconsole-staging-login2-0123456789ab-4242-feed")
        os.mkdir(other)
        await execute_confirmed(app, pilot)
        banner = " ".join(str(app.query_one("#mig-banner").render()).split())
        assert "✓ done: 8 sidecars" in banner, banner
        assert "staging dir of another host or container (login2, pid 4242)" in banner, banner
        assert os.path.isdir(other)


async def test_a_run_config_edited_after_the_preview_is_refused_in_the_consoles_words(work: dict[str, str],
                                                                                      tmp_path) -> None:
    """Execution's re-check refuses with a reason like the preview's: the console words it with its own
    controls (before, it showed the command line's text of a bare error)."""
    work = dict(work, config=str(shutil.copy2(work["config"], tmp_path / "run.yaml")))  # edited here: a copy
    app = make_app(**work)
    async with app.run_test(size=SIZE) as pilot:
        await preview_300(app, pilot)
        assert app.query_one("#mig-ranks").row_count == 8
        with open(work["config"], "a", encoding="utf-8") as fh:
            fh.write("# edited after the preview\n")
        await execute_confirmed(app, pilot)
        banner = app.query_one("#mig-banner")
        text = " ".join(str(banner.render()).split())
        assert f"✗ {work['config']}: run config changed since the preview; Preview (ctrl+r) again" in text, text
        assert banner.has_class("refused")
        assert written_sets(work) == []


async def test_cancel_writes_nothing_and_mismatch_is_reported(work: dict[str, str]) -> None:
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        await select_checkpoint(app, pilot, 200)
        detail = str(app.query_one("#ckpt-detail").render())
        assert "critical mismatch" in detail and "training.data.seed" in detail
        await select_checkpoint(app, pilot, 300)
        await press(app, pilot, "m")
        await press(app, pilot, "ctrl+r")
        await press(app, pilot, "ctrl+e")
        await press(app, pilot, "enter")  # focus starts on Cancel
        assert written_sets(work) == []
        # A bad integer names the field; a step that does not match is a refusal banner.
        view = app.query_one(MigrationView)
        assert app.query_one("#mig-ranks").row_count == 8
        view.query_one("#mig-step").value = "301"
        await pilot.pause()
        assert app.query_one("#mig-ranks").row_count == 0  # an edited form shows no stale plan
        await press(app, pilot, "ctrl+r")
        banner = str(app.query_one("#mig-banner").render())
        assert "REFUSED" in banner and "step" in banner
        assert app.query_one("#mig-execute").disabled
        # An override that is not YAML is refused naming it; the configs were not compared.
        view.query_one("#mig-step").value = "300"
        view.query_one("#mig-overrides").value = "training.data.seed=["
        await press(app, pilot, "ctrl+r")
        banner = " ".join(str(app.query_one("#mig-banner").render()).split())
        assert "REFUSED" in banner and "training.data.seed=[" in banner
        report = str(app.query_one("#mig-mismatch").render())
        assert "not compared" in report and "matches" not in report


async def test_a_refusal_an_override_would_fix_suggests_it_in_the_form(work: dict[str, str]) -> None:
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        view = app.query_one(MigrationView)
        assert "e.g. training.data.seed=7" in view.query_one("#mig-overrides").placeholder
        await select_checkpoint(app, pilot, 200)  # saved with seed 7; run.yaml says 42
        await press(app, pilot, "m")
        await press(app, pilot, "ctrl+r")
        banner = " ".join(str(app.query_one("#mig-banner").render()).split())
        assert "REFUSED" in banner and "type training.data.seed=7 into “overrides”" in banner, banner
        view.query_one("#mig-overrides").value = "training.data.seed=7"
        await press(app, pilot, "ctrl+r")
        assert not app.query_one("#mig-execute").disabled


# --------------------------------------------------------------------------- cache


async def test_evict_two_marked_entries(work: dict[str, str]) -> None:
    before = set(os.listdir(work["cache"]))
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        await press(app, pilot, "3")
        view = app.query_one(CacheView)
        complete = [e.key for e in view._entries if e.status == "complete"][:2]
        assert len(complete) == 2
        table = app.query_one("#cache-table")
        for key in complete:
            table.move_cursor(row=table.get_row_index(key))
            await pilot.press("space")
        assert view.marked == set(complete), (app.focused, notifications(app))
        await press(app, pilot, "e")
        assert isinstance(app.screen, EvictScreen)
        await press(app, pilot, "enter")  # Continue: the plan of the dialog goes to the confirmation
        assert isinstance(app.screen, ConfirmScreen)
        assert app.focused.id == "cancel"
        await press(app, pilot, "left", "enter")
        result = str(app.query_one("#cache-result").render())
        assert "evicted 2" in result and "✗" not in result
        assert {e.key for e in view._entries}.isdisjoint(complete)
    after = set(os.listdir(work["cache"]))
    assert after == before - set(complete)
    assert "README.txt" in after


async def test_v_verifies_the_entry_under_the_cursor_and_shows_the_problem(work: dict[str, str]) -> None:
    safe_open = pytest.importorskip("safetensors").safe_open
    from fvconsole.demo.cache_builders import DISAGREEING_PARAM

    def header_dtypes(entry: str) -> dict[str, str]:  # safetensors' own reader, shard by shard
        out = {}
        for name in sorted(os.listdir(entry)):
            if name.endswith(".safetensors"):
                with safe_open(os.path.join(entry, name), framework="pt") as f:
                    out[name] = f.get_slice(DISAGREEING_PARAM).get_dtype()
        return out

    app = make_app(**work)
    notified = Notified(app)  # the first verify's notification is read after the second verify ran
    async with running(app, (200, 60)) as pilot:
        await press(app, pilot, "3")
        view = app.query_one(CacheView)
        complete = [e for e in view._entries if e.status == "complete"]
        seen = {e.key: header_dtypes(e.path) for e in complete}
        (bad,) = [k for k, dtypes in seen.items() if "BF16" in dtypes.values()]
        (bad_shard,) = [name for name, dtype in seen[bad].items() if dtype == "BF16"]
        good = next(k for k in seen if k != bad)
        table = app.query_one("#cache-table")
        table.focus()
        for key, expect in ((bad, f"✗ {bad_shard}: '{DISAGREEING_PARAM}': dtype"), (good, "✓ ")):
            table.move_cursor(row=table.get_row_index(key))
            await settle(app, pilot)
            await press(app, pilot, "v")
            detail = str(app.query_one("#cache-detail").render())
            assert "verify" in detail and expect in detail, detail
            assert detail.index(expect) < detail.index("manifest.json"), detail  # seen first, not after the files
        assert any("1 of 1 failed verification" in m and f"{bad_shard}: '{DISAGREEING_PARAM}'" in m
                   for m in notified())


async def evict_marked(app: FvConsoleApp, pilot, keys: list[str]) -> None:
    """Mark ``keys`` in view 3, then e, Continue, and confirm (Cancel has the focus: left, Enter)."""
    await press(app, pilot, "3")
    table = app.query_one("#cache-table")
    table.focus()
    for key in keys:
        table.move_cursor(row=table.get_row_index(key))
        await pilot.press("space")
    await press(app, pilot, "e")
    await press(app, pilot, "enter")
    assert isinstance(app.screen, ConfirmScreen)
    await press(app, pilot, "left", "enter")


async def test_eviction_takes_the_roots_lock_and_journals_like_the_cli(work: dict[str, str], tmp_path,
                                                                       monkeypatch) -> None:
    from fvconsole.core.cache.roots import evictor_lock

    journal = tmp_path / "journal.jsonl"
    monkeypatch.setenv("FVCONSOLE_JOURNAL", str(journal))
    before = set(os.listdir(work["cache"]))
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        view = app.query_one(CacheView)
        victim = next(e.key for e in view._entries if e.status == "complete")
        with evictor_lock(work["cache"], command="fvconsole cache evict --yes (cron)"):
            await evict_marked(app, pilot, [victim])
            [busy] = [m for m in notifications(app) if "another eviction is running" in m]
            assert busy.endswith("try again once it has finished") and "--" not in busy, busy
            assert set(os.listdir(work["cache"])) - {".fvconsole-evictor.lock"} == before and not journal.exists()
        view.marked = frozenset()
        await evict_marked(app, pilot, [victim])
        assert "evicted 1" in str(app.query_one("#cache-result").render())
    assert set(os.listdir(work["cache"])) == before - {victim}
    [line] = [json.loads(x) for x in journal.read_text().splitlines()]
    assert (line["action"], line["items"], line["exit_code"]) == ("cache evict", [victim], 0)
    assert line["command"] == "fvconsole console: evict marked"
    assert os.path.realpath(line["target"]) == os.path.realpath(work["cache"])


async def test_filter_rebuilds_table(work: dict[str, str]) -> None:
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        await press(app, pilot, "3")
        table = app.query_one("#cache-table")
        total = table.row_count
        await press(app, pilot, "slash", *"invalid")
        assert 0 < table.row_count < total
        assert all("invalid" in str(table.get_row_at(i)[2]) for i in range(table.row_count))
        await pilot.press("escape")
        assert table.row_count == total


# --------------------------------------------------------------------------- read-only


async def test_read_only_refuses_migration_and_eviction(work: dict[str, str]) -> None:
    before = set(os.listdir(work["cache"]))
    app = make_app(**work, read_only=True)
    notified = Notified(app)  # a loaded machine lets the first notifications expire before the last check

    def refused() -> list[str]:
        return [m for m in notified() if m.startswith("read-only mode")]

    async with app.run_test(size=SIZE) as pilot:
        await preview_300(app, pilot)
        assert app.query_one("#mig-execute").disabled
        await press(app, pilot, "ctrl+e")
        assert not isinstance(app.screen, ConfirmScreen)
        app.query_one(MigrationView).action_execute()  # what the command palette calls
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert len(refused()) == 2
        await press(app, pilot, "3")
        await press(app, pilot, "space", "e", "i", "c")
        app.query_one(CacheView).action_evict_invalid()
        await settle(app, pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert len(refused()) >= 5
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Migration: Execute (disabled: read-only)" in titles
        assert not app.query_one(CacheView).check_action("evict_marked", ())
    assert written_sets(work) == []
    assert set(os.listdir(work["cache"])) == before


# --------------------------------------------------------------------------- bad input


async def test_broken_manifest_and_metadata_show_errors(tmp_path) -> None:
    from fvconsole.demo import builders

    run = builders.build_run(tmp_path / "run", steps=(4,), num_gpus=2, sp_size=1)
    with open(run.manifest_path, "w") as fh:
        fh.write("{ not json")
    with open(os.path.join(run.checkpoint(4), "metadata.json"), "w") as fh:
        fh.write("[]")
    app = make_app(run.config_path, run.output_dir, tmp_path / "nope")
    async with running(app, SIZE) as pilot:
        assert any("nope" in m for m in notifications(app))  # missing cache root reported
        await select_checkpoint(app, pilot, 4)
        assert "metadata.json" in str(app.query_one("#ckpt-detail").render())
        view = app.query_one(MigrationView)
        view.prefill(run.checkpoint(4), 4)
        view.query_one("#mig-output").value = str(tmp_path / "side")
        await pilot.press("2")
        await press(app, pilot, "ctrl+r")
        shown = str(app.query_one("#mig-banner").render()) + " ".join(notifications(app))
        assert "manifest" in shown
        assert app.is_running
        await press(app, pilot, "1")
        assert app.query_one("#views").active == "checkpoints"
    assert not os.path.exists(tmp_path / "side")


async def test_cache_root_vanishing_keeps_app_up(work: dict[str, str]) -> None:
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        await press(app, pilot, "3")
        shutil.rmtree(work["cache"])
        await press(app, pilot, "i")  # the dialog plans on the scan on screen; continuing rescans
        assert isinstance(app.screen, EvictScreen)
        await press(app, pilot, "enter")
        assert not isinstance(app.screen, (EvictScreen, ConfirmScreen))
        await press(app, pilot, "r")
        assert app.is_running
        assert any(work["cache"] in m for m in notifications(app)), (notifications(app), app.screen)
        assert app.query_one("#cache-table").row_count == 0


# --------------------------------------------------------------------------- shell


async def test_missing_paths_are_picked_in_app(demo_ws: DemoWorkspace) -> None:
    app = FvConsoleApp(ConsoleState())
    async with running(app, SIZE) as pilot:
        assert any("not set" in m for m in notifications(app))
        await press(app, pilot, "o")
        assert isinstance(app.screen, PathsScreen)
        box = app.screen.query_one("#path-config")
        box.value = demo_ws.config_path[:-2]
        for _ in range(500):  # the completion is computed in a thread
            if input_suggestion(box):
                break
            await pilot.pause(0.01)
        assert input_suggestion(box) == demo_ws.config_path
        await pilot.press("right")  # accept the path completion ("run.yaml")
        await pilot.press("enter")
        await started(app, pilot)
        assert app.state.run_config is not None
        assert app.state.checkpoints_path == demo_ws.output_dir  # from training.checkpoint.output_dir
        assert app.query_one("#ckpt-table").row_count == 5


#: How the help screen writes Textual's key names (the rest as they are: ctrl+r, j, G).
SHOWN_KEYS = {"slash": "/", "question_mark": "?", "escape": "Esc", "enter": "Enter", "space": "Space",
              "home": "Home", "end": "End", "less_than_sign": "<", "greater_than_sign": ">", "asterisk": "*",
              "tab": "Tab", "shift+tab": "Shift+Tab"}


def declared_bindings() -> list[tuple[type, object]]:
    """Every binding the app, the views and the tables declare themselves (refusals excluded)."""
    from fvconsole.tui.base import BaseView
    from fvconsole.tui.checkpoints.view import CheckpointsView
    from fvconsole.tui.fleet.view import FleetView
    from fvconsole.tui.widgets.tables import FastTable

    out = []
    for cls in (FvConsoleApp, BaseView, FastTable, CheckpointsView, MigrationView, CacheView, FleetView):
        out += [(cls, b) for b in cls.__dict__["BINDINGS"] if not b.action.startswith("refuse")]
    return out


async def test_help_and_palette_list_every_binding(work: dict[str, str]) -> None:
    bindings = declared_bindings()
    assert len(bindings) > 25
    app = make_app(**work)
    async with running(app, (200, 60)) as pilot:
        await pilot.press("4")
        await pilot.press("escape")  # from the fleet form back to its table, so ? is a key, not text
        await press(app, pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.query_one("#help-keys")
        console = Console(width=keys.size.width, file=io.StringIO(), record=True, color_system=None)
        console.print(keys.content)
        shown = " ".join(console.export_text().split())
        for cls, binding in bindings:
            assert binding.tooltip, f"{cls.__name__}: {binding.key} has no help text"
            assert " ".join(binding.tooltip.split()) in shown, (cls.__name__, binding.key)
            for key in binding.key.split(","):
                assert SHOWN_KEYS.get(key, key) in shown, (cls.__name__, key)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for cls, binding in bindings:
            if cls.__name__.endswith("View") and cls.__name__ != "BaseView":
                view_title = cls.TITLE.split(" ", 1)[1]
                assert f"{view_title}: {binding.description}" in titles, (cls.__name__, binding.key)


async def test_help_headings_palette_views_dialog_reasons_and_unset_paths_read_right(work: dict[str, str]) -> None:
    from fvconsole.tui.app import VIEWS

    app = make_app(**work)
    async with running(app, (80, 24)) as pilot:
        # ? : a view with no keys of its own says so under its heading.
        await press(app, pilot, "question_mark")
        keys = app.screen.query_one("#help-keys")
        console = Console(width=keys.size.width, file=io.StringIO(), record=True, color_system=None)
        console.print(keys.content)
        text = console.export_text()
        after = text.rsplit("5 History", 1)[1].lstrip().splitlines()[0]  # the heading: the last one
        assert "no keys of its own" in after, after
        await press(app, pilot, "escape")
        # The palette: each view key says which view it shows.
        helps = [c.help for c in app.get_system_commands(app.screen) if c.title in
                 {cls.TITLE.split(" ", 1)[1] for _n, cls in VIEWS}]
        assert len(helps) == len(VIEWS) == len(set(helps)), helps
        # The eviction dialog: a long reason wraps under its reason column, not to the line's start.
        await press(app, pilot, "3", "i")
        body = app.screen.query_one("#evict-preview")
        region = body.content_region.intersection(app.screen.query_one("#dialog-body").content_region)
        lines = [line_slice(line, region.x, region.right).rstrip()
                 for line in screen_lines(app)[region.y:region.bottom]]
        lines = [line for line in lines if line.strip() and "▂" not in line and "▃" not in line]
        heads = re.compile(r"^(\d+ to evict|\d+ left in place|[✓✗] )")
        entry = re.compile(r"^  [0-9a-f]{16}  ")
        assert any(entry.match(line) for line in lines), lines
        for line in lines:
            assert heads.match(line) or entry.match(line) or line.startswith(" " * 20), (line, lines)
        await press(app, pilot, "escape")

    # The paths line with nothing set: words, never elided as if a path.
    bare = make_app()
    async with running(bare, (80, 24)) as pilot:
        await settle(bare, pilot)
        shown = bare.query_one("#paths").render().plain
        assert "…" not in shown and shown.count("not set") == 3, shown


async def test_palette_has_fleet_actions_and_picked_root_reaches_fleet(work: dict[str, str], tmp_path) -> None:
    from textual.widgets import Input

    from fvconsole.tui.fleet.view import FleetView

    app = make_app(**work)
    notified = Notified(app)  # kept as raised: the first one may expire before the last check on a loaded machine
    async with running(app, SIZE) as pilot:
        titles = {c.title: c for c in app.get_system_commands(app.screen)}
        for title in ("Fleet", "Fleet: Scan", "Fleet: Evict invalid", "Fleet: Evict key", "Fleet: Evict to cap"):
            assert title in titles
        await titles["Fleet: Evict key"].callback()  # switches to the view, then explains
        await settle(app, pilot)
        assert app.query_one("#views").active == "fleet"
        assert any("scan first" in m or "select a key" in m for m in notified())
        fleet_root = app.query_one(FleetView).query_one("#fleet-root", Input)
        assert fleet_root.value == work["cache"]
        new_root = str(tmp_path / "other-cache")
        os.mkdir(new_root)
        await press(app, pilot, "escape", "o")
        assert isinstance(app.screen, PathsScreen)
        app.screen.query_one("#path-cache_root").value = new_root
        await pilot.press("enter")
        await started(app, pilot)
        assert app.state.cache_root == new_root
        assert fleet_root.value == new_root
        fleet_root.value = "/scratch/{node}/wc"  # an edited (per-node) root is not overwritten
        await press(app, pilot, "escape", "o")
        app.screen.query_one("#path-cache_root").value = work["cache"]
        await pilot.press("enter")
        await started(app, pilot)
        assert fleet_root.value == "/scratch/{node}/wc"
        await pilot.press("r")
        assert any("nothing scanned yet" in m for m in notified())


async def test_escape_leaves_a_form_field_so_view_keys_work(work: dict[str, str]) -> None:
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        await press(app, pilot, "2")
        app.query_one("#mig-step").focus()
        await pilot.press("1")
        assert app.query_one("#mig-step").value == "1"  # typing in a field is typing
        await pilot.press("escape")
        assert app.focused is app.query_one("#mig-ranks")
        await press(app, pilot, "1")
        assert app.query_one("#views").active == "checkpoints"


# --------------------------------------------------------------------------- preview parity


async def test_preview_refuses_foreign_output_dir_like_the_cli_dry_run(work: dict[str, str], tmp_path,
                                                                       capsys) -> None:
    out = tmp_path / "sidecars"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    ckpt = os.path.join(work["output"], "checkpoint-300")
    code = cli_main(migrate_argv(work["config"], ckpt, out, step=300, world=8, consumed=600, extra=("--json",)))
    assert code == 1
    cli_refusals = json.loads(capsys.readouterr().out)["refusals"]
    assert [r["field"] for r in cli_refusals] == ["output_dir"]
    app = make_app(**work)
    async with app.run_test(size=SIZE) as pilot:
        await preview_300(app, pilot, str(out))
        banner = app.query_one("#mig-banner")
        text = " ".join(str(banner.render()).split())
        assert "REFUSED" in text and banner.has_class("refused")
        cli_text = " ".join(cli_refusals[0]["message"].split())
        assert "(--output-dir)" in cli_text  # the CLI names its flag; the console does not
        assert cli_text.replace(" (--output-dir)", "").split(": ", 1)[1] in text and "--" not in text
        assert app.query_one("#mig-execute").disabled
        assert app.query_one("#mig-ranks").row_count == 0
        await press(app, pilot, "ctrl+e")
        assert not isinstance(app.screen, ConfirmScreen)
    assert sorted(os.listdir(out)) == ["notes.txt"]


async def test_verify_shows_fastvideos_validation_when_it_holds(work: dict[str, str]) -> None:
    validated = os.path.join(work["output"], "dataloader-state", "validated-100")
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        await select_checkpoint(app, pilot, 100)
        await press(app, pilot, "m")
        app.query_one("#mig-output").value = validated
        await press(app, pilot, "ctrl+y")
        banner = " ".join(str(app.query_one("#mig-banner").render()).split())
        assert "verify: 8 sidecars match" in banner
        assert "validated in FastVideo's loader on 8 ranks at 20" in banner
        receipt = os.path.join(validated, "fastvideo-validation.json")
        with open(receipt) as fh:
            doc = json.load(fh)
        doc["results"][2]["sidecar_sha256"] = "f" * 64
        with open(receipt, "w") as fh:
            json.dump(doc, fh)
        await press(app, pilot, "ctrl+y")
        banner = " ".join(str(app.query_one("#mig-banner").render()).split())
        assert "verify failed" in banner and "rank 2: dataloader_state_rank2.pt sha256" in banner


async def test_next_sample_ids_fill_the_rank_table(work: dict[str, str]) -> None:
    app = make_app(**work)
    async with app.run_test(size=SIZE) as pilot:
        await preview_300(app, pilot)
        view = app.query_one(MigrationView)
        table = app.query_one("#mig-ranks")
        plan = view._preview.plan
        assert table.row_count == plan.world_size == 8
        assert view.next_ids_note is None
        for cursor in plan.ranks:
            row = table.get_row_at(cursor.rank)
            # The demo dataset's id column is "sample-%06d" of the global sample index.
            expected = f"sample-{cursor.next_sample_index:06d}" if cursor.next_row_group >= 0 else "-"
            assert row[-1] == expected, (cursor, row)


def test_next_sample_ids_are_bounded(demo_ws: DemoWorkspace) -> None:
    from fvconsole.core.migration.plan import MigrationRequest, preview_migration
    from fvconsole.core.migration.sample_ids import next_sample_ids

    request = MigrationRequest(config_path=demo_ws.config_path, checkpoint=demo_ws.legacy_checkpoint,
                               output_dir="/nonexistent/out", expected_step=300, expected_world_size=8,
                               consumed_batches_per_rank=600)
    plan = preview_migration(request).plan
    distinct = {c.next_row_group for c in plan.ranks if c.next_row_group >= 0}
    assert len(distinct) > 1
    full = next_sample_ids(plan)
    assert full.too_many_row_groups is None and full.problems == ()
    assert full.row_groups_read == len(distinct) and len(full.ids) == 8
    skipped = next_sample_ids(plan, max_row_groups=len(distinct) - 1)
    assert skipped.ids == {} and skipped.row_groups_read == 0 and skipped.too_many_row_groups == len(distinct)


# --------------------------------------------------------------------------- a dead holder's lock (D43)


def killed_holder(code: str, *args: str) -> int:
    """Run ``code`` (it takes a lock, then says ``held``) in a real child, SIGKILL it once it holds
    the lock: its lock file or holder record stays, as after the OOM killer. → its pid."""
    import subprocess
    import sys

    with subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout.readline() == "held\n"
        proc.kill()
    return proc.pid


async def test_a_migration_that_takes_over_a_dead_runs_lock_says_so(work: dict[str, str], tmp_path,
                                                                     monkeypatch) -> None:
    """D43: `migrate --yes` prints "warning: … took over the stale lock of pid N …" and journals
    it; the console's done banner said nothing of it."""
    journal = tmp_path / "journal.jsonl"
    monkeypatch.setenv("FVCONSOLE_JOURNAL", str(journal))
    app = make_app(**work)
    async with app.run_test(size=SIZE) as pilot:
        out = await preview_300(app, pilot)
        assert app.query_one("#mig-ranks").row_count == 8
        os.makedirs(os.path.dirname(out), exist_ok=True)
        pid = killed_holder("import sys; from fvconsole.core.migration.output_dir import migration_lock; "
                            "migration_lock(sys.argv[1]).acquire(); print('held', flush=True); sys.stdin.read()", out)
        lock_file = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.fvconsole-lock")
        assert json.loads(Path(lock_file).read_text())["pid"] == pid  # the dead run's lock, as it left it
        await execute_confirmed(app, pilot)
        banner = " ".join(str(app.query_one("#mig-banner").render()).split())
        assert "✓ done: 8 sidecars" in banner, banner
        assert f"took over the stale lock of pid {pid} " in banner and "no longer running" in banner, banner
    assert not os.path.exists(lock_file)
    [line] = [json.loads(x) for x in journal.read_text().splitlines()]
    assert f"pid {pid} " in line["details"]["lock_taken_over"]


async def test_an_eviction_that_takes_over_a_dead_evictors_record_says_so(work: dict[str, str], tmp_path,
                                                                          monkeypatch) -> None:
    """D43: `cache evict --yes` warns that it took over the record of an evictor that died; the
    console's result pane and notification said nothing of it."""
    from fvconsole.core.cache.roots import EVICTOR

    journal = tmp_path / "journal.jsonl"
    monkeypatch.setenv("FVCONSOLE_JOURNAL", str(journal))
    pid = killed_holder("import sys; from fvconsole.core.cache.roots import evictor_lock; "
                        "evictor_lock(sys.argv[1], command='fvconsole cache evict --yes (killed)').acquire(); "
                        "print('held', flush=True); sys.stdin.read()", work["cache"])
    record = EVICTOR.record(os.path.realpath(work["cache"]))
    assert json.loads(Path(record).read_text())["pid"] == pid  # the dead evictor's record, as it left it
    app = make_app(**work)
    async with running(app, SIZE) as pilot:
        view = app.query_one(CacheView)
        victim = next(e.key for e in view._entries if e.status == "complete")
        await evict_marked(app, pilot, [victim])
        result = " ".join(str(app.query_one("#cache-result").render()).split())
        assert "evicted 1" in result, result
        assert "took over" in result and f"pid {pid}" in result, result
        assert any("took over" in m and f"pid {pid}" in m for m in notifications(app)), notifications(app)
    [line] = [json.loads(x) for x in journal.read_text().splitlines()]
    assert f"pid {pid}" in line["details"]["lock_taken_over"]
