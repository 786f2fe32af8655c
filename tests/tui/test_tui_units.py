"""Pieces of the console that can be checked without a full workspace (still real files)."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest

from fvconsole.core.cache.detail import cache_entry_detail
from fvconsole.core.migration.defaults import migration_defaults
from fvconsole.tui.cache.view import lru_order
from fvconsole.tui.widgets.inputs import complete_path

pytestmark = pytest.mark.tui
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_complete_path_prefers_sorted_match_and_marks_dirs(tmp_path) -> None:
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alphabet.yaml").write_text("x")
    (tmp_path / ".hidden").mkdir()
    assert complete_path(str(tmp_path / "al")) == str(tmp_path / "alpha") + "/"
    assert complete_path(str(tmp_path / "alphab")) == str(tmp_path / "alphabet.yaml")
    assert complete_path(str(tmp_path / "zzz")) is None
    assert complete_path(str(tmp_path / "missing" / "x")) is None
    assert complete_path(str(tmp_path) + "/") == str(tmp_path / "alpha") + "/"


def test_migration_defaults_derive_values_and_stay_outside_checkpoint(tmp_path) -> None:
    from fvconsole.core.formats.runconfig import RunConfig

    cfg = RunConfig(path=None, data={"training": {"distributed": {"num_gpus": 64},
                                                  "loop": {"gradient_accumulation_steps": 4}}},
                    sha256=None, overrides=())
    ckpt = str(tmp_path / "out" / "checkpoint-4000")
    d = migration_defaults(ckpt, 4000, "run.yaml", cfg)
    assert (d.expected_step, d.expected_world_size, d.consumed_batches_per_rank) == (4000, 64, 16000)
    assert os.path.commonpath([d.output_dir, ckpt]) != ckpt
    assert d.output_dir == str(tmp_path / "out" / "dataloader-state" / "checkpoint-4000")
    empty = migration_defaults(ckpt, 4000, None, None)
    assert empty.expected_world_size is None and empty.consumed_batches_per_rank is None


def test_lru_order_matches_fastvideo_gc_order(tmp_path) -> None:
    from fvconsole.core.cache import gc_sort_key, scan_cache
    from fvconsole.demo.cache_builders import write_cache_entry

    now = 1_800_000_000.0
    for age, seed in ((3600, 1), (86400, 2), (60, 3)):
        write_cache_entry(tmp_path, last_used=now - age, seed=seed, num_shards=2, tensor_bytes=256)
    write_cache_entry(tmp_path, status="incomplete", seed=4, num_shards=2, tensor_bytes=256)
    scan = scan_cache(str(tmp_path))
    ordered = lru_order(scan.entries)
    assert [e.key for e in ordered] == [e.key for e in sorted(scan.entries, key=gc_sort_key)]
    assert ordered[0].status == "incomplete"  # no manifest: first victim, like FastVideo's GC


def _age_atimes(root) -> dict[str, float]:
    """Set every file's atime well before its mtime (so a plain read would bump it on relatime)."""
    atimes = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            os.utime(path, (st.st_mtime - 10_000, st.st_mtime))
            atimes[path] = os.stat(path).st_atime
    return atimes


def test_cache_entry_detail_uses_the_scan_and_leaves_atimes_alone(tmp_path) -> None:
    from fvconsole.core.cache import scan_cache
    from fvconsole.demo.cache_builders import write_cache_entry

    good = write_cache_entry(tmp_path, seed=1, num_shards=2, tensor_bytes=256)
    broken = write_cache_entry(tmp_path, seed=2, status="invalid-manifest", num_shards=2, tensor_bytes=256)
    bare = write_cache_entry(tmp_path, seed=3, status="incomplete", num_shards=2, tensor_bytes=256)
    os.symlink("/etc/passwd", os.path.join(good, "planted"))
    scan = scan_cache(str(tmp_path))
    by_path = {e.path: e for e in scan.entries}
    atimes = _age_atimes(tmp_path)

    detail = cache_entry_detail(by_path[good])
    assert detail.manifest_error is None and detail.summary.params == 3
    assert dict(detail.summary.dtypes) == {"torch.bfloat16": 2, "torch.float32": 1}
    assert [name for name, _ in detail.files] == ["manifest.json", "shard0-of-2.safetensors",
                                                   "shard1-of-2.safetensors"]
    assert detail.other == ("planted",)  # listed, never followed
    bad = cache_entry_detail(by_path[broken])
    assert bad.summary is None and "not usable" in bad.manifest_error
    assert "manifest.json" in by_path[broken].explanation  # which the pane shows above it
    assert cache_entry_detail(by_path[bare]).manifest_error == "missing"
    # Looking at entries must not change what the listing (and FastVideo's GC) sees.
    assert {p: os.stat(p).st_atime for p in atimes} == atimes


