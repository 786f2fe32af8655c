"""Everything the console draws fits at 80×24 (issue 21, items 1 and 2).

Every dialog opened on the demo's real contents under a long path keeps its buttons on
screen, reachable with Tab and drawn on top; every visible table cell is its value, or its
value ellipsised (``…`` at the end, or a path elided in the middle that keeps its end).
The real app on a real demo workspace, driven with ``run_test``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable

import pytest
from console_apps import run_console, running, shown_notifications, work_copy
from textual.widgets import Button
from tour import check_cells, check_tables, drawn_form_of, line_slice, press, screen_lines, settle

from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.state import ConsoleState
from fvconsole.tui.widgets.tables import FastTable

pytestmark = pytest.mark.tui

#: A run directory as deep and as long as real ones (issue 21's reproduction).
LONG = os.path.join("projects", "video-generation", "wan2.1-t2v", "run-2026-11-30-finetune-ablation")


@pytest.fixture(scope="session")  # a lookup in the session's cache: no reason to keep the file in one worker
def demo_ws(demo_workspace) -> DemoWorkspace:
    return demo_workspace(LONG)


@pytest.fixture
def work(demo_ws: DemoWorkspace, tmp_path) -> dict[str, str]:
    """Copies of the demo's output dir and cache under a long path: tests write into them."""
    return work_copy(demo_ws, tmp_path / LONG)


def run(work: dict[str, str], size: tuple[int, int], body: Callable[[FvConsoleApp, object], Awaitable[None]]) -> None:
    run_console(work, size, body, timeout=300)


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
    await press(app, pilot, *keys)


#: The cache's filesystem as the free-space cases see it (frozen, as in the screenshots: the real
#: free space would decide whether a target is reachable): 1 GiB free of 100 GiB.
SPACE = (1 << 30, 100 << 30)


def test_every_dialog_keeps_its_buttons_on_screen_at_80x24(work: dict[str, str]) -> None:
    """The free-space target is checked both ways on the frozen :data:`SPACE`: one that evicting
    the demo's entries reaches (1 GiB and a few KiB free), and 99%, which nothing reaches: that
    dialog offers no Continue (it evicts nothing for the target) until *best effort* is ticked."""
    from fvconsole.tui import state

    async def body(app: FvConsoleApp, pilot) -> None:
        from fvconsole.tui.cache.evict_dialog import EvictScreen
        from fvconsole.tui.modals import ConfirmScreen, HelpScreen, PathsScreen

        await open_dialog(app, pilot, "3")
        cases = [("evict invalid", ("i",), None, None), ("evict marked", ("A", "e"), None, None),
                 ("evict to cap", ("c",), "#evict-cap", "0.0000001"),
                 ("evict to a reachable free space", ("f",), "#evict-free-gb", "1.00001"),
                 ("evict to an unreachable free space", ("f",), "#evict-free-pct", "99")]
        for name, keys, field, value in cases:
            await open_dialog(app, pilot, *keys)
            assert isinstance(app.screen, EvictScreen), name
            if value is not None:
                app.screen.query_one(field).value = value
                await settle(app, pilot)
            continue_button = app.screen.query_one("#evict-continue", Button)
            assert continue_button.disabled == name.endswith("unreachable free space"), name
            await check_buttons(app, pilot, name)
            if continue_button.disabled:  # nothing is evicted for it, and the dialog says so
                assert any("cannot be reached" in line for line in screen_lines(app)), name
                app.screen.query_one("#evict-best-effort").value = True
                await settle(app, pilot)
                assert not continue_button.disabled, name
                await check_buttons(app, pilot, f"{name}: best effort")
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
        table = app.query_one("#ckpt-table", FastTable)
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

    state.freeze_free_space(SPACE)
    try:
        run(work, (80, 24), body)
    finally:
        state.freeze_free_space(None)


# --------------------------------------------------------------------------- table cells


