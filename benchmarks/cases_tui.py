"""TUI cases with the real app under ``App.run_test()``: first screen, populate, key latency."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from typing import Any

from benchmarks import inputs
from benchmarks.harness import Row

# The console's settling helper lives with the snapshot tour in tests/ (not shipped in the package),
# the frame hook with the tests' other uses of Textual's private API.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from textual_test_private import on_each_frame  # noqa: E402 - after the sys.path line above
from tour import settle as _settle  # noqa: E402 - after the sys.path line above

SIZE = (160, 48)



async def _first_screen(state: Any) -> tuple[float, float]:
    from fvconsole.tui.app import FvConsoleApp

    start, cpu = time.perf_counter(), time.process_time()
    app = FvConsoleApp(state)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(2000):
            if app.loaded:
                break
            await pilot.pause(0.005)
        if not app.loaded:
            raise AssertionError("the console never loaded its state")
        await _settle(app, pilot)
        return time.perf_counter() - start, time.process_time() - cpu


class FrameClock:
    """Timestamps every frame the app composes (``on_each_frame``), rendering it to terminal bytes.

    Pilot's own ``press``/``pause`` wait for three idle periods of 20 ms each, so they cannot
    measure anything below ~60 ms; the frame timestamps can. Headless apps skip turning a frame
    into escape sequences, so the hook does that work too, as a real terminal would need.
    Each frame records wall time and this process's CPU time.
    """

    def __init__(self, app: Any) -> None:
        self.frames: list[tuple[float, float]] = []
        self._app = app
        on_each_frame(app, self._hook)

    def _hook(self, screen: Any, renderable: Any) -> None:
        if renderable is not None and hasattr(renderable, "render_segments"):
            renderable.render_segments(self._app.console)
            self.frames.append((time.perf_counter(), time.process_time()))

    @staticmethod
    def now() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def first_after(self, start: tuple[float, float]) -> tuple[float, float] | None:
        """(wall, cpu) seconds from ``start`` to the first frame composed after it."""
        for wall, cpu in self.frames:
            if wall > start[0]:
                return wall - start[0], cpu - start[1]
        return None


class DetailClock:
    """When a view's detail pane was handed the selected row's full detail (a worker reads it):
    the cache view's ``FitStatic`` pane, whose glimpse from the scan comes first (``hold=True``)."""

    def __init__(self, pane: Any) -> None:
        self.shown: list[tuple[float, float]] = []
        show = pane.show

        def hook(build: Any, *, hold: bool = False) -> None:
            show(build, hold=hold)
            if not hold:
                self.shown.append(FrameClock.now())

        pane.show = hook

    async def frame_after(self, pilot: Any, clock: FrameClock, start: tuple[float, float]) -> tuple[float, float]:
        """(wall, cpu) from ``start`` to the first frame composed after the full detail was shown."""
        for _ in range(400):
            shown = [t for t in self.shown if t[0] > start[0]]
            frame = clock.first_after(shown[-1]) if shown else None
            if frame is not None:
                return shown[-1][0] - start[0] + frame[0], shown[-1][1] - start[1] + frame[1]
            await pilot.pause(0.005)
        raise AssertionError("the detail pane never showed the selected entry's detail")


async def _key_latency(pilot: Any, clock: FrameClock, table: Any, key: str, presses: int,
                       detail: DetailClock | None = None) -> dict[str, tuple[float, float]]:
    """Medians of (wall, cpu) from a key press until the frame showing the moved cursor is
    composed ("key"), and, with ``detail``, until the frame after the detail pane got the new
    row's detail from its worker ("detail"; the next press waits for it)."""
    times: dict[str, list[tuple[float, float]]] = {"key": [], "detail": []}
    for _ in range(presses):
        before = table.cursor_row
        start = clock.now()
        await pilot.press(key)
        await pilot.pause()
        latency = clock.first_after(start)
        if table.cursor_row == before or latency is None:
            raise AssertionError(f"{key}: the cursor did not move or no frame was drawn")
        times["key"].append(latency)
        if detail is not None:
            times["detail"].append(await detail.frame_after(pilot, clock, start))
    return {what: (statistics.median(w for w, _c in got), statistics.median(c for _w, c in got))
            for what, got in times.items() if got}