def test_rank_table_holds_4096_ranks(tmp_path) -> None:
    from fvconsole.core.formats import streaming
    from fvconsole.core.migration import plan as migration
    from fvconsole.demo import builders
    from fvconsole.demo.builders import synthetic_manifest
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.messages import MigrationPreviewed
    from fvconsole.tui.migration.view import MigrationView
    from fvconsole.tui.state import ConsoleState

    run = builders.build_run(tmp_path / "run", steps=(3,), num_gpus=2, sp_size=1)
    request = migration.MigrationRequest(
        config_path=run.config_path, checkpoint=run.checkpoint(3), output_dir=str(tmp_path / "side"),
        expected_step=3, expected_world_size=2, consumed_batches_per_rank=3)
    small = migration.preview_migration(request)
    assert small.plan is not None, small.refusals
    manifest = synthetic_manifest(20_000, rows=64)
    rows = [g["rows"] for g in manifest["row_groups"]]
    starts = [g["sample_start"] for g in manifest["row_groups"]]
    topo = streaming.Topology(world_size=4096, sp_world_size=2, batch_size=2, seed=42, shuffle=True)
    shards, spw = streaming.shard_layout(rows, topo)
    cursors = streaming.compute_cursors(rows, starts, shards, topo, 100)
    plan = dataclasses.replace(small.plan, world_size=4096, sp_world_size=2, ranks=cursors, samples_per_worker=spw,
                               num_row_groups=len(rows), total_rows=manifest["total_rows"])
    preview = dataclasses.replace(small, plan=plan)

    async def body() -> None:
        app = FvConsoleApp(ConsoleState(read_only=True))
        async with app.run_test(size=(140, 42)) as pilot:
            while not app.loaded:
                await pilot.pause(0.02)
            await pilot.press("2")
            view = app.query_one(MigrationView)
            view.post_message(MigrationPreviewed(preview))
            await pilot.pause()
            await pilot.pause()
            table = app.query_one("#mig-ranks")
            assert table.row_count == 4096
            assert table.get_row_at(4095)[0] == "4095"
            await pilot.press("ctrl+end")
            await pilot.pause()
            assert table.cursor_row == 4095
            view.apply_filter("4095")
            assert table.row_count >= 1 and all("4095" in "".join(table.get_row_at(i))
                                                for i in range(table.row_count))
            assert "4096" in str(app.query_one("#mig-summary").render())
            # The next ids would need thousands of Parquet reads: skipped with a note, not attempted.
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert view.next_ids_note is not None and "distinct row groups" in view.next_ids_note
            assert "not read" in str(app.query_one("#mig-ids-note").render())  # one note, under the table
            assert "not read" not in str(app.query_one("#mig-summary").render())
            view.apply_filter("")
            assert table.row_count == 4096 and table.get_row_at(17)[-1] == "-"

    asyncio.run(body())


def test_fit_path_keeps_the_end_of_a_path() -> None:
    from fvconsole.tui.plain import fit_path

    path = "/lustre/fsw/portfolios/video/users/alice/runs/wan-t2v-14b/output/dataloader-state/checkpoint-300"
    assert fit_path(path, 200) == path
    for width in (90, 60, 40, 25, 16):
        shown = fit_path(path, width)
        assert len(shown) <= width and shown.endswith("checkpoint-300") and "…" in shown, (width, shown)
    assert fit_path(path, 40) == "…/output/dataloader-state/checkpoint-300"  # as many last parts as fit
    assert fit_path(path, 26) == "…ader-state/checkpoint-300"  # then the end of the next part
    assert fit_path(path, 10) == "…point-300"  # not even the last part fits: its end
    assert fit_path("relative/dir/name", 12) == "…/dir/name"
    assert fit_path("/lustre/abcdefgh/checkpoint-300", 24) == "…abcdefgh/checkpoint-300"


