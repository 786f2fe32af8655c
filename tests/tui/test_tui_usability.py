"""The console at the k9s / lazygit / ncdu standard (issue 13): readable and usable at 80×24,
paths that keep their ends, focus that is visible and predictable, keys people know, the
console's own words instead of CLI flags, marks with totals, eviction with cap and force,
migrated checkpoints recognised, live ages and auto-refresh, a fleet view that says what it
needs. The real app on a real demo workspace, driven with ``run_test``.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Awaitable, Callable

import pytest
from console_apps import Notified, run_console, shown_notifications, wait_until, work_copy
from tour import line_slice, press, screen_lines, settle

from fvconsole.cli import main as cli_main
from fvconsole.core.cache import scan_cache
from fvconsole.core.shared import human_bytes
from fvconsole.demo.cache_builders import write_cache_entry
from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui import state
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.cache import view as cache_view
from fvconsole.tui.cache.evict_dialog import EvictScreen
from fvconsole.tui.modals import ConfirmScreen, HelpScreen

pytestmark = pytest.mark.tui
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


@pytest.fixture
def work(demo_ws: DemoWorkspace, tmp_path) -> dict[str, str]:
    """Copies of the demo's output dir and cache: tests may write into them."""
    return work_copy(demo_ws, tmp_path, cache_name="cache")


def run(work: dict[str, str], size: tuple[int, int], body: Callable[[FvConsoleApp, object], Awaitable[None]]) -> None:
    run_console(work, size, body, timeout=180)


def screen_text(app: FvConsoleApp) -> str:
    """What the terminal shows, as text (the SVG export's text: the same strips the terminal gets)."""
    svg = app.export_screenshot()
    lines = re.findall(r"<text [^>]*>([^<]*)</text>", svg)
    return html.unescape("".join(lines)).replace("\xa0", " ")


