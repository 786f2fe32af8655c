"""Driving the console headlessly (``App.run_test``): shared by the tests, the screenshot
script and the TUI benchmarks."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from textual.worker import WorkerCancelled

from fvconsole.demo.fleet_builders import Fleet
from fvconsole.tui import state


async def settle(app: Any, pilot: Any, rounds: int = 200) -> None:
    """Wait until no worker runs and the screen has processed what the workers posted.

    Workers post messages back, so one idle check is not enough: a message handled after the
    check may start another worker. Two consecutive idle checks are. A worker cancelled while
    waited for (an exclusive worker replaced by a newer one: a key pressed during a load) is
    not an error: its successor is waited for in the next round.
    """
    for _ in range(rounds):
        with suppress(WorkerCancelled):
            await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            await pilot.pause()
            if not any(w.is_running for w in app.workers):
                return
    raise RuntimeError("workers never settled")


async def press(app: Any, pilot: Any, *keys: str) -> None:
    """Press ``keys``, then wait until what they started has settled."""
    await pilot.press(*keys)
    await settle(app, pilot)


async def started(app: Any, pilot: Any) -> None:
    """Wait until the console loaded its paths and every view finished loading."""
    for _ in range(1000):
        await settle(app, pilot)
        if app.loaded:
            await settle(app, pilot)
            return
    raise RuntimeError("the console never loaded its paths")


# ----------------------------------------------------------------------------- the tour
#
# One walk through every view and dialog, as a user would take it (docs/console.md's
# walkthrough), calling ``shot(name)`` at each stop. The snapshot tests compare those shots
# with the committed SVGs at three terminal sizes; scripts/screenshots.py saves them for the docs.

#: Where the tour's workspace lives: a long, realistic path (50+ characters) so that the
#: screenshots show how paths are shown when they do not fit.
TOUR_PATH = "lustre/fsw/portfolios/video/users/alice/runs/wan-t2v-14b"
#: The clock and the cache filesystem's free space the tour shows (reruns render identical SVGs).
FROZEN_NOW = 1_795_000_000.0  # 2026-11-18 UTC
FROZEN_SPACE = (412 << 30, 503 << 30)
#: The cap the eviction dialog is set to, so that the tour's cache is over it.
TOUR_CAP_GB = "0.0004"

TOUR_SHOTS = (
    "checkpoints", "migration-form", "migration-preview", "migration-confirm", "migration-receipt",
    "migration-refused", "migration-reshard", "checkpoints-migrated", "cache", "cache-evict-dialog", "cache-evict-confirm",
    "cache-evicted", "cache-evict-free", "history", "help", "paths", "error", "fleet-start", "fleet",
    "fleet-evict-confirm",
)
#: Who the tour's journal lines say ran them (the journal stamps the real user, host and pid).
TOUR_IDENTITY = {"user": "alice", "host": "login-01", "pid": 4242}
#: The free-space target the tour types into the eviction dialog: out of reach on the frozen filesystem.
TOUR_MIN_FREE_PERCENT = "90"


@contextmanager
def frozen_display(now: float = FROZEN_NOW, space: tuple[int, int] = FROZEN_SPACE) -> Iterator[None]:
    """Freeze what would differ between runs: the clock (ages, grace periods, the receipt's
    ``created_at_utc``, journal lines and who wrote them), the time zone, the free space shown and
    whether this machine's /proc could be read whole (the process check's warning)."""
    from datetime import datetime

    from fvconsole.core.migration import receipt

    class FrozenDatetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # noqa: D102 - datetime.now's signature
            return datetime.fromtimestamp(now, tz)

    from dataclasses import replace

    import fvconsole.core.journal.log as journal

    saved_tz, saved_datetime = os.environ.get("TZ"), receipt.datetime
    saved_record_now = journal.JournalRecord.__dict__["now"]

    def frozen_record(cls: type, **fields: Any) -> Any:
        return replace(cls(**fields), time=now, **TOUR_IDENTITY)

    journal.JournalRecord.now = classmethod(frozen_record)  # type: ignore[assignment]
    os.environ["TZ"] = "UTC"
    time.tzset()
    state.freeze_clock(now)
    state.freeze_free_space(space)
    state.freeze_process_warnings(True)
    receipt.datetime = FrozenDatetime  # type: ignore[misc]
    try:
        yield
    finally:
        receipt.datetime = saved_datetime  # type: ignore[misc]
        journal.JournalRecord.now = saved_record_now  # type: ignore[assignment]
        state.freeze_free_space(None)
        state.freeze_process_warnings(False)
        state.freeze_clock(None)
        if saved_tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved_tz
        time.tzset()


def steady(app: Any) -> None:
    """Make the screen deterministic for a shot: no toasts, no blinking cursors."""
    from textual.widgets import Input

    app.clear_notifications()
    for screen in app.screen_stack:
        for box in screen.query(Input):
            box.cursor_blink = False


async def select_row(app: Any, pilot: Any, table_id: str, suffix: str) -> None:
    table = app.query_one(table_id)
    key = next(k for k in table.rows if k.value.endswith(suffix))
    table.move_cursor(row=table.get_row_index(key))
    await settle(app, pilot)


async def tour(app: Any, pilot: Any, shot: Callable[[str], None], fleet: Fleet) -> None:
    """Walk every view and dialog of ``app`` (opened on the demo workspace), calling ``shot``."""
    from textual.widgets import Input

    from fvconsole.demo.fleet_builders import local_dispatcher
    from fvconsole.tui.fleet.view import FleetView
    from fvconsole.tui.modals import ErrorScreen

    async def stop(name: str) -> None:
        await settle(app, pilot)
        steady(app)
        await pilot.pause()
        shot(name)

    async def keys(*names: str) -> None:
        await press(app, pilot, *names)

    await started(app, pilot)
    await select_row(app, pilot, "#ckpt-table", "checkpoint-200")
    await stop("checkpoints")
    await select_row(app, pilot, "#ckpt-table", "checkpoint-300")
    await keys("m")
    await stop("migration-form")
    await keys("ctrl+r")
    await stop("migration-preview")
    await keys("ctrl+e")
    await stop("migration-confirm")
    await keys("left", "enter")
    await stop("migration-receipt")
    await keys("ctrl+r")
    await stop("migration-refused")
    # Elastic resume: the new job's world size as an override, a fresh output dir, a mode chosen.
    form = app.query_one("#mig-form")
    form.query_one("#mig-overrides", Input).value = "training.distributed.num_gpus=16"
    output = form.query_one("#mig-output", Input)
    output.value = output.value + "-16-gpus"
    form.query_one("#mig-reshard").value = "nearest"
    await keys("ctrl+r")
    await stop("migration-reshard")
    await keys("1")
    await select_row(app, pilot, "#ckpt-table", "checkpoint-300")
    await stop("checkpoints-migrated")
    await keys("3")
    table = app.query_one("#cache-table")
    table.move_cursor(row=table.row_count - 1)
    await keys("space")
    await stop("cache")
    await keys("c")
    cap = app.screen.query_one("#evict-cap", Input)
    cap.value = TOUR_CAP_GB
    await stop("cache-evict-dialog")
    await keys("enter")
    await stop("cache-evict-confirm")
    await keys("left", "enter")
    await stop("cache-evicted")
    await keys("f")
    await pilot.press(*TOUR_MIN_FREE_PERCENT)
    await stop("cache-evict-free")
    await keys("escape", "5")
    await keys("down")  # the console's migration (the eviction, newest, is on top)
    await stop("history")
    await keys("question_mark")
    await stop("help")
    await keys("escape", "o")
    await stop("paths")
    await keys("escape")
    app.push_screen(ErrorScreen("Eviction failed part-way", "evicted 2 entries, freed 1.2 MiB\n\n"
                                f"{app.state.cache_root}/0123456789abcdef: cannot remove (Permission denied)"))
    await stop("error")
    await keys("escape", "4")
    view = app.query_one(FleetView)
    view.dispatcher = local_dispatcher(fleet)
    view.query_one("#fleet-status").update(view.requirements())
    await stop("fleet-start")
    view.query_one("#fleet-job", Input).value = "123456"
    view.query_one("#fleet-root", Input).value = fleet.root
    await keys("ctrl+r")
    await stop("fleet")
    await keys("i")
    await stop("fleet-evict-confirm")
    await keys("escape")


# ----------------------------------------------------------------------------- table cells


def drawn_form_of(drawn: str, value: str) -> bool:
    """Whether ``drawn`` is ``value`` or a marked shortening of it: its start and ``…``, or a
    path whose middle is elided (``/tmp/…/output/checkpoint-300``: its start and its end)."""
    if drawn == value:
        return True
    if "…" not in drawn:
        return False
    head, _, tail = drawn.rpartition("…")
    head = head.rstrip("/…")
    if not tail:
        return value.startswith(head) and len(head) < len(value)
    return value.startswith(head) and value.endswith(tail) and len(head) + len(tail) < len(value)


def screen_lines(app: Any) -> list[str]:
    """The screen as lines of text, a character per cell (from the SVG export: the strips the
    terminal gets; each text run is placed at its column, x / 12.2 px, on its line)."""
    import html
    import re

    from rich.cells import cell_len

    width, height = app.size
    grid = [[" "] * width for _ in range(height)]
    svg = app.export_screenshot()
    for m in re.finditer(r'<text [^>]*x="([\d.]+)" y="[\d.]+"[^>]*clip-path="url\(#[\w-]+-line-(\d+)\)">([^<]*)</text>',
                         svg):
        col, row = round(float(m.group(1)) / 12.2), int(m.group(2))
        for char in html.unescape(m.group(3)).replace("\xa0", " "):
            if 0 <= row < height and col < width:
                grid[row][col] = char
                for extra in range(1, cell_len(char)):
                    if col + extra < width:
                        grid[row][col + extra] = ""
            col += cell_len(char)
    return ["".join(row) for row in grid]


def check_cells(app: Any, table_id: Any, lines: list[str] | None = None) -> int:
    """Every cell of the table ``table_id`` (an id, or the table) on screen is its value or a
    marked shortening; returns how many were checked. A column that runs past the table's
    edge counts too: what the screen shows of it must be marked as cut."""
    from rich.cells import cell_len

    from fvconsole.tui.widgets.tables import FastTable

    table = app.screen.query_one(table_id, FastTable) if isinstance(table_id, str) else table_id
    lines = screen_lines(app) if lines is None else lines
    region = table.scrollable_content_region  # what the scrollbars leave in view
    pad = table.cell_padding
    checked = 0
    first = int(table.scroll_offset.y)
    for row in range(first, min(table.row_count, first + region.height - 1)):
        y = region.y + 1 + row - first  # under the header
        if not 0 <= y < len(lines) or app.screen.get_widget_at(region.x, y)[0] is not table:
            continue  # scrolled out of its container's view, or under another widget
        line = lines[y]
        x = region.x - int(table.scroll_offset.x)
        values = table.get_row_at(row)
        for column, value in zip(table.ordered_columns, values, strict=True):
            width = column.get_render_width(table)
            plain = value.plain if hasattr(value, "plain") else str(value)
            start, end = max(x + pad, region.x), min(x + width - pad, region.right)
            x += width
            if start >= region.right:
                break
            if end <= start:
                continue
            drawn = line_slice(line, start, end).strip()
            if not plain.strip():
                continue
            assert drawn_form_of(drawn, plain.strip()), (table.id, column.key.value, drawn, plain, app.size)
            assert cell_len(drawn) <= width
            checked += 1
    return checked


def check_tables(app: Any) -> int:
    """:func:`check_cells` for every table shown on the screen on top; how many cells were checked."""
    from fvconsole.tui.widgets.tables import FastTable

    lines = screen_lines(app)
    return sum(check_cells(app, table, lines) for table in app.screen.query(FastTable)
               if table.display and table.region.width > 0 and table.region.height > 1 and table.visible
               and table.row_count)


def line_slice(line: str, start: int, end: int) -> str:
    """The cells ``start``..``end`` of a screen line (wide characters count two)."""
    from rich.cells import cell_len

    out, x = "", 0
    for char in line:
        if start <= x < end:
            out += char
        x += cell_len(char)
    return out