def test_drawn_form_of_accepts_only_marked_shortenings() -> None:
    assert drawn_form_of("sample-000284", "sample-000284")
    assert drawn_form_of("sample-0002…", "sample-000284")
    assert not drawn_form_of("sample-00028", "sample-000284")
    assert drawn_form_of("/tmp/…/migrated/checkpoint-300", "/tmp/a/b/migrated/checkpoint-300")
    assert drawn_form_of("…/migrated/checkpoint-300", "/tmp/a/b/migrated/checkpoint-300")
    assert drawn_form_of("…ckpoint-300", "/tmp/a/b/migrated/checkpoint-300")
    assert not drawn_form_of("…/case-006/migrated/s", "/tmp/case-006/migrated/sidecars")
    assert not drawn_form_of("…ecars-of-checkpoint-30", "/tmp/a/sidecars-of-checkpoint-300")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_every_table_cell_is_its_value_or_marked_as_shortened(work: dict[str, str], size, tmp_path,
                                                               monkeypatch, fleet_nodes) -> None:
    from fvconsole.core.journal.log import JournalRecord, append_record

    journal = str(tmp_path / "journal.jsonl")
    monkeypatch.setenv("FVCONSOLE_JOURNAL", journal)
    long_target = os.path.join(work["output"], "dataloader-state", "case-006", "migrated", "sidecars-of-checkpoint-300")
    for i, (action, target) in enumerate((("migrate", long_target), ("cache evict", work["cache"]))):
        append_record(JournalRecord(action=action, target=target, result="partial", exit_code=3, bytes=123456789,
                                    items=("a", "b"), errors=("x",), time=1_795_000_000.0 + i,
                                    user="a-very-long-user-name", host="login-node-0042.cluster.example.org",
                                    pid=4242), journal)

    async def body(app: FvConsoleApp, pilot) -> None:
        await open_dialog(app, pilot, "1")
        assert check_cells(app, "#ckpt-table") >= 5
        table = app.query_one("#ckpt-table", FastTable)
        keys = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]
        table.move_cursor(row=keys.index(os.path.join(work["output"], "checkpoint-300")))
        await open_dialog(app, pilot, "m", "ctrl+r")
        await settle(app, pilot)
        assert check_cells(app, "#mig-ranks") >= 8
        await open_dialog(app, pilot, "3")
        assert check_cells(app, "#cache-table") >= 5
        await open_dialog(app, pilot, "5")
        assert check_cells(app, "#hist-table") >= 2 * 4
        # 4 Fleet: long node names, a long root and long keys, scanned by the real dispatcher
        # through the stand-in srun.
        await open_fleet(app, pilot, fleet_nodes)
        assert check_cells(app, "#fleet-node-table") >= 3 * 3
        assert check_cells(app, "#fleet-matrix") >= 2 * 3

    run(work, size, body)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
def test_the_lean_installs_next_id_cells_are_whole_or_marked(work: dict[str, str], size, monkeypatch) -> None:
    # Without pyarrow (the base install) every "next id" cell is "-" and one note under the table
    # names the extra (it was the install hint in every cell, which at 120x40 ran off the screen's
    # edge unmarked, "install fvcons"). The snapshot tour checks every other table at these sizes
    # (tests/tui/test_tui_snapshots.py).
    from lean_checks import PARQUET_HINT, preview_next_ids, table_note

    for name in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, name, None)

    async def body(app: FvConsoleApp, pilot) -> None:
        assert set(await preview_next_ids(app, pilot)) == {"-"}
        assert PARQUET_HINT in table_note(app)
        assert check_tables(app) >= 8

    run(work, size, body)


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
def test_a_long_cache_listing_fits_beside_its_scrollbar(tmp_path, size) -> None:
    # More entries than rows on screen: the table has a vertical scrollbar, and its columns
    # (70 cells) still fit beside it. In a 70-cell table the scrollbar covered the last-used
    # column's end, unmarked ("1100d 3h a"), and a horizontal scrollbar appeared.
    import time

    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path / "cache"
    long_ago = time.time() - 1100 * 86400  # the widest ages: "1100d 3h ago"
    for i in range(80):
        write_cache_entry(root, num_shards=1, tensor_bytes=64, last_used=long_ago - i * 3600, seed=i)

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "3")
        table = app.query_one("#cache-table", FastTable)
        assert table.row_count == 80 and table.show_vertical_scrollbar
        assert not table.show_horizontal_scrollbar
        assert table.virtual_size.width <= table.scrollable_content_region.width
        assert check_cells(app, table) >= 6 * 20
        await press(app, pilot, "pagedown")
        assert table.cursor_row > 20
        assert check_cells(app, table) >= 6 * 20

    run({"cache": str(root)}, size, body)


