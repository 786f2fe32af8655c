"""Every view and dialog of the console at 80×24, 120×40 and 200×60, compared with the
committed SVGs (pytest-textual-snapshot's SVG format, through syrupy).

The tour (``tour.tour``) walks the demo workspace as docs/console.md's walkthrough
does, at a fixed, long, realistic path, with the clock, the time zone and the free space
frozen, so reruns render identical SVGs. After a deliberate UI change, look at the new
pictures, then update them: ``python -m pytest -n 0 tests/tui/test_tui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator

import pytest
import tour as headless
from pytest_textual_snapshot import SVGImageExtension

from fvconsole.demo.fleet_builders import build_fleet
from fvconsole.demo.workspace import build_demo_workspace
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.state import ConsoleState

pytestmark = pytest.mark.tui

#: Fixed, because the pictures show it (a temporary directory would change every run).
BASE = "/tmp/fvconsole-snapshots"
ROOT = os.path.join(BASE, headless.TOUR_PATH)
SIZES = ((80, 24), (120, 40), (200, 60))


@pytest.fixture(scope="module")
def restore_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], None]]:
    """Build the demo workspace once at ROOT; each size starts from a fresh copy of it.

    A lock file keeps two test runs on one machine from sharing the fixed path.
    """
    if not os.access("/tmp", os.W_OK):
        pytest.skip("the snapshot workspace lives at a fixed path under /tmp, which is not writable here")
    with open(BASE + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(BASE, ignore_errors=True)
        build_demo_workspace(ROOT, now=headless.FROZEN_NOW)
        pristine = str(tmp_path_factory.mktemp("snapshots") / "pristine")
        shutil.copytree(BASE, pristine, symlinks=True)

        def restore() -> None:
            shutil.rmtree(BASE, ignore_errors=True)
            shutil.copytree(pristine, BASE, symlinks=True)

        yield restore
        shutil.rmtree(BASE, ignore_errors=True)


def take_tour(size: tuple[int, int]) -> dict[str, str]:
    """The SVG of every stop of the tour at ``size``; at each, every table cell shown is its
    value or marked as cut (``headless.check_tables``)."""
    fleet = build_fleet(os.path.join(BASE, "fleet"), headless.FROZEN_NOW)
    app = FvConsoleApp(ConsoleState(config_path=os.path.join(ROOT, "run.yaml"),
                                    checkpoints_path=os.path.join(ROOT, "output"),
                                    cache_root=os.path.join(ROOT, "shard-cache"),
                                    journal_path=os.path.join(BASE, "journal.jsonl")))
    shots: dict[str, str] = {}

    def shot(name: str) -> None:
        shots[name] = app.export_screenshot()
        headless.check_tables(app)

    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            await headless.tour(app, pilot, shot, fleet)

    with headless.frozen_display():
        asyncio.run(asyncio.wait_for(run(), 300))
    return shots


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_view_and_dialog(size: tuple[int, int], restore_workspace, snapshot) -> None:
    restore_workspace()
    shots = take_tour(size)
    assert tuple(shots) == headless.TOUR_SHOTS
    svg = snapshot.use_extension(SVGImageExtension)
    mismatched = [name for name, picture in shots.items() if svg(name=name) != picture]
    assert mismatched == [], f"differ from the committed SVGs: {mismatched} (see the snapshot report)"

