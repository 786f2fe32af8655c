#!/usr/bin/env python3
"""Regenerate the console screenshots in screenshots/ (run after any UI change).

    python scripts/screenshots.py [--out screenshots] [--base DIR]

Builds the demo workspace under a long, realistic path (``DIR/lustre/fsw/portfolios/...``,
default DIR /tmp/fvconsole-screenshots, rebuilt each run), walks the real app through every
view and dialog with ``tests/tour.py``'s ``tour`` (the walk the snapshot tests take) with the clock,
the time zone and the free space frozen, and saves the stops the docs show: at 120x40, and a
few at 80x24. Reruns write identical SVGs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the tour (tests/tour.py) is not shipped

import tour as headless  # noqa: E402 - after the sys.path lines above

#: (terminal size, stops of the tour saved at that size, file name suffix)
SHOTS = (
    ((120, 40), ("checkpoints", "migration-form", "migration-preview", "migration-confirm", "migration-receipt",
                 "migration-refused", "migration-reshard", "checkpoints-migrated", "cache", "cache-evict-dialog", "cache-evict-confirm",
                 "cache-evicted", "cache-evict-free", "history", "help", "fleet-start", "fleet",
                 "fleet-evict-confirm"), ""),
    ((80, 24), ("checkpoints", "migration-preview", "migration-receipt", "migration-reshard", "cache", "cache-evict-dialog",
                "history", "help"), "-80x24"),
)


async def walk(base: str, size: tuple[int, int], wanted: tuple[str, ...], out: str, suffix: str) -> list[str]:
    from fvconsole.demo.fleet_builders import build_fleet
    from fvconsole.demo.workspace import build_demo_workspace
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState

    shutil.rmtree(base, ignore_errors=True)
    ws = build_demo_workspace(os.path.join(base, headless.TOUR_PATH), now=headless.FROZEN_NOW)
    fleet = build_fleet(os.path.join(base, "fleet"), headless.FROZEN_NOW)
    app = FvConsoleApp(ConsoleState(config_path=ws.config_path, checkpoints_path=ws.output_dir,
                                    cache_root=ws.cache_root, journal_path=os.path.join(base, "journal.jsonl")))
    saved: list[str] = []

    def shot(name: str) -> None:
        if name in wanted:
            saved.append(app.save_screenshot(f"{name}{suffix}.svg", path=out))

    async with app.run_test(size=size) as pilot:
        await headless.tour(app, pilot, shot, fleet)
    return saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "screenshots"))
    parser.add_argument("--base", default="/tmp/fvconsole-screenshots",
                        help="where the workspace is built (the pictures show this path)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with headless.frozen_display():
        for size, wanted, suffix in SHOTS:
            for path in asyncio.run(walk(args.base, size, wanted, args.out, suffix)):
                print(path)
    shutil.rmtree(args.base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
