"""The Fleet view (key 4) in the real console, driven with run_test() + Pilot.

The dispatcher is the real one (``SrunDispatcher``) pointed at the stand-in srun from
tests/slurm_cluster.py, so ls / preview / execute run the real node entry point on real
per-node cache roots; only Slurm itself is replaced. A blocking stub checks the UI never
waits on srun.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from console_apps import make_app, shown_notifications
from slurm_cluster import write_fake_srun
from textual.widgets import Button, Input, Static
from tour import press, settle

from fvconsole.core.fleet.ops import SrunDispatcher
from fvconsole.core.fleet.slurm_state import SlurmQuery
from fvconsole.demo.cache_builders import make_key, write_cache_entry
from fvconsole.tui.fleet.view import FleetView
from fvconsole.tui.modals import ConfirmScreen
from fvconsole.tui.widgets.tables import FastTable

pytestmark = pytest.mark.tui
SIZE = (160, 48)
KEY, OTHER = make_key("tui-model"), make_key("tui-other")



@pytest.fixture
def fleet(tmp_path: Path) -> dict:
    """a1 has the manifest of KEY, a2/a3 only shards; OTHER complete on a2."""
    for i, node in enumerate(("a1", "a2", "a3")):
        root = tmp_path / node / "wc"
        write_cache_entry(root, KEY, num_shards=3, present=[i], status="partial" if i == 0 else "incomplete",
                          tensor_bytes=256)
    write_cache_entry(tmp_path / "a2" / "wc", OTHER, num_shards=1, status="complete", tensor_bytes=256)
    srun = write_fake_srun(tmp_path / "bin")
    return {"root": str(tmp_path / "{node}" / "wc"), "srun": srun, "base": tmp_path}


def _entries(base: Path, node: str) -> list[str]:
    return sorted(p.name for p in (base / node / "wc").iterdir())



async def open_fleet(app, pilot, root: str, nodes: str = "a[1-3]") -> FleetView:
    await settle(app, pilot)
    await pilot.press("4")
    await pilot.pause()
    view = app.query_one(FleetView)
    view.query_one("#fleet-job", Input).value = ""
    view.query_one("#fleet-nodes", Input).value = nodes
    view.query_one("#fleet-root", Input).value = root
    return view


async def test_scan_shows_matrix_and_pathology(fleet: dict) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        view = await open_fleet(app, pilot, fleet["root"])
        view.dispatcher = SrunDispatcher(timeout=60, srun=fleet["srun"])
        view.query_one("#fleet-nodes", Input).focus()
        await press(app, pilot, "enter")
        result = view.view_result
        assert result is not None and result.exit_code == 0
        matrix = view.query_one("#fleet-matrix", FastTable)
        assert [r.value for r in matrix.rows] == sorted([KEY, OTHER])
        row = [str(c) for c in matrix.get_row(KEY)]
        assert row[2].startswith("partial") and row[3].startswith("incomplete") and row[4].startswith("incomplete")
        assert str(matrix.get_row(OTHER)[2]) == "—"
        nodes = view.query_one("#fleet-node-table", FastTable)
        assert [r.value for r in nodes.rows] == ["a1", "a2", "a3"]
        detail = str(view.query_one("#fleet-detail", Static).render())
        assert "incomplete (shards, no manifest.json) on a[2-3]" in detail
        status = str(view.query_one("#fleet-status", Static).render())
        assert "3 nodes, 2 keys" in status


async def test_evict_preview_confirm_cancel_then_execute(fleet: dict) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        view = await open_fleet(app, pilot, fleet["root"])
        view.dispatcher = SrunDispatcher(timeout=60, srun=fleet["srun"])
        view.action_scan()
        await settle(app, pilot)
        view.query_one("#fleet-matrix", FastTable).focus()
        await press(app, pilot, "i")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.focused is not None and app.focused.id == "cancel"
        await press(app, pilot, "enter")  # Enter on the focused Cancel: nothing happens
        assert not isinstance(app.screen, ConfirmScreen)
        assert _entries(fleet["base"], "a2") == sorted([KEY, OTHER])
        await press(app, pilot, "i")
        assert isinstance(app.screen, ConfirmScreen)
        body = str(app.screen.query_one("#dialog-body Static", Static).render())
        assert "a[2-3]" in body and KEY in body
        app.screen.query_one("#confirm", Button).press()
        await settle(app, pilot)
        await settle(app, pilot)
        assert _entries(fleet["base"], "a1") == [KEY]
        assert _entries(fleet["base"], "a2") == [OTHER]
        assert _entries(fleet["base"], "a3") == []
        # the view rescanned after executing
        assert {r.key for r in view.view_result.keys} == {KEY, OTHER}
        assert dict(next(r for r in view.view_result.keys if r.key == KEY).statuses) == {"a1": "partial"}


async def test_the_consoles_fleet_eviction_is_journaled_with_its_nodes(fleet: dict, tmp_path: Path) -> None:
    """Issue 35: view 4's eviction goes through the one runner, so the journal (view 5, `fvconsole history`)
    has its line: the fleet action, the cache root, what was evicted on which node, the node set."""
    journal = tmp_path / "journal.jsonl"
    app = make_app(journal=journal)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_fleet(app, pilot, fleet["root"])
        view.dispatcher = SrunDispatcher(timeout=60, srun=fleet["srun"])
        view.action_scan()
        await settle(app, pilot)
        view.query_one("#fleet-matrix", FastTable).focus()
        await press(app, pilot, "i")
        app.screen.query_one("#confirm", Button).press()
        await settle(app, pilot)
        await settle(app, pilot)
        assert _entries(fleet["base"], "a2") == [OTHER]
    [line] = [json.loads(x) for x in journal.read_text().splitlines()]
    assert line["action"] == "fleet cache evict" and line["target"] == fleet["root"] and line["exit_code"] == 0
    assert sorted(line["items"]) == [f"a2:{KEY}", f"a3:{KEY}"]
    assert line["command"].startswith("fvconsole console: fleet evict") and "on a[1-3]" in line["command"]
    assert line["details"]["nodes_total"] == 3 and line["details"]["outcomes"]["ok"]["nodes"] == "a[1-3]"


async def test_failed_node_is_shown_and_read_only_refuses(fleet: dict) -> None:
    (fleet["base"] / "a3" / "wc").rename(fleet["base"] / "a3" / "gone")
    app = make_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        view = await open_fleet(app, pilot, fleet["root"])
        view.dispatcher = SrunDispatcher(timeout=60, srun=fleet["srun"])
        view.action_scan()
        await settle(app, pilot)
        nodes = view.query_one("#fleet-node-table", FastTable)
        assert "does not exist" in str(nodes.get_row("a3")[-1])
        assert view.view_result.exit_code == 3
        view.query_one("#fleet-matrix", FastTable).focus()
        await press(app, pilot, "i")
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("read-only" in n.message for n in shown_notifications(app))
        assert _entries(fleet["base"], "a2") == sorted([KEY, OTHER])


class BlockingDispatcher:
    """Blocks in select() until released: the UI must keep responding meanwhile."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def select(self, nodes, job):
        self.entered.set()
        self.release.wait(60)
        raise RuntimeError("released")


