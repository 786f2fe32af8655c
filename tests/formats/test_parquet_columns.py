"""`training.data.preprocessed_data_type` in the migration preview (issue 22, item 4).

FastVideo's streaming loader keeps the manifest only while its ``columns`` equal the run's
projection; otherwise it rebuilds it at resume from the Parquet footers (same fingerprint when
the row groups are the same) or fails on a file that lacks a projected column. The expected
column lists below are typed by hand from FastVideo's ``fastvideo/dataset/dataloader/schema.py``
(branch ``motion-stream/causal-kernel``); the files' columns come from pyarrow schemas built
here; the rebuilt fingerprint from the demo's mirror of FastVideo's ``_scan_manifest``.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from migration_runs import migrate_argv

from fvconsole.demo.builders import build_manifest, build_run, scan_manifest

T2V = ["id", "vae_latent_bytes", "vae_latent_shape", "vae_latent_dtype", "text_embedding_bytes",
       "text_embedding_shape", "text_embedding_dtype", "file_name", "caption", "media_type", "width", "height",
       "num_frames", "duration_sec", "fps"]
TEXT_ONLY = ["id", "text_embedding_bytes", "text_embedding_shape", "text_embedding_dtype", "caption"]
I2V_TRACK = ["id", "vae_latent_bytes", "vae_latent_shape", "vae_latent_dtype", "text_embedding_bytes",
             "text_embedding_shape", "text_embedding_dtype", "first_frame_latent_bytes", "first_frame_latent_shape",
             "first_frame_latent_dtype", "clip_feature_bytes", "clip_feature_shape", "clip_feature_dtype",
             "track_points_bytes", "track_points_shape", "track_points_dtype", "track_visibility_bytes",
             "track_visibility_shape", "track_visibility_dtype", "object_ids_bytes", "object_ids_shape",
             "object_ids_dtype", "track_weights_bytes", "track_weights_shape", "track_weights_dtype", "file_name",
             "caption", "media_type", "width", "height", "num_frames", "duration_sec", "fps"]
TYPE = "training.data.preprocessed_data_type"
WORLD = 4


def test_the_table_is_upstreams() -> None:
    from fvconsole.core.formats.parquet_columns import COLUMNS

    assert {k: list(v) for k, v in COLUMNS.items()} == {"t2v": T2V, "i2v_track": I2V_TRACK, "text_only": TEXT_ONLY}


@pytest.mark.parametrize(("value", "name"), [(None, "t2v"), ("", "t2v"), (" Text_Only ", "text_only"),
                                             ("i2v_track", "i2v_track"), (False, "t2v"), ("t2vx", None),
                                             (5, None), (["t2v"], None)])
def test_the_value_is_read_as_fastvideo_reads_it(value, name) -> None:
    """``str(value or "t2v").strip().lower()`` in one of the three (fastvideo/train/utils/config.py)."""
    from fvconsole.core.formats.parquet_columns import data_type

    found = data_type(value)
    assert (found.name if found is not None else None) == name


@pytest.fixture()
def run(tmp_path):
    return build_run(tmp_path / "run", steps=(2,), num_gpus=WORLD, files=3, row_groups_per_file=2)


def preview(cli, run, tmp_path, *extra: str) -> tuple[int, str, str]:
    return cli(migrate_argv(run.config_path, run.checkpoints[0], tmp_path / "sidecars", step=2, world=WORLD,
                            consumed=2, extra=extra))


def parquet_files(root: str) -> list[str]:
    return sorted(os.path.realpath(os.path.join(d, n)) for d, _, names in os.walk(root)
                  for n in names if n.endswith(".parquet"))


def test_columns_that_match_are_said_and_no_footer_is_read(run, tmp_path, cli) -> None:
    code, out, _ = preview(cli, run, tmp_path)
    assert code == 0
    assert f"columns:    columns match: the manifest's are the 15 of 't2v' ({TYPE} not set: FastVideo's default)" in out
    code, out, _ = preview(cli, run, tmp_path, "--json")
    columns = json.loads(out)["plan"]["columns"]
    assert columns["verdict"] == "match" and columns["parquet_footers_read"] == 0 and columns["defaulted"] is True
    assert columns["expected_columns"] == T2V


def test_another_projection_whose_columns_every_file_has_rebuilds_with_the_same_fingerprint(run, tmp_path, cli) -> None:
    before = {p: os.stat(p) for p in parquet_files(run.dataset_root)}
    code, out, _ = preview(cli, run, tmp_path, "--set", f"{TYPE}=text_only", "--json")
    assert code == 0
    columns = json.loads(out)["plan"]["columns"]
    rebuilt = scan_manifest(run.dataset_root, TEXT_ONLY)  # what FastVideo would write at resume
    with open(run.manifest_path, encoding="utf-8") as f:
        assert rebuilt["fingerprint"] == json.load(f)["fingerprint"]
    assert columns["verdict"] == "rebuild" and columns["rebuilt_fingerprint"] == rebuilt["fingerprint"]
    assert columns["parquet_footers_read"] == 3 and columns["preprocessed_data_type"] == "text_only"
    assert {p: (s.st_mtime_ns, s.st_size) for p, s in before.items()} == {
        p: (os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in before}
    code, out, _ = preview(cli, run, tmp_path, "--set", f"{TYPE}=text_only")
    assert "FastVideo will rebuild the manifest at resume (fingerprint unchanged; 3 Parquet footers read)" in out


def test_a_file_lacking_a_projected_column_is_a_refusal_naming_file_and_column(run, tmp_path, cli) -> None:
    """The manifest was built for a projection without ``caption``; one file lacks it: FastVideo's rebuild fails."""
    files = parquet_files(run.dataset_root)
    victim = files[1]
    table = pq.read_table(victim)
    groups = [pq.ParquetFile(victim).metadata.row_group(i).num_rows for i in range(2)]
    schema = pa.schema([f for f in table.schema if f.name != "caption"])
    with pq.ParquetWriter(victim, schema) as writer:
        start = 0
        for n in groups:
            writer.write_table(table.select(schema.names).slice(start, n), row_group_size=n)
            start += n
    build_manifest(run.dataset_root, run.manifest_path, [c for c in T2V if c != "caption"])
    code, _, err = preview(cli, run, tmp_path)
    assert code == 1
    assert err.strip() == (f"error: {TYPE}: Parquet file {victim} lacks projected column caption: "
                           "FastVideo's loader will fail")
    assert not os.path.exists(tmp_path / "sidecars")
    code, out, _ = preview(cli, run, tmp_path, "--json")
    doc = json.loads(out)
    assert doc["columns"]["verdict"] == "fail" and doc["columns"]["lacking"] == [{"file": victim, "columns": ["caption"]}]