def visible_lines(app: FvConsoleApp) -> list[str]:
    """The screen as lines of text."""
    svg = app.export_screenshot()
    rows: dict[str, list[tuple[float, str]]] = {}
    for y, x, text in ((m.group(2), m.group(1), m.group(3)) for m in
                       re.finditer(r'<text [^>]*x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg)):
        rows.setdefault(y, []).append((float(x), html.unescape(text).replace("\xa0", " ")))
    return ["".join(t for _x, t in sorted(parts)) for _y, parts in sorted(rows.items(), key=lambda r: float(r[0]))]


def inside(app: FvConsoleApp, widget) -> bool:
    """Whether all of ``widget`` is on the screen."""
    region = widget.region
    width, height = app.size
    return region.width > 0 and region.height > 0 and region.right <= width and region.bottom <= height


def row_keys(table) -> list[str]:
    return [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]


# --------------------------------------------------------------------------- 80×24


def test_every_view_is_usable_at_80x24(work: dict[str, str]) -> None:
    async def body(app: FvConsoleApp, pilot) -> None:
        for digit, table_id, detail_id in (("1", "#ckpt-table", "#ckpt-detail-scroll"),
                                           ("3", "#cache-table", "#cache-detail-scroll")):
            await press(app, pilot, digit)
            table, detail = app.query_one(table_id), app.query_one(detail_id)
            assert inside(app, table) and table.region.height >= 5, (table_id, table.region)
            # The detail pane goes below the table at narrow widths: the whole width, not a sliver.
            assert inside(app, detail) and detail.region.width >= 70 and detail.region.height >= 3, detail.region
            assert app.focused is table
        footer_keys = list(app.screen.query("FooterKey"))
        assert footer_keys and all(inside(app, key) for key in footer_keys), "the footer is cut"
        # Migration: preview, then the rank table is on screen with its cursor.
        await press(app, pilot, "1")
        table = app.query_one("#ckpt-table")
        table.move_cursor(row=row_keys(table).index(os.path.join(work["output"], "checkpoint-300")))
        await press(app, pilot, "m", "ctrl+r")
        ranks = app.query_one("#mig-ranks")
        assert app.focused is ranks and ranks.row_count == 8
        assert inside(app, ranks) and ranks.region.height >= 9, ranks.region  # header + the 8 ranks
        assert ranks.virtual_size.width <= ranks.region.width, "rank table columns cut off at 80 columns"
        # The help dialog's Close button is on screen.
        await press(app, pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert inside(app, app.screen.query_one("#close"))

    run(work, (80, 24), body)


def test_paths_keep_their_end_when_narrow_and_show_whole_when_wide(work: dict[str, str]) -> None:
    out = os.path.join(work["output"], "dataloader-state", "checkpoint-300")
    assert len(out) > 50

    async def open_form(app: FvConsoleApp, pilot) -> None:
        table = app.query_one("#ckpt-table")
        table.move_cursor(row=row_keys(table).index(os.path.join(work["output"], "checkpoint-300")))
        await press(app, pilot, "m")

    async def narrow(app: FvConsoleApp, pilot) -> None:
        await open_form(app, pilot)
        box = app.query_one("#mig-output")
        assert box.value == out and not box.has_focus
        shown = box.render_line(0).text.strip()
        assert len(shown) < len(out) and shown.endswith("/dataloader-state/checkpoint-300"), shown
        assert "…" in shown
        paths_line = app.query_one("#paths").render().plain
        assert paths_line.count("…") >= 2 and paths_line.endswith(("/output   ", "/cache   "))
        assert "/output " in paths_line and "/cache " in paths_line

    async def wide(app: FvConsoleApp, pilot) -> None:
        await open_form(app, pilot)
        assert app.query_one("#mig-output").render_line(0).text.strip() == out

    run(work, (80, 24), narrow)
    run(work, (200, 60), wide)


# --------------------------------------------------------------------------- focus and keys


def test_escape_returns_to_the_table_and_digits_type_in_fields(work: dict[str, str]) -> None:
    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "2")
        for selector in ("#mig-overwrite", "#mig-verify", "#mig-step", "#mig-output"):
            app.query_one(selector).focus()
            await pilot.pause()
            await pilot.press("escape")
            assert app.focused is app.query_one("#mig-ranks"), selector
        app.query_one("#mig-step").focus()
        await pilot.press("3", "1")
        assert app.query_one("#views").active == "migration"
        assert app.query_one("#mig-step").value.endswith("31")
        await press(app, pilot, "4")
        app.query_one("#fleet-job").focus()
        await pilot.press("1", "2")
        assert app.query_one("#views").active == "fleet" and app.query_one("#fleet-job").value.endswith("12")
        await pilot.press("escape")
        assert app.focused is app.query_one("#fleet-matrix")
        await press(app, pilot, "1")
        app.query_one("#ckpt-detail-scroll").focus()
        await pilot.press("escape")
        assert app.focused is app.query_one("#ckpt-table")

    run(work, (120, 40), body)


def test_home_end_and_vim_keys_move_the_cursor(work: dict[str, str]) -> None:
    async def body(app: FvConsoleApp, pilot) -> None:
        table = app.query_one("#ckpt-table")
        assert app.focused is table and table.row_count == 5
        for key, row in (("end", 4), ("home", 0), ("j", 1), ("j", 2), ("k", 1), ("G", 4), ("g", 0)):
            await pilot.press(key)
            assert table.cursor_row == row, key

    run(work, (120, 40), body)


def test_sort_by_any_column_with_keys_and_header_clicks(work: dict[str, str]) -> None:
    entries = scan_cache(work["cache"]).entries
    by_size = [e.key for e in sorted(entries, key=lambda e: e.bytes, reverse=True)]

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "3")
        table = app.query_one("#cache-table")
        await pilot.press("s")  # ncdu: largest first
        assert row_keys(table) == by_size
        await pilot.press("s")
        assert row_keys(table) == by_size[::-1]
        await pilot.press("n")
        assert row_keys(table) == sorted(e.key for e in entries)
        # A click on the "size" header sorts by size; the header says which way.
        x = 1 + sum(table.columns[k].get_render_width(table) for k in list(table.columns)[:3]) + 2
        await pilot.click("#cache-table", offset=(x, 0))
        await settle(app, pilot)
        assert row_keys(table) == by_size
        assert "▼" in str(table.columns[list(table.columns)[3]].label)
        checkpoints = app.query_one("#ckpt-table")
        await press(app, pilot, "1")
        await pilot.press("greater_than_sign")  # htop: choose the sort column (the first: step, ascending)
        assert [int(k.rsplit("-", 1)[1]) for k in row_keys(checkpoints)] == [100, 200, 300, 400, 500]
        await pilot.press("less_than_sign")  # left of the first: the last column, age (youngest first)
        assert [int(k.rsplit("-", 1)[1]) for k in row_keys(checkpoints)] == [500, 400, 300, 200, 100]

    run(work, (120, 40), body)


# --------------------------------------------------------------------------- the console's own words


def test_refusals_and_skips_name_the_consoles_controls_not_cli_flags(work: dict[str, str]) -> None:
    async def body(app: FvConsoleApp, pilot) -> None:
        seen: list[str] = []
        notified = Notified(app)  # every notification of the walk, not only those not yet expired at its end
        table = app.query_one("#ckpt-table")
        table.move_cursor(row=row_keys(table).index(os.path.join(work["output"], "checkpoint-300")))
        await press(app, pilot, "m")
        app.query_one("#mig-step").value = "301"
        await press(app, pilot, "ctrl+r")
        banner = str(app.query_one("#mig-banner").render())
        assert "the form says 301" in banner and "metadata.json says step 300" in banner
        seen.append(screen_text(app))
        app.query_one("#mig-step").value = "300"
        await press(app, pilot, "ctrl+r")
        await press(app, pilot, "ctrl+e")
        await press(app, pilot, "left", "enter")
        await press(app, pilot, "ctrl+r")  # the set exists now: refused unless "overwrite" is ticked
        banner = str(app.query_one("#mig-banner").render())
        assert "tick “overwrite existing sidecars”" in banner, banner
        seen.append(screen_text(app))
        await press(app, pilot, "3")
        await press(app, pilot, "i")  # the demo cache has an entry being written: skipped as in use
        assert isinstance(app.screen, EvictScreen)
        preview = str(app.screen.query_one("#evict-preview").render())
        words = " ".join(preview.split())  # reasons wrap under their column
        assert "in use" in words and "tick “force”" in words, preview
        seen.append(screen_text(app))
        await press(app, pilot, "enter")
        assert isinstance(app.screen, ConfirmScreen)
        seen.append(screen_text(app))
        seen += notified()
        for text in seen:
            assert not FLAG.search(text), FLAG.findall(text)

    run(work, (200, 60), body)


# --------------------------------------------------------------------------- marks and eviction


def test_marks_show_a_running_count_and_size_with_select_all_invert_clear(work: dict[str, str]) -> None:
    entries = {e.key: e for e in scan_cache(work["cache"]).entries}

    def status(app) -> str:
        return str(app.query_one("#cache-status").render())

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "3")
        table = app.query_one("#cache-table")
        keys = row_keys(table)
        await pilot.press("home", "space", "space")
        marked = keys[:2]
        total = sum(entries[k].bytes for k in marked)
        assert app.query_one(cache_view.CacheView).marked == set(marked)
        assert "2 marked" in status(app) and human_bytes(total) in status(app)
        await pilot.press("asterisk")
        assert app.query_one(cache_view.CacheView).marked == set(keys) - set(marked)
        await pilot.press("U")
        assert app.query_one(cache_view.CacheView).marked == set()
        assert "none marked" in status(app)
        await press(app, pilot, "slash", *"invalid", "enter")
        await pilot.press("A")
        invalid = {k for k, e in entries.items() if e.status == "invalid"}
        assert invalid and app.query_one(cache_view.CacheView).marked == invalid
        assert f"{len(invalid)} marked" in status(app)

    run(work, (120, 40), body)


