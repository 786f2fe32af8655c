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

from fvconsole.tui.headless import settle  # noqa: E402 - after the sys.path line above

SIZE = (140, 42)
FROZEN_NOW = 1_795_000_000.0  # 2026-11-18 UTC: ages in the screenshots do not drift between runs


FLEET_NODES = tuple(f"gpu{i:03d}" for i in range(1, 9))
FAKE_SRUN = """#!{python}
# Stand-in srun for the screenshots: run the command locally as node --nodelist (SLURMD_NODENAME set).
import os, sys
args = sys.argv[1:]
os.environ["SLURMD_NODENAME"] = next(a.split("=", 1)[1] for a in args if a.startswith("--nodelist="))
cmd = args[next(i for i, a in enumerate(args) if not a.startswith("-")):]
os.execv(cmd[0], cmd)
"""


def build_fleet(base: str) -> tuple[str, str]:
    """Per-node cache roots ``base/<node>/wcache`` showing the per-node manifest pathology.

    Returns (cache root with {node}, path of the stand-in srun).
    """
    import shutil

    from fvconsole.demo.cache_builders import make_key, write_cache_entry

    shutil.rmtree(base, ignore_errors=True)
    wan, flux, old = make_key("wan2.1-t2v-14b"), make_key("flux-dev"), make_key("wan2.1-i2v-old")
    for i, node in enumerate(FLEET_NODES):
        root = os.path.join(base, node, "wcache")
        # rank 0's node (gpu001) wrote the manifest; every other node holds only its shards.
        write_cache_entry(root, wan, num_shards=8, present=[i], status="partial" if i == 0 else "incomplete",
                          last_used=FROZEN_NOW - 3600, tensor_bytes=64 << 10, seed=1)
        if i < 4:
            write_cache_entry(root, flux, num_shards=2, status="complete", last_used=FROZEN_NOW - 86400 * 3,
                              tensor_bytes=32 << 10, seed=2)
        if i in (2, 5):
            write_cache_entry(root, old, num_shards=4, status="invalid-manifest", last_used=FROZEN_NOW - 86400 * 12,
                              tensor_bytes=16 << 10, seed=3)
    srun = os.path.join(base, "srun")
    with open(srun, "w") as fh:
        fh.write(FAKE_SRUN.replace("{python}", sys.executable))
    os.chmod(srun, 0o755)
    return os.path.join(base, "{node}", "wcache"), srun


def fleet_dispatcher(srun: str):
    """The real SrunDispatcher with the stand-in srun; the job's nodes are given (no squeue here)."""
    from fvconsole.core.fleet.ops import SrunDispatcher
    from fvconsole.core.fleet.selection import NodeSelection

    class ScreenshotDispatcher(SrunDispatcher):
        def select(self, nodes, job_id):  # noqa: ANN001, ANN202 - mirrors SrunDispatcher.select
            return NodeSelection(FLEET_NODES, job_id)

    return ScreenshotDispatcher(srun=srun)


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
        await pilot.press("escape")
        await settle(app, pilot)
        await fleet_shots(app, pilot, ws, shot)
    return saved


async def fleet_shots(app, pilot, ws, shot) -> None:
    """View 4 over eight emulated nodes: the matrix, then the eviction confirmation."""
    from textual.widgets import Input

    from fvconsole.tui.fleet_view import FleetView

    root, srun = build_fleet(os.path.join(ws.root, "fleet"))
    await pilot.press("4")
    await settle(app, pilot)
    view = app.query_one(FleetView)
    view.dispatcher = fleet_dispatcher(srun)
    view.query_one("#fleet-job", Input).value = "123456"
    view.query_one("#fleet-root", Input).value = root
    await pilot.press("ctrl+r")
    await settle(app, pilot)
    app.clear_notifications()
    await pilot.pause()
    shot("fleet")
    await pilot.press("i")
    await settle(app, pilot)
    shot("fleet-evict-confirm")
    await pilot.press("escape")
    await settle(app, pilot)


def freeze_receipt_clock() -> None:
    """The receipt panel shows ``created_at_utc``: freeze it too (only in this throwaway workspace)."""
    from datetime import datetime

    from fvconsole.core.migration import receipt

    class FrozenDatetime(datetime):
        @classmethod
        def now(cls, tz=None):  # noqa: ANN001, ANN206 - datetime.now's signature
            return datetime.fromtimestamp(FROZEN_NOW, tz)

    receipt.datetime = FrozenDatetime


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
    freeze_receipt_clock()
    os.makedirs(args.out, exist_ok=True)
    for path in asyncio.run(capture(ws, args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