async def test_scan_runs_in_a_worker(fleet: dict) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        view = await open_fleet(app, pilot, fleet["root"])
        stub = BlockingDispatcher()
        view.dispatcher = stub
        view.action_scan()
        await asyncio.to_thread(stub.entered.wait, 30)
        assert stub.entered.is_set()
        # srun is "running": the UI still processes keys and input
        box = view.query_one("#fleet-job", Input)
        box.focus()
        await pilot.press("7")
        await pilot.pause()
        assert box.value == "7"
        assert view.query_one("#fleet-progress-row").display
        stub.release.set()
        await settle(app, pilot)
        assert "released" in str(view.query_one("#fleet-status", Static).render())


async def test_filter_and_r_rescan_in_fleet_view(fleet: dict) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        view = await open_fleet(app, pilot, fleet["root"])
        view.dispatcher = SrunDispatcher(timeout=60, srun=fleet["srun"])
        assert app.focused is view.query_one("#fleet-scan")  # Scan first: the global keys act, no field types them
        await pilot.press("r")  # r before any scan runs no srun
        assert view.view_result is None
        assert any("nothing scanned yet" in n.message for n in shown_notifications(app))
        view.action_scan()
        await settle(app, pilot)
        matrix = view.query_one("#fleet-matrix", FastTable)
        assert app.focused is matrix and matrix.row_count == 2
        await pilot.press("slash", *OTHER[:8])
        assert [r.value for r in matrix.rows] == [OTHER]
        await pilot.press("escape")
        assert matrix.row_count == 2 and app.focused is matrix
        third = make_key("tui-third")
        write_cache_entry(fleet["base"] / "a3" / "wc", third, num_shards=1, status="complete", tensor_bytes=256)
        await press(app, pilot, "r")
        assert {r.value for r in matrix.rows} == {KEY, OTHER, third}