def test_a_cell_cut_by_the_view_is_marked_left_of_the_scrollbar() -> None:
    # A table that scrolls sideways and down (the fleet's matrix of many keys): the cell the
    # view cuts ends with "…" in the last column shown, not under the vertical scrollbar.
    from textual.app import App

    from fvconsole.tui.widgets.tables import FastTable

    class Wide(App[None]):
        def compose(self):
            yield FastTable(id="wide", cursor_type="row")

        def on_mount(self) -> None:
            table = self.query_one(FastTable)
            for i in range(8):
                table.add_column(f"column {i}", key=f"c{i}", width=12)
            for r in range(60):
                table.add_row(*(f"row{r:02d}-cell{i}-x" for i in range(8)), key=str(r))

    async def main() -> None:
        app = Wide()
        async with app.run_test(size=(50, 20)) as pilot:
            await pilot.pause()
            table = app.query_one(FastTable)
            assert table.show_vertical_scrollbar and table.show_horizontal_scrollbar
            lines = screen_lines(app)
            region = table.scrollable_content_region
            assert region.right < table.content_region.right  # the scrollbar's columns
            for y in range(region.y, region.bottom):
                assert lines[y][region.right - 1] == "…", lines[y]
            assert check_cells(app, table, lines) >= 3 * 10

    asyncio.run(main())


@pytest.fixture
def fleet_nodes(tmp_path) -> dict[str, str]:
    """Three nodes with long names whose caches (under a long root) hold long keys."""
    from slurm_cluster import write_fake_srun

    from fvconsole.demo.cache_builders import make_key, write_cache_entry

    nodes = [f"dgx-h100-rack07-node-{i:04d}" for i in (1, 2, 3)]
    for i, node in enumerate(nodes):
        root = tmp_path / "fleet" / node / LONG / "shard-cache"
        write_cache_entry(root, make_key("wan2.1-t2v-14b-finetune"), num_shards=3, present=[i],
                          status="partial" if i == 0 else "incomplete", tensor_bytes=256)
        write_cache_entry(root, make_key(f"text-encoder-umt5-xxl-{i}"), num_shards=1, status="complete",
                          tensor_bytes=256)
    return {"nodes": "dgx-h100-rack07-node-[0001-0003]", "srun": write_fake_srun(tmp_path / "bin"),
            "root": str(tmp_path / "fleet" / "{node}" / LONG / "shard-cache")}


async def open_fleet(app: FvConsoleApp, pilot, fleet: dict[str, str]) -> None:
    from textual.widgets import Input

    from fvconsole.core.fleet.ops import SrunDispatcher
    from fvconsole.tui.fleet.view import FleetView

    await open_dialog(app, pilot, "4")
    view = app.query_one(FleetView)
    view.query_one("#fleet-job", Input).value = ""
    view.query_one("#fleet-nodes", Input).value = fleet["nodes"]
    view.query_one("#fleet-root", Input).value = fleet["root"]
    view.dispatcher = SrunDispatcher(timeout=60, srun=fleet["srun"])
    view.action_scan()
    await settle(app, pilot)
    await settle(app, pilot)
    assert view.view_result is not None and view.view_result.exit_code == 0, view.view_result
    view.query_one("#fleet-matrix", FastTable).focus()
    await settle(app, pilot)


# --------------------------------------------------------------------------- keys that spoke too little


def messages(app: FvConsoleApp) -> list[str]:
    return [f"{n.title} {n.message}" for n in shown_notifications(app)]


def test_read_only_palette_actions_say_why_like_their_key(work: dict[str, str]) -> None:
    app = FvConsoleApp(ConsoleState(config_path=work["config"], checkpoints_path=work["output"],
                                    cache_root=work["cache"], read_only=True))

    async def main() -> None:
        async with running(app, (120, 40)) as pilot:
            await press(app, pilot, "ctrl+p")
            await press(app, pilot, *"Evict marked")
            await press(app, pilot, "enter")
            assert any("read-only" in m and "evict marked" in m for m in messages(app)), messages(app)

    asyncio.run(asyncio.wait_for(main(), 120))


