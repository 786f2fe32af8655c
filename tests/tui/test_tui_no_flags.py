"""The console speaks its own controls, end to end: an eviction preview of marked entries with a
min-free target and a migration preview that finds a crashed staging dir show no command-line
flag anywhere on the screen (the core hands over reasons; the console words them).

Real cache entries on a real tmpfs, a real demo run, the real app via ``App.run_test()``.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mounts import tmpfs
from sized_cache import MIB, key_of, sized_entry
from tour import press, started

from fvconsole.core.migration.output_dir import staging_name
from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.cache.evict_dialog import EvictScreen
from fvconsole.tui.state import ConsoleState

pytestmark = pytest.mark.tui
FLAG = re.compile(r"--[a-z]")
DAY = 86400.0
#: A 20 MiB tmpfs; GC order A, B, C (as tests/tui/test_tui_history.py): MiB and age.
ENTRIES = {"A": (4, 5 * DAY), "B": (2, 4 * DAY), "C": (3, 3 * DAY)}


@pytest.fixture(scope="session")  # a lookup in the session's cache: no reason to keep the file in one worker
def demo_ws(demo_workspace) -> DemoWorkspace:
    return demo_workspace(os.path.join("runs", "wan-t2v-14b"))


def dead_pid() -> int:
    """The pid of a process that has exited (a crashed migration's)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def on_screen(app: FvConsoleApp) -> str:
    """Everything the console shows now: the terminal's text (SVG export) and the whole rendering of
    every widget on screen (what a scrolled pane holds below its fold too; not the hidden tabs')."""
    svg = app.export_screenshot()
    parts = [html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")]
    for screen in app.screen_stack:
        for widget in screen.walk_children(with_self=False):
            if not widget.display or widget.region.area == 0:
                continue
            try:
                rendered = widget.render()
            except Exception:  # a widget that renders only when mounted a certain way: the SVG has it
                continue
            parts.append(getattr(rendered, "plain", None) or str(rendered))
    return "\n".join(parts)


def assert_no_flag(app: FvConsoleApp, where: str) -> str:
    text = on_screen(app)
    found = FLAG.search(text)
    assert found is None, f"{where}: a command-line flag on the console: …{text[max(0, found.start() - 80):found.end() + 60]}…"
    return text


async def test_no_command_line_flag_reaches_the_console(demo_ws: DemoWorkspace, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE", raising=False)
    output = str(tmp_path / "runs" / "output")
    shutil.copytree(demo_ws.output_dir, output, symlinks=True)
    # A migration of checkpoint-300 on this host crashed: its staging dir is beside the output dir.
    out = os.path.join(output, "dataloader-state", "checkpoint-300")
    os.makedirs(os.path.join(os.path.dirname(out), staging_name("checkpoint-300", pid=dead_pid())))
    with tmpfs(tmp_path / "shm", 20 * MIB) as mount:
        root = mount / "shard-cache"
        for name, (mib, age) in ENTRIES.items():
            sized_entry(root, name, mib, age)
        app = FvConsoleApp(ConsoleState(config_path=demo_ws.config_path, checkpoints_path=output,
                                        cache_root=str(root), journal_path=str(tmp_path / "journal.jsonl")))
        async with app.run_test(size=(200, 60)) as pilot:
            await started(app, pilot)
            # Shard cache: mark C, evict marked, with a min-free target of 80% (16 MiB of 20: C and A).
            await press(app, pilot, "3")
            table = app.query_one("#cache-table")
            table.move_cursor(row=table.get_row_index(key_of("C")))
            await press(app, pilot, "space", "e")
            assert isinstance(app.screen, EvictScreen)
            app.screen.query_one("#evict-free-pct").focus()
            await press(app, pilot, *"80")
            preview = " ".join(app.screen.query_one("#evict-preview").render().plain.split())
            assert f"{key_of('C')} 3.0 MiB marked" in preview, preview  # the console's word for --key
            assert f"{key_of('A')} 4.0 MiB free space #1" in preview and "(min free 80%)" in preview, preview
            assert "target 16.0 MiB free (min free 80%)" in preview, preview
            assert_no_flag(app, "eviction preview")
            await press(app, pilot, "escape")
            assert sorted(os.listdir(root)) == sorted(key_of(n) for n in ENTRIES)  # nothing evicted
            # Migration: the preview finds the crashed staging dir and says what the console does about it.
            await press(app, pilot, "1")
            ckpt = app.query_one("#ckpt-table")
            ckpt.move_cursor(row=ckpt.get_row_index(next(k for k in ckpt.rows if k.value.endswith("checkpoint-300"))))
            await press(app, pilot, "m")
            await press(app, pilot, "ctrl+r")
            text = assert_no_flag(app, "migration preview")
            banner = " ".join(str(app.query_one("#mig-banner").render()).split())
            assert "plan ready" in banner and "staging dir of a crashed migration on this host" in banner, banner
            assert "Execute removes it" in banner and "crashed migration" in text