def _stand_in(path: Path, text: str) -> str:
    """A stand-in Slurm client printing ``text`` (literal, as the real one would)."""
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\n")
    path.chmod(0o755)
    return str(path)


async def test_scan_shows_slurm_state_and_busy_nodes(fleet: dict) -> None:
    """Job 77 of the caches' owner holds a1 and a2: both busy, their entries marked; bob's job 78 on a3
    (an escape sequence in its name) is listed, escaped, and a3 is not busy."""
    import os

    uid = os.getuid()
    bindir = fleet["base"] / "bin"
    squeue = _stand_in(bindir / "squeue", f"77|{uid}|alice|RUNNING|a[1-2]|train|x|77\n"
                                          f"78|{uid + 1}|bob|RUNNING|a3|eval\x1b]0;pwn\x07|78\n")
    sinfo = _stand_in(bindir / "sinfo", "a[1-2]|allocated\na3|mixed\n")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        view = await open_fleet(app, pilot, fleet["root"])
        view.dispatcher = SrunDispatcher(timeout=60, srun=fleet["srun"],
                                         slurm=SlurmQuery(squeue=squeue, sinfo=sinfo))
        view.query_one("#fleet-nodes", Input).focus()
        await press(app, pilot, "enter")
        nodes = view.query_one("#fleet-node-table", FastTable)
        assert [str(nodes.get_row(n)[1]) for n in ("a1", "a2", "a3")] == [
            "allocated · busy", "allocated · busy", "mixed"]
        assert str(nodes.get_row("a2")[-1]).endswith("; node busy (2 entries)")
        matrix = view.query_one("#fleet-matrix", FastTable)
        row = [str(c) for c in matrix.get_row(KEY)]
        assert row[2].endswith(" busy") and row[3].endswith(" busy") and not row[4].endswith(" busy")
        assert [str(c.label) for c in matrix.columns.values()][2:5] == ["a1 (busy)", "a2 (busy)", "a3"]
        detail = str(view.query_one("#fleet-detail", Static).render())
        assert "⚑ node busy: job 77 alice (train|x) running on a[1-2], the cache owner's" in detail
        assert "job 78 bob (eval\\x1b]0;pwn\\x07) running on a3" in detail and "\x1b" not in detail
        await press(app, pilot, "i")
        assert isinstance(app.screen, ConfirmScreen)
        body = str(app.screen.query_one("#dialog-body Static").render())
        assert "⚠ node busy: a2: job 77 alice (train|x) of the planned entries' owner" in body
        assert "a3" not in body.split("⚠", 1)[1]  # bob's job makes no warning
        await press(app, pilot, "escape")