def test_a_projection_the_files_lack_refuses_with_every_missing_column(run, tmp_path, cli) -> None:
    first = parquet_files(run.dataset_root)[0]
    lacking = sorted(set(I2V_TRACK) - set(pq.read_schema(first).names))
    code, out, _ = preview(cli, run, tmp_path, "--set", f"{TYPE}=i2v_track", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["columns"]["lacking"][0] == {"file": first, "columns": lacking}
    assert doc["columns"]["lacking_files"] == 3
    assert doc["error"].startswith(f"{TYPE}: Parquet file {first} lacks projected columns {', '.join(lacking[:3])} "
                                   f"(+{len(lacking) - 3} more): FastVideo's loader will fail (projected columns are "
                                   "missing from 2 more Parquet files too)")


def test_a_rebuild_that_changes_the_fingerprint_refuses(run, tmp_path, cli) -> None:
    """A Parquet file added under the root after the manifest: the rebuild lists it, the sidecars would not load."""
    extra = os.path.join(run.dataset_root, "shards", "part-00009.parquet")
    pq.write_table(pq.read_table(parquet_files(run.dataset_root)[0]), extra)
    code, _, err = preview(cli, run, tmp_path, "--set", f"{TYPE}=text_only")
    assert code == 1
    assert "FastVideo will rebuild the manifest at resume and its fingerprint will change (1 Parquet file under " \
           "the dataset root it does not list, e.g. 'shards/part-00009.parquet'), so it will refuse the migrated " \
           "sidecars" in err
    code, _, _ = preview(cli, run, tmp_path)  # the columns match: FastVideo keeps the manifest as it is
    assert code == 0
    second = os.path.join(run.dataset_root, "shards", "part-00010.parquet")
    pq.write_table(pq.read_table(parquet_files(run.dataset_root)[0]), second)
    code, _, err = preview(cli, run, tmp_path, "--set", f"{TYPE}=text_only")
    assert code == 1 and "(2 Parquet files under the dataset root it does not list, e.g. " in err


def test_an_unknown_type_is_a_config_problem_naming_file_and_field(run, tmp_path, cli) -> None:
    import yaml

    with open(run.config_path) as f:
        config = yaml.safe_load(f)
    config["training"]["data"]["preprocessed_data_type"] = "t2vx"
    with open(run.config_path, "w") as f:
        yaml.safe_dump(config, f)
    code, _, err = preview(cli, run, tmp_path)
    errors = [line for line in err.splitlines() if not line.startswith("warning: ")]  # warnings: stderr too
    assert code == 1 and len(errors) == 1
    assert errors[0].startswith(f"error: {TYPE}: is 't2vx' in {run.config_path}; FastVideo accepts 't2v', "
                                "'i2v_track', 'text_only'")


def test_an_unknown_type_given_by_an_override_names_the_override(run, tmp_path, cli) -> None:
    code, _, err = preview(cli, run, tmp_path, "--set", f"{TYPE}=t2vx")
    errors = [line for line in err.splitlines() if not line.startswith("warning: ")]  # warnings: stderr too
    assert code == 1 and len(errors) == 1
    assert errors[0].startswith(f"error: {TYPE}: is 't2vx' in the override {TYPE}=t2vx; FastVideo accepts 't2v', "
                                "'i2v_track', 'text_only'")


@pytest.mark.tui
def test_the_console_preview_says_the_manifest_is_rebuilt(tmp_path) -> None:
    import asyncio

    from console_apps import make_app
    from tour import press, started

    from fvconsole.demo.builders import run_config, write_run_config

    built = build_run(tmp_path / "run", steps=(2,), num_gpus=WORLD, files=2, row_groups_per_file=2,
                      **{TYPE: "text_only"})
    config = run_config(data_path=built.dataset_root, manifest_path=built.manifest_path, output_dir=built.output_dir,
                        num_gpus=WORLD, **{TYPE: "text_only"})
    write_run_config(built.config_path, config)

    async def main() -> None:
        app = make_app(config=built.config_path, output=built.output_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            await started(app, pilot)
            await press(app, pilot, "m")
            await press(app, pilot, "ctrl+r")
            summary = " ".join(str(app.query_one("#mig-summary").render()).split())
            assert "Parquet columns manifest rebuilt at resume (text_only)" in summary
            assert "FastVideo will rebuild the manifest at resume (fingerprint unchanged" in summary

    asyncio.run(asyncio.wait_for(main(), 120))


def test_the_demo_has_a_run_whose_projection_differs_from_its_manifest(demo_workspace, tmp_path, cli) -> None:
    ws = demo_workspace()
    with open(ws.manifest_path, encoding="utf-8") as f:
        assert json.load(f)["columns"] == T2V
    code, out, _ = cli(migrate_argv(ws.text_only_config_path, ws.text_only_checkpoint, tmp_path / "sidecars",
                                    step=120, world=8, consumed=240, extra=("--json",)))
    assert code == 0
    columns = json.loads(out)["plan"]["columns"]
    assert columns["verdict"] == "rebuild" and columns["preprocessed_data_type"] == "text_only"
    assert columns["defaulted"] is False and columns["expected_columns"] == TEXT_ONLY
