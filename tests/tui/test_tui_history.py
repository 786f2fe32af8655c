"""The console's journal side: the History view (key 5) on journals written by real CLI runs,
console migrations journaled like ``migrate --yes``, the eviction dialog's free-space target
on a real tmpfs, and the export line that never wraps.

Expected values come from the journal files themselves (read here with ``json``), from the
commands run, or from sizes worked out by hand (the tmpfs case, as tests/cache/test_cache_freespace.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from console_apps import Notified, make_app, running, shown_notifications, work_copy
from migration_runs import migrate_argv
from mounts import tmpfs
from sized_cache import MIB, fs_free, key_of, sized_entry
from tour import press, select_row, started

from fvconsole.cli import main as cli_main
from fvconsole.core.journal.log import MIGRATE, JournalRecord, append_record
from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.cache.evict_dialog import EvictScreen
from fvconsole.tui.history.view import HistoryView
from fvconsole.tui.modals import ConfirmScreen

pytestmark = pytest.mark.tui
LONG = "lustre/fsw/portfolios/video/users/alice/runs/wan-t2v-14b"
HOSTILE_TARGET = "/tmp/[bold red]evil[/] \x1b]0;pwned\x07 [link=https://x]y[/link]"
HOSTILE_USER = "mallory\x1b[31m"
DAY = 86400.0


@pytest.fixture(scope="session")  # a lookup in the session's cache: no reason to keep the file in one worker
def demo_ws(demo_workspace) -> DemoWorkspace:
    return demo_workspace(LONG)


@pytest.fixture
def work(demo_ws: DemoWorkspace, tmp_path: Path) -> dict[str, str]:
    return work_copy(demo_ws, tmp_path / LONG)


def lines(journal: Path) -> list[dict]:
    return [json.loads(line) for line in journal.read_text().splitlines()]


def rendered(app: FvConsoleApp, selector: str) -> str:
    return str(app.query_one(selector).render())


def notifications(app: FvConsoleApp) -> list[str]:
    return [n.message for n in shown_notifications(app)]


# --------------------------------------------------------------------------- the History view


def write_journal_by_cli(work: dict[str, str], journal: Path) -> None:
    """A real migration and a real eviction with --journal, a malformed line, a hostile record."""
    ckpt = os.path.join(work["output"], "checkpoint-300")
    out = os.path.join(work["output"], "dataloader-state", "checkpoint-300")
    assert cli_main(migrate_argv(work["config"], ckpt, out, step=300, world=8, consumed=600,
                                 extra=("--yes", "--json", "--journal", str(journal)))) == 0
    assert cli_main(["cache", "evict", work["cache"], "--invalid", "--yes", "--json", "--journal", str(journal)]) == 0
    with open(journal, "a") as handle:
        handle.write("this line is not a record\n")
    hostile = JournalRecord.now(action=MIGRATE, target=HOSTILE_TARGET, result="ok", exit_code=0, bytes=5,
                                items=("[/]s52", "\x1b[2J"), command="fvconsole [blink]x[/blink]")
    assert append_record(JournalRecord(**{**hostile.__dict__, "user": HOSTILE_USER}), str(journal)).written


async def test_history_view_shows_the_journal_newest_first(work: dict[str, str], tmp_path: Path, capsys) -> None:
    journal = tmp_path / "team" / "journal.jsonl"
    write_journal_by_cli(work, journal)
    capsys.readouterr()
    written = [line for line in journal.read_text().splitlines() if line.startswith("{")]
    expected = [json.loads(line) for line in written][::-1]  # newest first
    app = make_app(**work, journal=str(journal))
    async with running(app, (80, 24)) as pilot:
        await press(app, pilot, "5")
        view = app.query_one(HistoryView)
        assert app.focused is app.query_one("#hist-table")
        assert [(r.action, r.target) for r in view.records] == [(e["action"], e["target"]) for e in expected]
        banner = rendered(app, "#hist-banner")
        assert str(journal) in banner and "3 records" in banner and "1 malformed line skipped" in banner
        # which journal this is, and how to read another (the default mixes every run of a user)
        assert f"journal {journal}  (another journal: --journal PATH or $FVCONSOLE_JOURNAL" in banner
        # The newest (hostile) record is selected; its strings are shown as written, escaped, never markup.
        detail = app.query_one("#hist-detail").render()
        text = detail.plain
        assert "[bold red]evil[/]" in text and "[link=https://x]y[/link]" in text and "[/]s52" in text
        assert "\\x1b]0;pwned\\x07" in text and "\\x1b[2J" in text and "mallory\\x1b[31m@" in text
        assert "\x1b" not in text and "\x07" not in text
        assert not any(span.style and "link" in str(span.style) for span in detail.spans)
        # The CLI's migration: its command and every file written, in the detail pane.
        await press(app, pilot, "G")
        migration = expected[-1]
        text = app.query_one("#hist-detail").render().plain
        assert migration["command"] in text.replace("\n", "")
        assert all(f"  {item}\n" in text for item in migration["items"]) and "migration_receipt.json" in text
        # `/` filters (k9s style), Esc clears.
        await pilot.press("slash")
        await press(app, pilot, *"cache evict")
        assert [r.action for r in view.records] == ["cache evict"]
        assert "1 shown (filter 'cache evict')" in rendered(app, "#hist-banner")
        await pilot.press("escape")
        assert len(view.records) == 3
        # `r` reads the journal again: a new CLI eviction shows up on top.
        assert cli_main(["cache", "evict", work["cache"], "--older-than", "1s", "--yes", "--json",
                         "--journal", str(journal)]) == 0
        await press(app, pilot, "r")
        assert len(view.records) == 4 and view.records[0].command.endswith(f"--journal {journal}")
    capsys.readouterr()


async def test_a_missing_journal_says_where_it_looks_and_how_to_change_it(work: dict[str, str], tmp_path) -> None:
    journal = tmp_path / "nowhere" / "journal.jsonl"
    app = make_app(**work, journal=str(journal))
    async with running(app, (80, 24)) as pilot:
        await press(app, pilot, "5")
        banner = rendered(app, "#hist-banner")
        assert "No journal yet" in banner and "--journal PATH" in banner and "$FVCONSOLE_JOURNAL" in banner
        assert str(journal) in banner.replace("\n", "")
        assert app.query_one("#hist-table").row_count == 0
    assert not journal.parent.exists()  # looking never creates it


async def test_a_journal_that_is_not_a_file_is_an_error_not_a_crash(work: dict[str, str], tmp_path) -> None:
    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    app = make_app(**work, journal=str(fifo))
    notified = Notified(app)  # raised while the console starts, read once every view has loaded
    async with running(app, (80, 24)) as pilot:
        await press(app, pilot, "5")
        assert "cannot read the journal" in rendered(app, "#hist-banner")
        assert any("not a regular file" in m for m in notified())


def test_journal_before_the_command_counts_like_after_it(work: dict[str, str], tmp_path: Path, capsys) -> None:
    """`fvconsole --journal PATH history` (the console's option) reads PATH, as `history --journal PATH`."""
    journal = tmp_path / "j.jsonl"
    assert cli_main(["--journal", str(journal), "cache", "evict", work["cache"], "--invalid", "--yes"]) == 0
    assert [line["action"] for line in lines(journal)] == ["cache evict"]
    capsys.readouterr()
    assert cli_main(["--journal", str(journal), "history", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["journal"] == str(journal)


# --------------------------------------------------------------------------- console migrations


async def migrate_in_console(app: FvConsoleApp, pilot) -> None:
    await select_row(app, pilot, "#ckpt-table", "checkpoint-300")
    await press(app, pilot, "m")
    await press(app, pilot, "ctrl+r")
    await press(app, pilot, "ctrl+e")
    assert isinstance(app.screen, ConfirmScreen) and app.focused.id == "cancel"
    await press(app, pilot, "left", "enter")


async def test_a_console_migration_is_journaled_like_migrate_yes(work: dict[str, str], tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    out = os.path.join(work["output"], "dataloader-state", "checkpoint-300")
    app = make_app(**work, journal=str(journal))
    async with running(app, (80, 24)) as pilot:
        await migrate_in_console(app, pilot)
        export = f"export FASTVIDEO_DATALOADER_STATE_DIR={out}"
        # The export line: one line, never wrapped at 80 columns (it scrolls sideways), copied whole by y.
        line = app.query_one("#mig-export")
        assert line.text == export and len(export) > 80
        assert line.query_one("PlainStatic").size.height == 1
        await pilot.press("y")
        assert app.clipboard == export
        await press(app, pilot, "5")
        assert [r.action for r in app.query_one(HistoryView).records] == ["migrate"]
    [record] = lines(journal)
    written = sorted(os.listdir(out))
    assert (record["action"], record["result"], record["exit_code"], record["target"]) == ("migrate", "ok", 0, out)
    assert record["command"] == "fvconsole console: migrate step 300, world size 8"
    assert sorted(record["items"]) == written and record["items_total"] == 9
    assert record["bytes"] == sum(os.path.getsize(os.path.join(out, name)) for name in written)
    assert record["details"]["checkpoint"] == os.path.join(work["output"], "checkpoint-300")
    assert (record["details"]["step"], record["details"]["world_size"]) == (300, 8)


async def test_a_journal_that_cannot_be_written_is_reported_and_the_migration_stands(work: dict[str, str],
                                                                                     tmp_path: Path) -> None:
    journal = tmp_path / "a-directory"
    journal.mkdir()
    out = os.path.join(work["output"], "dataloader-state", "checkpoint-300")
    app = make_app(**work, journal=str(journal))
    async with running(app, (120, 40)) as pilot:
        await migrate_in_console(app, pilot)
        [warning] = [m for m in notifications(app) if m.startswith("journal ")]
        assert str(journal) in warning and "the migration itself stands" in warning
    assert os.path.exists(os.path.join(out, "migration_receipt.json")) and os.listdir(journal) == []


# --------------------------------------------------------------------------- free-space target


#: As tests/cache/test_cache_freespace.py: a 20 MiB tmpfs, entries of known size and age. GC order A..E; F in use.
ENTRIES = {"A": (4, 5 * DAY), "B": (2, 4 * DAY), "C": (3, 3 * DAY), "D": (1, 2 * DAY), "E": (2, DAY), "F": (1, 60)}


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE", raising=False)
    with tmpfs(tmp_path / "shm", 20 * MIB) as mount:
        root = mount / LONG / "shard-cache"
        for name, (mib, age) in ENTRIES.items():
            sized_entry(root, name, mib, age)
        yield root


async def open_free_dialog(app: FvConsoleApp, pilot, percent: str) -> EvictScreen:
    await started(app, pilot)
    await press(app, pilot, "3")
    await press(app, pilot, "f")
    screen = app.screen
    assert isinstance(screen, EvictScreen) and app.focused.id == "evict-free-pct"
    await press(app, pilot, *percent)
    return screen


async def test_free_space_target_in_the_eviction_dialog(shm: Path, tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    app = make_app(cache=shm, journal=str(journal))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_free_dialog(app, pilot, "60")  # 60% of 20 MiB = 12 MiB, as the CLI test's target
        preview = screen.query_one("#evict-preview").render().plain
        # 7 MiB - 6 pages free; A (4 MiB + a page) and B (2 MiB + a page) bring it past 12 MiB.
        assert "✓ target 12.0 MiB free (min free 60%): 7.0 MiB free now, about 13.0 MiB after" in preview.replace("\n", " ")
        assert [line.split()[0] for line in preview.splitlines() if "free space #" in line] == [key_of("A"), key_of("B")]
        assert "--min-free" not in preview
        assert "filesystem free 7.0 MiB of 20.0 MiB → about 13.0 MiB" in str(screen.query_one("#evict-usage").render())
        await press(app, pilot, "enter")
        assert isinstance(app.screen, ConfirmScreen) and app.focused.id == "cancel"
        await press(app, pilot, "enter")  # the default is Cancel: nothing deleted
        assert len(os.listdir(shm)) == 6
        await open_free_dialog(app, pilot, "60")
        await press(app, pilot, "enter")
        await press(app, pilot, "left", "enter")
        result = rendered(app, "#cache-result")
        assert "evicted 2 entries" in result and "(min free 60%): reached" in result
    assert sorted(os.listdir(shm)) == sorted(key_of(n) for n in "CDEF")
    assert fs_free(shm) >= 12 * MIB
    [record] = lines(journal)
    assert record["command"] == "fvconsole console: evict to free space, min free 60%"
    assert sorted(record["items"]) == sorted([key_of("A"), key_of("B")])
    assert record["details"]["free_target_bytes"] == 12 * MIB and record["details"]["free_target_reached"] is True


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_an_unreachable_target_evicts_nothing_unless_best_effort(shm: Path, tmp_path: Path, size) -> None:
    journal = tmp_path / "journal.jsonl"
    app = make_app(cache=shm, journal=str(journal))
    async with app.run_test(size=size) as pilot:
        screen = await open_free_dialog(app, pilot, "95")  # 19 MiB: F is in use, so at most 7+12+5 pages MiB
        preview = " ".join(screen.query_one("#evict-preview").render().plain.split())
        assert "✗ target 19.0 MiB free (min free 95%) cannot be reached" in preview
        assert "nothing is evicted for it" in preview and "tick best effort" in preview and "--best" not in preview
        assert "0 to evict" in preview and screen.query_one("#evict-continue").disabled
        best = screen.query_one("#evict-best-effort")
        assert best.region.right <= screen.query_one("#dialog").region.right, "best effort is cut off"
        best.focus()
        await press(app, pilot, "space")
        preview = " ".join(screen.query_one("#evict-preview").render().plain.split())
        assert "best effort: evicting toward it anyway" in preview and "5 to evict" in preview and "in use" in preview
        assert len(os.listdir(shm)) == 6
        screen.query_one("#evict-continue").focus()
        await press(app, pilot, "enter")
        assert isinstance(app.screen, ConfirmScreen)
        await press(app, pilot, "left", "enter")
    assert os.listdir(shm) == [key_of("F")]
    [record] = lines(journal)
    assert record["command"] == "fvconsole console: evict to free space, min free 95%, best effort"


async def test_a_bad_free_space_value_is_worded_with_the_field(shm: Path, tmp_path: Path) -> None:
    app = make_app(cache=shm, journal=str(tmp_path / "journal.jsonl"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_free_dialog(app, pilot, "150")
        preview = screen.query_one("#evict-preview").render().plain
        assert "min free (%)" in preview and "from 0 to 100" in preview and "--min-free" not in preview
        assert screen.query_one("#evict-continue").disabled