def test_ctrl_c_says_how_to_quit_without_markup_and_q_waits_for_a_running_write(work: dict[str, str]) -> None:
    async def body(app: FvConsoleApp, pilot) -> None:
        from fvconsole.tui.cache.view import CacheView

        await pilot.press("ctrl+c")
        await pilot.pause()
        said = " ".join(messages(app))
        assert "quit" in said and "[b]" not in said and "[/b]" not in said, said
        view = app.query_one(CacheView)
        view._busy = True  # an eviction runs (its worker holds this until it has finished)
        await pilot.press("q")
        await pilot.pause()
        assert not app.exiting, "q quit in the middle of a write"
        assert any("quits when it has finished" in m for m in messages(app)), messages(app)
        view._busy = False
        await pilot.pause()
        await pilot.pause()
        assert app.exiting, "the q pressed during the write was lost"

    run(work, (80, 24), body)


# --------------------------------------------------------------------------- which run this is


def test_paths_line_and_unfocused_path_fields_show_which_run_at_80x24(work: dict[str, str]) -> None:
    """Issue 21 item 6: ``config …/run.yaml   checkpoints /tmp/…/output`` hid the run; each path
    keeps its last name whole and the end of the run's directory name in the room left."""
    run_name = os.path.basename(LONG)

    async def body(app: FvConsoleApp, pilot) -> None:
        line = screen_lines(app)[1]
        for label, name in (("config", "run.yaml"), ("checkpoints", "output"), ("cache", "shard-cache")):
            shown = line.split(f"{label} ", 1)[1].split("   ", 1)[0]
            assert shown.startswith("…") and shown.endswith("/" + name), (label, line)
            end = shown[1:-len("/" + name)]
            assert len(end) >= 4 and run_name.endswith(end), (label, shown, line)
        table = app.query_one("#ckpt-table", FastTable)
        keys = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]
        table.move_cursor(row=keys.index(os.path.join(work["output"], "checkpoint-300")))
        await open_dialog(app, pilot, "m")
        output = app.query_one("#mig-output")
        assert not output.has_focus
        drawn = output.render_line(0).text.strip()
        rest = "/output/dataloader-state/checkpoint-300"
        assert drawn.startswith("…") and drawn.endswith(rest), drawn
        assert len(drawn) - len(rest) > 8 and run_name.endswith(drawn[1:-len(rest)]), drawn

    run(work, (80, 24), body)


# --------------------------------------------------------------------------- focus (item 7)


def test_tab_stays_in_the_view_and_the_focused_pane_is_titled(work: dict[str, str]) -> None:
    """The first Tab from the rank table landed on the tab bar (and the footer lost the view's
    keys); focus showed only as a colour. Tab now cycles within the view, and the focused
    detail pane's border title is marked."""
    from fvconsole.tui.base import BaseView

    async def body(app: FvConsoleApp, pilot) -> None:
        for key, pane in (("1", "#ckpt-detail-scroll"), ("3", "#cache-detail-scroll"), ("5", "#hist-detail-scroll"),
                          ("2", None)):
            await open_dialog(app, pilot, key)
            view = app.current_view()
            start = app.focused
            assert start is not None and view in start.ancestors, (key, start)
            seen = []
            for _ in range(25):
                await pilot.press("tab")
                await pilot.pause()
                focused = app.focused
                assert focused is not None and view in focused.ancestors, (key, focused, seen)
                assert any(b.node is view for b in app.active_bindings.values()), (key, focused)  # the view's keys
                seen.append(focused)
                if focused is start:
                    break
            assert app.focused is start, (key, "Tab never came back", seen)
            if pane is None:
                continue
            detail = app.query_one(pane)
            name = type(view).PANES[pane[1:]]
            assert detail.border_title == name and "▶" not in "".join(screen_lines(app)), key
            for _ in range(5):
                if detail.has_focus_within:
                    break
                await pilot.press("tab")
                await pilot.pause()
            assert detail.has_focus_within, key
            assert detail.border_title == f"▶ {name} ◀", key
            assert any(f"▶ {name} ◀" in line for line in screen_lines(app)), key
            assert isinstance(view, BaseView)

    run(work, (80, 24), body)


