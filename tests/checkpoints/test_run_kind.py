"""Run kinds: `checkpoints ls/show` say whether a legacy checkpoint's loader state is streaming or map-style."""

from __future__ import annotations

import json

import pytest

from fvconsole.demo.builders import run_config, write_checkpoint


@pytest.fixture()
def runs(tmp_path):
    def config(out, loader):
        return run_config(data_path=str(tmp_path / "d"), manifest_path=str(tmp_path / "m.json"),
                          output_dir=str(out), num_gpus=2, dataloader_type=loader)
    streaming = write_checkpoint(tmp_path / "s", 10, config(tmp_path / "s", "streaming"))
    mapped = write_checkpoint(tmp_path / "m", 20, config(tmp_path / "m", "map"))
    rank_local = write_checkpoint(tmp_path / "m", 30, config(tmp_path / "m", "streaming"), kind="rank-local")
    return streaming, mapped, rank_local


def test_ls_json_run_kinds(runs, tmp_path, cli) -> None:
    streaming, mapped, rank_local = runs
    _, out, _ = cli(["checkpoints", "ls", str(tmp_path / "m"), "--json"])
    rows = {c["path"]: c["run_kind"] for c in json.loads(out)["checkpoints"]}
    assert rows[rank_local] is None  # not legacy: nothing to migrate
    assert rows[mapped]["loader"] == "map-style" and rows[mapped]["dataloader_type"] == "map"
    assert rows[mapped]["migratable"] is False and "training.data.dataloader_type" in rows[mapped]["why"]
    _, out, _ = cli(["checkpoints", "ls", str(tmp_path / "s"), "--json"])
    (row,) = json.loads(out)["checkpoints"]
    assert row["run_kind"] == {"loader": "streaming", "dataloader_type": "streaming", "migratable": True, "why": None}


def test_ls_text_has_a_loader_column_and_a_note(runs, tmp_path, cli) -> None:
    _, mapped, _ = runs
    code, out, _ = cli(["checkpoints", "ls", str(tmp_path / "m")])
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:4] == ["step", "complete", "kind", "loader"]
    by_step = {line.split()[0]: line.split() for line in lines[2:4]}
    assert by_step["20"][2:4] == ["legacy", "map-style"] and by_step["30"][2:4] == ["rank-local", "-"]
    assert any(line.startswith(f"note: {mapped}: not migratable:") for line in lines)


def test_show_says_the_run_kind(runs, cli) -> None:
    streaming, mapped, _ = runs
    _, out, _ = cli(["checkpoints", "show", mapped])
    assert "legacy dataloader state: map-style loader, not migratable" in out
    _, out, _ = cli(["checkpoints", "show", streaming, "--json"])
    assert json.loads(out)["run_kind"]["migratable"] is True
    _, out, _ = cli(["checkpoints", "show", streaming])
    assert "legacy dataloader state: streaming loader (migratable" in out


def test_the_demo_has_a_map_style_run(tmp_path, cli) -> None:
    from fvconsole.demo.workspace import build_demo_workspace

    ws = build_demo_workspace(str(tmp_path / "ws"))
    _, out, _ = cli(["checkpoints", "ls", ws.map_style_output_dir, "--json"])
    (row,) = json.loads(out)["checkpoints"]
    assert row["kind"] == "legacy" and row["run_kind"]["loader"] == "map-style"


@pytest.mark.tui
def test_the_console_shows_the_loader_and_why_map_style_is_not_migratable(runs, tmp_path) -> None:
    """View 1 has a loader column (as `checkpoints ls`), and the detail pane says why a map-style run
    cannot be migrated; at 80x24 the loader cell is whole."""
    import asyncio

    from console_apps import make_app
    from tour import settle, started

    _, mapped, rank_local = runs

    async def main() -> None:
        app = make_app(output=tmp_path / "m")
        async with app.run_test(size=(80, 24)) as pilot:
            await started(app, pilot)
            table = app.query_one("#ckpt-table")
            labels = [str(c.label) for c in table.columns.values()]
            assert "loader" in labels
            loader = labels.index("loader")
            cells = {k.value: [str(c) for c in table.get_row(k)] for k in table.rows}
            assert cells[mapped][loader] == "map-style" and cells[rank_local][loader] == "-"
            table.move_cursor(row=table.get_row_index(mapped))
            await settle(app, pilot)
            detail = " ".join(str(app.query_one("#ckpt-detail").render()).split())
            assert "map-style loader: not migratable" in detail
            assert "training.data.dataloader_type is 'map'" in detail
            assert "migrate to rank-local sidecars (m)" not in detail

    asyncio.run(asyncio.wait_for(main(), 120))


def test_ls_reads_each_metadata_json_once(runs, tmp_path, cli) -> None:
    """The listing's one read of a checkpoint's metadata.json gives its run kind too (it was read
    twice: once by the inspection, again for the loader column)."""
    import collections
    import sys

    _, mapped, rank_local = runs
    opened: list[str] = []
    active = [True]

    def hook(event: str, args: tuple) -> None:
        if active[0] and event == "open" and str(args[0]).endswith("metadata.json"):
            opened.append(str(args[0]))

    sys.addaudithook(hook)  # cannot be removed: switched off below
    try:
        for argv in (["checkpoints", "ls", str(tmp_path / "m")], ["checkpoints", "ls", str(tmp_path / "m"), "--json"]):
            opened.clear()
            code, _, _ = cli(argv)
            assert code == 0
            assert collections.Counter(opened) == {f"{mapped}/metadata.json": 1, f"{rank_local}/metadata.json": 1}
    finally:
        active[0] = False
