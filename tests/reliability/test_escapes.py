"""Issue 10 item 5: untrusted text never reaches the terminal raw, and is never console markup.

File names, symlink targets, config keys and values, metadata.json keys, DCP state keys and
dataset ids are data. The CLI's text output and ``error:`` lines show their control
characters escaped (``\\x1b``); ``--json`` carries them exactly. The console renders them as
plain text: a dataset id ``[/]s52`` must not crash it, ``[link=...]`` must not become a link.

Fixtures are real: Parquet written with pyarrow, a DCP checkpoint saved by torch, sidecars
written by ``fvconsole migrate``, cache entries and symlinks on disk, the real Textual app.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from console_apps import make_app, shown_notifications
from migration_runs import migrate_argv

from fvconsole.core.shared.terminal_text import printable

from .harness import CliResult, run_inproc

#: An OSC title sequence (ends with BEL), then "clear screen": what retitled and wiped the terminal.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J"
#: How the sanitiser shows it (a human can still read what the name is).
SHOWN = printable(HOSTILE)
#: Any byte a terminal would act on: C0 controls but newline, DEL, C1 controls; bidi controls.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

STEP, WORLD = 2, 4


def hostile_id(index: int) -> str:
    """The dataset's ``id`` of global sample ``index``: markup, a link, escapes or bidi.

    (``index % 7``: the ranks' next samples are 20 apart, and each kind must be read by one.)
    """
    kinds = (f"[/]s{index}", f"[link=https://evil]x{index}[/link]", f"\x1b]0;x\x07{index}", f"id\u202e{index}")
    return kinds[index % 7 % 4]


def assert_no_raw_controls(result: CliResult) -> None:
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        found = RAW_CONTROL.search(text)
        assert found is None, f"raw {found.group()!r} on {name}\n{result.describe()!r}"
    assert "Traceback" not in result.stderr, result.describe()


# --------------------------------------------------------------------------- fixtures


def _rewrite_ids(dataset_root: str) -> None:
    """Replace the builder's ``sample-%06d`` ids by :func:`hostile_id`, keeping every row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for dirpath, _dirs, names in os.walk(dataset_root):
        for name in names:
            path = os.path.join(dirpath, name)
            source = pq.ParquetFile(path)
            groups = [source.read_row_group(i) for i in range(source.num_row_groups)]
            schema = source.schema_arrow
            with pq.ParquetWriter(path + ".new", schema) as writer:
                for table in groups:
                    ids = [hostile_id(int(old.removeprefix("sample-"))) for old in table.column("id").to_pylist()]
                    table = table.set_column(schema.get_field_index("id"), "id", pa.array(ids, pa.string()))
                    writer.write_table(table, row_group_size=table.num_rows)
            os.replace(path + ".new", path)


def _resave_dcp_with_key(ckpt: str, config: dict, key: str) -> None:
    """Replace the checkpoint's DCP save by a real one that also holds a top-level state ``key``."""
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp

    from fvconsole.demo.builders import loader_state

    dcp_dir = os.path.join(ckpt, "dcp")
    shutil.rmtree(dcp_dir)
    state = {"model": {"w": torch.zeros(2)}, "dataloader": loader_state(config, 0, WORLD, STEP),
             key: {"x": torch.ones(1)}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, storage_writer=dcp.FileSystemWriter(dcp_dir, sync_files=False), no_dist=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A legacy run whose ids, config, metadata.json and DCP keys carry escapes and markup."""
    from fvconsole.demo.builders import (
        build_manifest,
        run_config,
        write_checkpoint,
        write_dataset,
        write_run_config,
    )

    base = tmp_path_factory.mktemp("escapes")
    dataset = write_dataset(base / "dataset", files=2, row_groups_per_file=4, rows_per_group=10)
    _rewrite_ids(dataset)
    manifest = str(base / "cache" / "manifest.json")
    build_manifest(dataset, manifest)
    output = base / "output"
    config = run_config(data_path=dataset, manifest_path=manifest, output_dir=str(output), num_gpus=WORLD,
                        train_batch_size=2)
    config["notes"] = {"owner": f"ck{HOSTILE}"}
    ckpt = write_checkpoint(output, STEP, config)
    _resave_dcp_with_key(ckpt, config, f"state{HOSTILE}")
    meta_path = os.path.join(ckpt, "metadata.json")
    meta = json.loads(Path(meta_path).read_text())
    meta[f"extra{HOSTILE}"] = 1
    Path(meta_path).write_text(json.dumps(meta))
    # The run config differs from the embedded one on non-critical keys only: the migration
    # goes ahead and the mismatch report shows the hostile key and both hostile values.
    run_cfg = json.loads(json.dumps(config))
    run_cfg["notes"] = {"owner": f"cfg{HOSTILE}", f"key{HOSTILE}": "[/]v"}
    config_path = write_run_config(base / "run.yaml", run_cfg)
    return {"base": base, "config": config_path, "output": str(output), "checkpoint": ckpt}


def migrate_args(run: dict, out: str | Path, *extra: str) -> list[str]:
    return migrate_argv(run["config"], run["checkpoint"], out, step=STEP, world=WORLD, consumed=STEP, extra=extra)


@pytest.fixture(scope="module")
def sidecars(run: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import contextlib
    import io

    from fvconsole.cli import main

    out = tmp_path_factory.mktemp("escapes-out") / "state"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(migrate_args(run, out, "--yes")) == 0
    return out


def hostile_cache(root: Path) -> dict[str, str]:
    """A cache root with a foreign file, a symlinked entry and an entry holding a hostile file name."""
    from .workspace import cheap_entries

    keys = cheap_entries(root, 2, prefix="esc")
    (root / f"foreign{HOSTILE}").write_text("not a cache entry")
    (root / keys[0] / f"shard{HOSTILE}.bin").write_bytes(b"x")
    link_key = "ab" * 8
    os.symlink(f"/nowhere/target{HOSTILE}", root / link_key)
    return {"plain": keys[1], "with_file": keys[0], "link": link_key}


# --------------------------------------------------------------------------- CLI


@pytest.mark.fault("security", "escape sequences in DCP keys, metadata and config keys/values (`checkpoints show`)")
def test_checkpoints_show_escapes_text_and_keeps_json_exact(run: dict, capsys, trials) -> None:
    text = run_inproc(["checkpoints", "show", run["checkpoint"], "--config", run["config"]], capsys)
    assert text.returncode == 0, text.describe()
    assert_no_raw_controls(text)
    assert f"state{SHOWN}" in text.stdout  # the DCP key, readable
    assert f"notes.key{SHOWN}" in text.stdout  # the config key of a mismatch row
    trials.add("text escaped")
    raw = run_inproc(["checkpoints", "show", run["checkpoint"], "--config", run["config"], "--json"], capsys)
    payload = json.loads(raw.stdout)
    assert payload["dcp"]["prefixes"][f"state{HOSTILE}"] == 1
    paths = {m["path"]: m for m in payload["mismatches"]}
    assert paths["notes.owner"]["checkpoint"] == f"ck{HOSTILE}"
    assert paths["notes.owner"]["config"] == f"cfg{HOSTILE}"
    assert f"notes.key{HOSTILE}" in paths
    trials.add("json exact")


@pytest.mark.fault("security", "escape sequences in config keys/values in the migrate mismatch report")
def test_migrate_dry_run_mismatch_report_is_escaped(run: dict, tmp_path: Path, capsys, trials) -> None:
    text = run_inproc(migrate_args(run, tmp_path / "out"), capsys)
    assert text.returncode == 0, text.describe()
    assert_no_raw_controls(text)
    assert f"notes.key{SHOWN}" in text.stdout
    raw = run_inproc(migrate_args(run, tmp_path / "out", "--json"), capsys)
    paths = {m["path"] for m in json.loads(raw.stdout)["mismatches"]}
    assert f"notes.key{HOSTILE}" in paths
    trials.add("text escaped, json exact")


@pytest.mark.fault("security", "dataset ids with escapes and markup in `sidecars verify --deep`")
def test_verify_deep_next_ids_are_escaped(run: dict, sidecars: Path, capsys, trials) -> None:
    args = ["sidecars", "verify", "--config", run["config"], "--checkpoint", run["checkpoint"],
            "--sidecar-dir", str(sidecars), "--deep"]
    raw = run_inproc([*args, "--json"], capsys)
    assert raw.returncode == 0, raw.describe()
    ranks = json.loads(raw.stdout)["ranks"]
    ids = [r["next_sample_id"] for r in ranks]
    assert ids == [hostile_id(r["next_sample_index"]) for r in ranks]  # exact, from the Parquet data
    assert any("\x1b" in i for i in ids), "fixture: no rank reads an id with an escape"
    text = run_inproc(args, capsys)
    assert text.returncode == 0, text.describe()
    assert_no_raw_controls(text)
    for sample_id in ids:
        assert printable(sample_id) in text.stdout
    trials.add("text escaped, json exact")


@pytest.mark.fault("security", "foreign file names and symlink targets with escapes in `cache ls`")
def test_cache_ls_escapes_names_and_targets(tmp_path: Path, capsys, trials) -> None:
    root = tmp_path / "cache"
    keys = hostile_cache(root)
    text = run_inproc(["cache", "ls", str(root)], capsys)
    assert text.returncode == 0, text.describe()
    assert_no_raw_controls(text)
    assert f"foreign{SHOWN}" in text.stdout and keys["link"] in text.stdout
    raw = run_inproc(["cache", "ls", str(root), "--json"], capsys)
    payload = json.loads(raw.stdout)
    assert f"foreign{HOSTILE}" in payload["foreign"]
    link = next(e for e in payload["entries"] if e["key"] == keys["link"])
    assert link["symlink_target"] == f"/nowhere/target{HOSTILE}"
    plan = run_inproc(["cache", "evict", str(root), "--key", keys["link"]], capsys)
    assert plan.returncode == 0, plan.describe()
    assert_no_raw_controls(plan)
    trials.add("text escaped, json exact")


@pytest.mark.fault("security", "escape sequences in a path named by an `error:` line")
def test_error_line_escapes_the_file_name(tmp_path: Path, capsys, trials) -> None:
    missing = tmp_path / f"root{HOSTILE}"
    text = run_inproc(["cache", "ls", str(missing)], capsys)
    assert text.returncode == 1, text.describe()
    assert_no_raw_controls(text)
    lines = text.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"root{SHOWN}" in lines[0], text.describe()
    raw = run_inproc(["cache", "ls", str(missing), "--json"], capsys)
    assert f"root{HOSTILE}" in json.loads(raw.stdout)["error"]
    trials.add("error line escaped, json exact")


@pytest.mark.fault("security", "escape sequences in refusal lines (foreign file in the output dir)")
def test_migrate_refusal_lines_are_escaped(run: dict, tmp_path: Path, capsys, trials) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / f"mine{HOSTILE}").write_text("x")
    text = run_inproc(migrate_args(run, out), capsys)
    assert text.returncode == 1, text.describe()
    assert_no_raw_controls(text)
    assert f"mine{SHOWN}" in text.stdout + text.stderr
    trials.add("refused, escaped")


@pytest.mark.fault("security", "escape sequences in an unrecognised command-line argument (argparse usage error)")
def test_usage_error_escapes_arguments(tmp_path: Path, capsys, trials) -> None:
    text = run_inproc(["cache", "ls", str(tmp_path), f"extra{HOSTILE}"], capsys)
    assert text.returncode == 2, text.describe()
    assert_no_raw_controls(text)
    assert f"extra{SHOWN}" in text.stderr
    trials.add("usage error escaped")


# --------------------------------------------------------------------------- console

SIZE = (160, 48)


async def started(app, pilot) -> None:
    from tour import settle

    for _ in range(1000):
        if app.loaded:
            break
        await pilot.pause(0.02)
    assert app.loaded
    await settle(app, pilot)


def screen_text(app) -> str:
    """What the screen shows (text of the SVG export: the same strips the terminal gets)."""
    import html

    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def assert_screen_clean(app) -> str:
    text = screen_text(app)
    found = RAW_CONTROL.search(text)
    assert found is None, f"raw {found.group()!r} reached the screen"
    return text


def rendered_cell(table, row: int, column: int):
    """The cell as the table draws it (its own cell formatter), as a Rich Text."""
    from fvconsole.tui.widgets.strip_rows import cell_text

    return cell_text(table.get_cell_at((row, column)))


def has_link(text) -> bool:
    from rich.style import Style

    styles = [Style.parse(s.style) if isinstance(s.style, str) else s.style for s in text.spans]
    return any(style.link for style in styles) or bool(text.style and Style.parse(str(text.style)).link)


@pytest.mark.tui
@pytest.mark.fault("security", "dataset ids `[/]s52`, `[link=...]`, escapes in the console's next-id column")
def test_console_next_id_column_shows_ids_literally(run: dict, tmp_path: Path, trials) -> None:
    from tour import press

    async def body() -> None:
        app = make_app(run["config"], run["output"], None)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            await press(app, pilot, "m")
            app.query_one("#mig-output").value = str(tmp_path / "out")
            await press(app, pilot, "ctrl+r")
            assert app.is_running
            table = app.query_one("#mig-ranks")
            assert table.row_count == WORLD
            labels = [str(c.label) for c in table.ordered_columns]
            next_sample, next_id = labels.index("next sample"), labels.index("next id")
            shown = []
            for row in range(table.row_count):
                index = int(str(table.get_cell_at((row, next_sample))))
                cell = rendered_cell(table, row, next_id)
                assert cell.plain == printable(hostile_id(index)), (row, cell.plain)
                assert not has_link(cell), f"row {row}: the id became a link"
                shown.append(hostile_id(index))
            assert any(s.startswith("[/]") for s in shown) and any(s.startswith("[link") for s in shown), shown
            text = assert_screen_clean(app)
            assert "[link=https:" in text or "[/]s" in text
            trials.add("ids shown literally, no crash, no link")

    asyncio.run(body())


@pytest.mark.tui
@pytest.mark.fault("security", "escapes in metadata.json keys, DCP keys and config mismatches in the console")
def test_console_checkpoint_detail_escapes_keys(run: dict, trials) -> None:
    async def body() -> None:
        app = make_app(run["config"], run["output"], None)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            detail = str(app.query_one("#ckpt-detail").render())
            for expected in (f"extra{SHOWN}", f"state{SHOWN}", f"notes.key{SHOWN}", f"cfg{SHOWN}"):
                assert expected in detail, expected
            assert RAW_CONTROL.search(detail) is None
            assert_screen_clean(app)
            trials.add("escaped in the detail pane")

    asyncio.run(body())


@pytest.mark.tui
@pytest.mark.fault("security", "escapes and markup in cache file names, symlink targets and error notifications")
def test_console_cache_view_escapes_names(tmp_path: Path, trials) -> None:
    from tour import press, settle

    root = tmp_path / "cache"
    keys = hostile_cache(root)

    async def body() -> None:
        app = make_app(None, None, str(root))
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            await press(app, pilot, "3")
            table = app.query_one("#cache-table")
            for key in (keys["with_file"], keys["link"]):
                table.move_cursor(row=table.get_row_index(key))
                await settle(app, pilot)
                detail = str(app.query_one("#cache-detail").render())
                assert RAW_CONTROL.search(detail) is None, detail
                assert SHOWN in detail, detail
                assert_screen_clean(app)
            trials.add("file names and symlink targets escaped")

    asyncio.run(body())


@pytest.mark.tui
@pytest.mark.fault("security", "markup and escapes in an error notification (a cache root named `[/]...`)")
def test_console_error_notification_is_plain_text(tmp_path: Path, trials) -> None:
    from tour import press

    missing = tmp_path / f"[/]gone[link=https://evil]x{HOSTILE}"

    async def body() -> None:
        app = make_app(None, None, str(missing))
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await started(app, pilot)
            await press(app, pilot, "3")
            await pilot.pause(0.1)
            assert app.is_running
            messages = [n.message for n in shown_notifications(app)]
            assert any(printable(str(missing)) in m for m in messages), messages
            assert all(RAW_CONTROL.search(m) is None for m in messages), messages
            toasts = [str(toast.render()) for toast in app.screen.query("Toast")]
            assert any(printable(str(missing)) in t for t in toasts), toasts  # drawn, as written
            assert_screen_clean(app)
            trials.add("notification shown literally, app up")

    asyncio.run(body())


@pytest.mark.tui
@pytest.mark.fault("security", "escapes in a checkpoints path: paths bar, migration form inputs, plan banner")
def test_console_paths_with_escapes_are_drawn_escaped_and_kept_exact(run: dict, tmp_path: Path, trials) -> None:
    from tour import press

    output = tmp_path / f"runs{HOSTILE}"
    shutil.copytree(run["output"], output)
    checkpoint = str(output / f"checkpoint-{STEP}")

    async def body() -> None:
        app = make_app(run["config"], str(output), None)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            assert f"runs{SHOWN}" in str(app.query_one("#paths").render())
            await press(app, pilot, "m")
            assert app.query_one("#mig-checkpoint").value == checkpoint  # the value stays exact
            assert_screen_clean(app)
            await press(app, pilot, "ctrl+r")
            assert app.query_one("#mig-ranks").row_count == WORLD, str(app.query_one("#mig-banner").render())
            assert f"runs{SHOWN}" in str(app.query_one("#mig-banner").render())
            assert_screen_clean(app)
            trials.add("drawn escaped, values exact, plan made")

    asyncio.run(body())