def test_the_critical_mismatch_is_on_screen_without_scrolling_at_80x24(work: dict[str, str]) -> None:
    """The demo's checkpoint-200 was saved with seed 7, its run config says 42 (demo/workspace.py):
    selecting it shows that mismatch at once, not three keys later."""

    async def body(app: FvConsoleApp, pilot) -> None:
        table = app.query_one("#ckpt-table", FastTable)
        keys = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]
        table.move_cursor(row=keys.index(os.path.join(work["output"], "checkpoint-200")))
        await settle(app, pilot)
        await settle(app, pilot)
        detail = app.query_one("#ckpt-detail-scroll")
        assert detail.scroll_y == 0
        region = detail.content_region
        lines = screen_lines(app)[region.y:region.bottom]
        hits = [line for line in lines if "training.data.seed" in line]
        assert hits and "7" in hits[0] and "42" in hits[0], lines
        assert any("critical" in line for line in lines), lines

    run(work, (80, 24), body)


# --------------------------------------------------------------------------- the footer's f (item 8)


@pytest.mark.parametrize("size", [(200, 60), (120, 40)])
def test_the_footer_shows_f_where_it_has_room(work: dict[str, str], size) -> None:
    """``f`` (evict to free space) was never in the footer, even at 200 columns."""

    async def body(app: FvConsoleApp, pilot) -> None:
        await open_dialog(app, pilot, "3")
        footer = screen_lines(app)[-1]
        assert "f Evict to free space" in footer, footer
        assert "e Evict marked" in footer and "q Quit" in footer, footer
        await pilot.resize_terminal(80, 24)  # narrower: f leaves the footer, the key still works
        await settle(app, pilot)
        footer = screen_lines(app)[-1]
        assert "f Evict" not in footer and "q Quit" in footer, footer
        await open_dialog(app, pilot, "f")
        from fvconsole.tui.cache.evict_dialog import EvictScreen

        assert isinstance(app.screen, EvictScreen)

    run(work, size, body)


# --------------------------------------------------------------------------- long paths in panels (D42)


def path_on_screen(app: FvConsoleApp, widget_id: str, path: str) -> str:
    """The form of ``path`` drawn in ``widget_id``: the one line there ending with its last name."""
    region = app.query_one(widget_id).region
    lines = [line_slice(line, region.x, region.right).strip() for line in screen_lines(app)[region.y:region.bottom]]
    name = os.path.basename(path)
    ends = [line.split()[-1] for line in lines if line.endswith(name) and "/" in line]
    assert ends, (widget_id, name, lines)
    return ends[0]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
def test_long_paths_in_headers_and_details_are_shortened_in_the_middle_not_wrapped(work: dict[str, str],
                                                                                   size) -> None:
    """D42: the checkpoints view's header and detail (and the cache view's) wrapped a long path
    mid-name (``…/run-2026-11-30-finetu`` / ``ne-ablation/output``). Each path is one line: whole,
    or its middle elided with ``…`` keeping its end; ``y`` copies the checkpoint's full path."""
    checkpoint = os.path.join(work["output"], "checkpoint-300")

    async def body(app: FvConsoleApp, pilot) -> None:
        table = app.query_one("#ckpt-table", FastTable)
        keys = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]
        table.move_cursor(row=keys.index(checkpoint))
        await settle(app, pilot)
        await settle(app, pilot)
        for widget_id, path in (("#ckpt-banner", work["output"]), ("#ckpt-detail", checkpoint)):
            drawn = path_on_screen(app, widget_id, path)
            assert drawn_form_of(drawn, path), (widget_id, drawn, size)
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == checkpoint
        await open_dialog(app, pilot, "3")
        await settle(app, pilot)
        entry = app.query_one("#cache-table", FastTable).coordinate_to_cell_key((0, 0)).row_key.value
        for widget_id, path in (("#cache-root-line", work["cache"]), ("#cache-detail", os.path.join(work["cache"], entry))):
            drawn = path_on_screen(app, widget_id, path)
            assert drawn_form_of(drawn, path), (widget_id, drawn, size)

    run(work, size, body)