async def _populate_and_scroll(state: Any, view_name: str, fill: Any, table_id: str, presses: int,
                               detail_pane: str | None = None) -> dict:
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.widgets.tables import FastTable

    app = FvConsoleApp(state)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        app.action_show(view_name)
        await pilot.pause()
        clock = FrameClock(app)
        view = app.current_view()
        start = clock.now()
        fill(view)
        await pilot.pause()
        populate = clock.first_after(start)
        if populate is None:
            raise AssertionError("no frame was drawn after populating")
        # Views start follow-up workers (the migration view's next-sample-id read refills the
        # table when it reports); let them finish so they do not land inside a key-press timing.
        await _settle(app, pilot)
        settled = time.perf_counter() - start[0]
        table = app.query_one(table_id, FastTable)
        table.focus()
        await _settle(app, pilot)
        detail = DetailClock(app.query_one(detail_pane)) if detail_pane else None
        down = await _key_latency(pilot, clock, table, "down", presses, detail)
        pagedown = await _key_latency(pilot, clock, table, "pagedown", presses, detail)
        return {"populate": populate, "settled": settled, "down": down, "pagedown": pagedown,
                "rows": table.row_count}


def tui_cases(root: str, ranks: int, cache_entries: int, presses: int) -> list[Row]:
    """First screen on the demo workspace, then the migration and cache views at scale."""
    from fvconsole.core.cache import scan_cache
    from fvconsole.core.migration.plan import preview_migration
    from fvconsole.demo.workspace import build_demo_workspace
    from fvconsole.tui.state import ConsoleState

    ws = build_demo_workspace(os.path.join(root, "demo"))
    demo_state = ConsoleState(config_path=ws.config_path, checkpoints_path=ws.output_dir, cache_root=ws.cache_root)
    wall, cpu = asyncio.run(_first_screen(demo_state))
    rows = [Row("TUI first screen (demo workspace)", wall, None, "", "<1.5 s", cpu < 1.5,
                "run_test() start until loaded and settled (Pilot idle waits included)", cpu)]

    run = inputs.migration_run(os.path.join(root, "mig"), world_size=ranks, num_row_groups=ranks * 8, step=20)
    preview = preview_migration(run.request(os.path.join(root, "mig-out")))
    if preview.plan is None:
        raise AssertionError(f"preview refused: {[r.message for r in preview.refusals]}")
    from fvconsole.tui.messages import MigrationPreviewed

    mig = asyncio.run(_populate_and_scroll(ConsoleState(), "migration",
                                           lambda v: v.on_migration_previewed(MigrationPreviewed(preview)),
                                           "#mig-ranks", presses))
    if mig["rows"] != ranks:
        raise AssertionError(f"migration table shows {mig['rows']} rows, expected {ranks}")
    rows += _tui_rows(f"TUI migration view, {ranks}-rank plan", mig)

    cache = inputs.cache_root(os.path.join(root, "cache"), cache_entries, 2)
    scan = scan_cache(cache)
    state = ConsoleState(cache_root=cache)
    from fvconsole.tui.messages import CacheScanned

    res = asyncio.run(_populate_and_scroll(state, "cache", lambda v: v.on_cache_scanned(CacheScanned(scan)),
                                           "#cache-table", presses, detail_pane="#cache-detail"))
    if res["rows"] != cache_entries:
        raise AssertionError(f"cache table shows {res['rows']} rows, expected {cache_entries}")
    rows += _tui_rows(f"TUI cache view, {cache_entries:,} entries", res)
    return rows


def _ms(times: tuple[float, float]) -> str:
    return f"{times[0] * 1e3:.0f} ms ({times[1] * 1e3:.0f} cpu)"


def _tui_rows(label: str, res: dict) -> list[Row]:
    populate_wall, populate_cpu = res["populate"]
    down, pagedown = res["down"]["key"], res["pagedown"]["key"]
    key_wall, key_cpu = max(down[0], pagedown[0]), max(down[1], pagedown[1])
    notes = f"median down {_ms(down)}, pagedown {_ms(pagedown)}"
    if "detail" in res["pagedown"]:
        notes += (f"; the detail pane shows the new entry's files (read in a worker) after "
                  f"{_ms(res['down']['detail'])} (down), {_ms(res['pagedown']['detail'])} (pagedown)")
    return [
        Row(f"{label}: populate", populate_wall, None, "", "<1 s", populate_cpu < 1,
            f"table filled until its first frame (scan/plan excluded); workers settled after "
            f"{res['settled'] * 1e3:.0f} ms", populate_cpu),
        Row(f"{label}: key latency", key_wall, None, "", "<50 ms", key_cpu < 0.05, notes, key_cpu),
    ]