def test_evict_to_a_cap_set_in_the_dialog_with_force(work: dict[str, str]) -> None:
    entries = scan_cache(work["cache"]).entries
    total = sum(e.bytes for e in entries)
    cap_bytes = total // 2
    # FastVideo's GC: oldest first (no manifest counts as oldest), then size, then path, until under the cap.
    order = sorted(entries, key=lambda e: (e.last_used or 0.0, e.bytes, e.path))
    writing = next(e.key for e in entries if e.writing)

    def victims(skip: set[str]) -> list[str]:
        left, out = total, []
        for e in order:
            if left <= cap_bytes:
                break
            if e.key in skip:
                continue
            out.append(e.key)
            left -= e.bytes
        return out

    expected_plain, expected_forced = victims({writing}), victims(set())
    assert expected_plain != expected_forced

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "3")
        await press(app, pilot, "c")
        dialog = app.screen
        assert isinstance(dialog, EvictScreen) and app.focused is dialog.query_one("#evict-cap")
        dialog.query_one("#evict-cap").value = repr(cap_bytes / 2**30)
        await settle(app, pilot)
        preview = str(dialog.query_one("#evict-preview").render())
        assert all(k in preview for k in expected_plain) and f"{writing}  in use" in preview
        after = total - sum(e.bytes for e in entries if e.key in expected_plain)
        bar = dialog.query_one("#evict-usage").render().plain
        assert "after evict" in bar and human_bytes(after) in bar, bar
        dialog.query_one("#evict-force").value = True
        await settle(app, pilot)
        preview = str(dialog.query_one("#evict-preview").render())
        assert f"{len(expected_forced)} to evict" in preview
        dialog.query_one("#evict-continue").focus()
        await press(app, pilot, "enter")
        assert isinstance(app.screen, ConfirmScreen) and app.focused.id == "cancel"
        assert "force" in str(app.screen.query_one("#dialog-body PlainStatic").render())
        await press(app, pilot, "left", "enter")

    run(work, (200, 60), body)
    assert sorted(set(os.listdir(work["cache"])) & {e.key for e in entries}) == sorted(
        {e.key for e in entries} - set(expected_forced))