def test_fit_path_keeps_the_end_of_the_run_name_in_the_room_there_is() -> None:
    """Issue 21 item 6: ``/tmp/…/output`` hid which run it was; the end of the run's directory
    name fills the room whole components leave, and a name is cut only when nothing else fits."""
    from fvconsole.tui.plain import fit_path

    run = "/tmp/projects/video-generation/wan2.1-t2v/run-2026-11-30-finetune-ablation"
    assert fit_path(run + "/output", 26) == "…-finetune-ablation/output"
    assert fit_path(run + "/output", 13) == "…ation/output"
    assert fit_path(run + "/output", 45) == "…-t2v/run-2026-11-30-finetune-ablation/output"
    assert fit_path(run + "/output", 50) == "…an2.1-t2v/run-2026-11-30-finetune-ablation/output"
    assert fit_path(run + "/output", 10) == "…/output"  # one or two cells of a name say nothing
    assert fit_path(run + "/shard-cache", 13) == "…/shard-cache"
    assert fit_path(run + "/shard-cache", 11) == "…hard-cache"  # only when the last name itself does not fit
    assert fit_path(run + "/output", 200) == run + "/output"


def test_paths_line_cuts_no_name_while_it_has_room_and_shares_the_rest() -> None:
    from fvconsole.tui.widgets.statics import path_shares

    run = "/tmp/projects/video-generation/wan2.1-t2v/run-2026-11-30-finetune-ablation"
    paths = [run + "/run.yaml", run + "/output", run + "/shard-cache"]
    # Room for "…/run.yaml" (10), "…/output" (8), "…/shard-cache" (13), then 5 more each.
    assert path_shares(paths, 46) == [15, 13, 18]
    assert path_shares(paths, 31) == [10, 8, 13]
    assert path_shares(["/a/b", run + "/output"], 40) == [4, 36]


def test_docs_keys_table_is_generated_from_the_bindings() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("console_keys", os.path.join(REPO, "scripts", "console_keys.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with open(script.DOC, encoding="utf-8") as fh:
        text = fh.read()
    assert script.replace_block(text, script.table()) == text, \
        "docs/console.md's keys table is out of date: python scripts/console_keys.py --update"
    assert "| `c` | 3 Shard cache |" in text  # the table is really there (not an empty block)


def test_styles_ship_with_the_package(tmp_path) -> None:
    """The .tcss files are package data: in the installed package and in a built wheel."""
    import importlib.resources
    import subprocess
    import sys
    import zipfile

    from fvconsole.tui.app import FvConsoleApp

    styles = importlib.resources.files("fvconsole.tui") / "styles"
    for name in FvConsoleApp.CSS_PATH:
        assert (importlib.resources.files("fvconsole.tui") / name).is_file(), name
    pytest.importorskip("setuptools")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path), REPO], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {proc.stderr[-300:]}")
    (wheel,) = tmp_path.glob("fvconsole-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"fvconsole/tui/styles/{p.name}" for p in styles.iterdir() if p.name.endswith(".tcss")}
    assert len(shipped) == 3 and shipped <= names, shipped - names


def test_a_fit_static_lays_the_screen_out_again_only_when_its_height_changes() -> None:
    # A detail pane following the cursor re-ran the whole screen's layout on every move; a text
    # as tall as the one shown is only repainted, and a held glimpse keeps the height it replaces.
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll

    from fvconsole.tui.widgets.statics import FitStatic

    def lines(*words: str):
        return lambda width: "\n".join(words)

    class Pane(App[None]):
        def compose(self) -> ComposeResult:
            with VerticalScroll():
                yield FitStatic(id="pane")

    async def main() -> None:
        app = Pane()
        async with app.run_test(size=(40, 20)) as pilot:
            pane = app.query_one(FitStatic)
            layouts = []
            app.screen.screen_layout_refresh_signal.subscribe(app.screen, lambda _screen: layouts.append(1),
                                                              immediate=True)

            async def shown(build, **kwargs) -> tuple[int, str, int]:
                before = len(layouts)
                pane.show(build, **kwargs)
                await pilot.pause()
                await pilot.pause()
                return pane.size.height, str(pane.render()), len(layouts) > before

            height, text, laid_out = await shown(lines("a", "b", "c", "d", "e"))
            assert (height, text) == (5, "a\nb\nc\nd\ne") and laid_out
            assert await shown(lines("v", "w", "x", "y", "z")) == (5, "v\nw\nx\ny\nz", False)
            assert await shown(lines("1", "2", "3", "4", "5", "6", "7", "8")) == (8, "1\n2\n3\n4\n5\n6\n7\n8", True)
            assert await shown(lines("p", "q"), hold=True) == (8, "p\nq" + "\n" * 6, False)
            assert await shown(lines("k", "l", "m", "n", "o", "p", "q", "r")) == (8, "k\nl\nm\nn\no\np\nq\nr", False)
            assert await shown(lines("one")) == (1, "one", True)

    asyncio.run(main())
