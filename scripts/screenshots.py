#!/usr/bin/env python3
"""Regenerate the console screenshots in screenshots/ (run after any UI change).

    python scripts/screenshots.py [--out screenshots] [--workspace DIR]

Builds the demo workspace (default: $TMPDIR/fvconsole-demo, rebuilt each run), drives the real
app with App.run_test() at a fixed 140x42 terminal, with the clock and time zone frozen so that
reruns produce the same ages, and saves one SVG per view.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIZE = (140, 42)
FROZEN_NOW = 1_795_000_000.0  # 2026-11-18 UTC: ages in the screenshots do not drift between runs


async def settle(app, pilot) -> None:
    """Wait for every worker and the repaint that follows it."""
    for _ in range(100):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            await pilot.pause()
            return


async def capture(ws, out: str) -> list[str]:
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState

    app = FvConsoleApp(ConsoleState(config_path=ws.config_path, checkpoints_path=ws.output_dir,
                                    cache_root=ws.cache_root))
    saved: list[str] = []

    def shot(name: str) -> None:
        app.save_screenshot(f"{name}.svg", path=out)
        saved.append(os.path.join(out, f"{name}.svg"))

    async with app.run_test(size=SIZE) as pilot:
        while not app.loaded:
            await pilot.pause(0.05)
        await settle(app, pilot)
        table = app.query_one("#ckpt-table")

        async def select(step: int) -> None:
            key = next(k for k in table.rows if k.value.endswith(f"checkpoint-{step}"))
            table.move_cursor(row=table.get_row_index(key))
            await settle(app, pilot)

        await select(200)
        shot("checkpoints")
        await select(300)
        await pilot.press("m")
        await settle(app, pilot)
        await pilot.press("ctrl+r")
        await settle(app, pilot)
        app.clear_notifications()
        shot("migration-preview")
        await pilot.press("ctrl+e")
        await settle(app, pilot)
        shot("migration-confirm")
        await pilot.press("left", "enter")
        await settle(app, pilot)
        app.clear_notifications()
        await pilot.pause()
        shot("migration-receipt")
        await pilot.press("3")
        await settle(app, pilot)
        cache = app.query_one("#cache-table")
        cache.move_cursor(row=cache.row_count - 1)
        await settle(app, pilot)
        shot("cache")
        await pilot.press("i")
        await settle(app, pilot)
        shot("cache-evict-preview")
        await pilot.press("escape")
        await settle(app, pilot)
        app.clear_notifications()
        await pilot.press("question_mark")
        await settle(app, pilot)
        shot("help")
    return saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "screenshots"))
    parser.add_argument("--workspace", default=os.path.join(tempfile.gettempdir(), "fvconsole-demo"))
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    time.tzset()
    from fvconsole.demo.workspace import build_demo_workspace
    from fvconsole.tui.state import freeze_clock

    ws = build_demo_workspace(args.workspace, now=FROZEN_NOW)
    freeze_clock(FROZEN_NOW)
    os.makedirs(args.out, exist_ok=True)
    for path in asyncio.run(capture(ws, args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