# --------------------------------------------------------------------------- migration state


def test_a_migrated_checkpoint_is_recognised_and_offered_after_a_restart(work: dict[str, str]) -> None:
    ckpt = os.path.join(work["output"], "checkpoint-300")
    out = os.path.join(work["output"], "dataloader-state", "checkpoint-300")
    assert cli_main(["migrate", "--config", work["config"], "--checkpoint", ckpt, "--output-dir", out,
                     "--expected-step", "300", "--expected-world-size", "8", "--consumed-batches-per-rank", "600",
                     "--yes"]) == 0
    export = f"export FASTVIDEO_DATALOADER_STATE_DIR={out}"

    async def body(app: FvConsoleApp, pilot) -> None:
        table = app.query_one("#ckpt-table")
        row = table.get_row(ckpt)
        assert str(row[2]) == "migrated" and str(row[3]) == "streaming" and str(row[4]) == "8", row
        assert str(table.get_row(os.path.join(work["output"], "checkpoint-200"))[2]) == "legacy"
        table.move_cursor(row=row_keys(table).index(ckpt))
        await settle(app, pilot)
        assert "view 2, y copies" in str(app.query_one("#ckpt-detail").render())  # whole or named: see below
        # The form offers the last migration, from its receipt.
        await press(app, pilot, "2")
        assert app.query_one("#mig-checkpoint").value == ckpt
        assert app.query_one("#mig-output").value == out
        assert (app.query_one("#mig-step").value, app.query_one("#mig-world").value,
                app.query_one("#mig-consumed").value) == ("300", "8", "600")
        assert app.query_one("#mig-export").text == export
        # The export line: one line on screen, no box characters around it, copied with y.
        line = next(line for line in visible_lines(app) if "export FASTVIDEO" in line)
        assert not set(line) & set("│┃╭╮╰╯║"), line
        app.query_one("#mig-ranks").focus()
        await pilot.press("y")
        assert app.clipboard == export
        assert any(f"sent to the terminal's clipboard: {export}" == str(n.message) for n in shown_notifications(app))
        await press(app, pilot, "ctrl+y")
        assert "verify: 8 sidecars match" in str(app.query_one("#mig-banner").render())

    run(work, (200, 60), body)


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
def test_the_detail_panes_export_line_is_whole_or_named_never_wrapped(work: dict[str, str], size) -> None:
    ckpt = os.path.join(work["output"], "checkpoint-300")
    out = os.path.join(work["output"], "dataloader-state", "checkpoint-300")
    assert cli_main(["migrate", "--config", work["config"], "--checkpoint", ckpt, "--output-dir", out,
                     "--expected-step", "300", "--expected-world-size", "8", "--consumed-batches-per-rank", "600",
                     "--yes"]) == 0
    export = f"export FASTVIDEO_DATALOADER_STATE_DIR={out}"

    async def body(app: FvConsoleApp, pilot) -> None:
        table = app.query_one("#ckpt-table")
        table.move_cursor(row=row_keys(table).index(ckpt))
        await settle(app, pilot)
        pane = app.query_one("#ckpt-detail")
        region = pane.content_region
        lines = [line_slice(line, region.x, region.right).rstrip() for line in screen_lines(app)[region.y:region.bottom]]
        if len(export) <= region.width:  # room: the whole line, on one screen line
            assert export in lines, lines
        else:  # no room: no piece of it on screen to be selected, the variable named instead
            assert not any("export FASTVIDEO" in line or line.startswith(out[-12:]) for line in lines), lines
            assert "FASTVIDEO_DATALOADER_STATE_DIR set to the dir above" in " ".join(lines), lines

    run(work, size, body)


def test_a_filter_with_no_match_clears_detail_and_counts(work: dict[str, str]) -> None:
    async def body(app: FvConsoleApp, pilot) -> None:
        table = app.query_one("#ckpt-table")
        table.move_cursor(row=1)
        await settle(app, pilot)
        assert "checkpoint-" in str(app.query_one("#ckpt-detail").render())
        await press(app, pilot, "slash", *"zzz")
        assert table.row_count == 0
        assert "No checkpoint matches 'zzz'" in str(app.query_one("#ckpt-detail").render())
        assert "0 shown" in str(app.query_one("#ckpt-banner").render())
        await press(app, pilot, "escape", "3")
        await press(app, pilot, "slash", *"nothing-like-this")
        assert app.query_one("#cache-table").row_count == 0
        assert "No entry matches" in str(app.query_one("#cache-detail").render())
        assert "0 of 11 shown" in str(app.query_one("#cache-status").render())

    run(work, (120, 40), body)


# --------------------------------------------------------------------------- live cache view


def test_ages_tick_and_the_cache_refreshes_by_itself(work: dict[str, str], monkeypatch) -> None:
    monkeypatch.setattr(cache_view, "AUTO_REFRESH", 0.3)
    start = scan_cache(work["cache"]).scanned_at
    state.freeze_clock(start)

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "3")
        table = app.query_one("#cache-table")
        newest = max((e for e in scan_cache(work["cache"]).entries if e.last_used), key=lambda e: e.last_used)
        before = str(table.get_row(newest.key)[-1])
        state.freeze_clock(start + 3 * 86400)
        new = write_cache_entry(work["cache"], seed=99, num_shards=1, tensor_bytes=256, last_used=start)
        await wait_until(pilot, lambda: os.path.basename(new) in table.rows, "a new entry did not appear without r")
        after = str(table.get_row(newest.key)[-1])
        assert after != before and after.startswith("3d"), (before, after)
        await pilot.press("a")
        assert "auto-refresh off" in str(app.query_one("#cache-status").render())
        await settle(app, pilot)  # a rescan the timer started before `a` ends before the next entry exists
        other = write_cache_entry(work["cache"], seed=98, num_shards=1, tensor_bytes=256, last_used=start)
        # Ticks go on while auto-refresh is off (they move the ages on): wait for two of them, so the
        # timer had its chances to rescan, whatever the machine's load.
        for days in (4, 5):
            state.freeze_clock(start + days * 86400)
            await wait_until(pilot, lambda days=days: str(table.get_row(newest.key)[-1]).startswith(f"{days}d"),
                             f"the ages did not tick to {days}d with auto-refresh off")
        await settle(app, pilot)
        assert os.path.basename(other) not in table.rows

    try:
        run(work, (120, 40), body)
    finally:
        state.freeze_clock(None)


def test_a_partial_process_check_is_one_line_of_the_cache_header_at_80x24(work: dict[str, str], tmp_path,
                                                                          monkeypatch) -> None:
    # A /proc where two processes cannot be read (as another user's are): the pass over it is real.
    from fvconsole.core.cache import scan as cache_scan
    from fvconsole.core.shared.process_use import scan_processes

    proc = tmp_path / "proc"
    for pid in ("10", "11", "12"):
        (proc / pid).mkdir(parents=True)
        (proc / pid / "comm").write_text("python\n")
        (proc / pid / "maps").write_text("")
        if pid == "10":
            (proc / pid / "fd").mkdir()
        else:
            (proc / pid / "fd").write_text("listing it fails as EACCES does")
    monkeypatch.setattr(cache_scan, "scan_processes", lambda: scan_processes(proc=str(proc)))
    state.freeze_process_warnings(False)

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "3")
        header = app.query_one("#cache-root-line")
        lines = [line for line in header.render().plain.split("\n") if line]
        warning = [line for line in lines if line.startswith("⚠")]
        assert len(warning) == 1 and warning[0].startswith("⚠ process check partial: 2 processes"), lines
        assert len(warning[0]) <= header.content_size.width and warning[0].endswith("…"), warning
        table = app.query_one("#cache-table")
        assert table.size.height - 1 >= 5, table.size  # rows shown under its header (4 with a wrapped warning)

    run(work, (80, 24), body)


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_ages_are_drawn_whole_at_every_width(work: dict[str, str], size) -> None:
    # 13 hours on, the demo's oldest entries read "20d 13h ago", "12d 13h ago": 11 cells each.
    start = scan_cache(work["cache"]).scanned_at
    state.freeze_clock(start + 13 * 3600)

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "3")
        table = app.query_one("#cache-table")
        lines = visible_lines(app)
        ages = [str(table.get_row_at(i)[-1]) for i in range(min(table.row_count, table.size.height - 1))]
        assert any(len(age) == 11 for age in ages), ages
        for age in ages:
            whole = re.compile(rf"(?<!\S){re.escape(age)}(?![\w…])")
            assert any(whole.search(line) for line in lines), (age, size, [ln for ln in lines if age[:3] in ln])

    try:
        run(work, size, body)
    finally:
        state.freeze_clock(None)


def test_checkboxes_show_their_state_in_the_glyph_not_only_its_colour(work: dict[str, str]) -> None:
    def glyph(box) -> str:
        return box.render().plain[:3]

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "2")
        for box_id in ("#mig-overwrite", "#mig-skip-source"):
            box = app.query_one(box_id)
            assert (box.value, glyph(box)) == (False, "▐ ▌"), box_id
            box.toggle()
            await settle(app, pilot)
            assert (box.value, glyph(box)) == (True, "▐X▌"), box_id
        await press(app, pilot, "3", "i")
        force = app.screen.query_one("#evict-force")
        assert glyph(force) == "▐ ▌"
        force.toggle()
        await settle(app, pilot)
        assert glyph(force) == "▐X▌"

    run(work, (120, 40), body)


# --------------------------------------------------------------------------- fleet


def test_the_fleet_view_says_what_it_needs_before_the_first_scan(work: dict[str, str], monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")

    async def body(app: FvConsoleApp, pilot) -> None:
        await press(app, pilot, "4")
        text = " ".join(str(app.query_one("#fleet-status").render()).split())
        assert "srun" in text and "not found" in text
        assert "job id" in text and "node list" in text and "cache root" in text

    run(work, (120, 40), body)
