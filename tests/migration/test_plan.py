"""preview_migration on real fixtures: every refusal, warnings, the plan, and no writes."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from migration_runs import edit_manifest, refusal_fields, refusal_for, request_for, small_run
from reliability.harness import tree_digest

from fvconsole.core.migration.plan import preview_migration
from fvconsole.demo.builders import write_checkpoint


@pytest.fixture()
def run(tmp_path):
    return small_run(tmp_path / "run", steps=(2,), sp_size=2)


def test_clean_preview_has_a_plan_matching_the_data(run) -> None:
    import pyarrow.parquet as pq

    preview = preview_migration(request_for(run))
    assert preview.refusals == () and preview.plan is not None and preview.ok
    plan = preview.plan
    assert (plan.step, plan.world_size, plan.sp_world_size, plan.batch_size) == (2, 4, 2, 2)
    assert plan.yielded_samples_per_rank == 4 and plan.samples_per_worker == 60
    with open(run.manifest_path) as fh:
        manifest = json.load(fh)
    assert plan.manifest_fingerprint == manifest["fingerprint"]
    data = plan.to_json()
    json.dumps(data)
    for key in ("step", "world_size", "sp_world_size", "batch_size", "yielded_samples_per_rank",
                "samples_per_worker", "ranks"):
        assert key in data
    assert data["ranks"][0].keys() >= {"rank", "sp_group_index", "row_group_position", "row_offset",
                                       "yielded_samples", "next_sample_index"}
    assert data["epoch_progress"] == pytest.approx(4 / 60)
    # The next sample index is the id stored in the Parquet data at the cursor.
    for cursor in plan.ranks:
        group = manifest["row_groups"][cursor.next_row_group]
        table = pq.ParquetFile(os.path.join(run.dataset_root, group["file"])).read_row_group(group["row_group"])
        offset = cursor.next_sample_index - group["sample_start"]
        assert table.column("id")[offset].as_py() == f"sample-{cursor.next_sample_index:06d}"
    # Ranks of one SP group share a cursor; groups differ.
    assert plan.ranks[0].next_sample_index == plan.ranks[1].next_sample_index
    assert plan.ranks[0].next_sample_index != plan.ranks[2].next_sample_index
    payload = plan.sidecar_payload(3)
    assert payload == {"version": 1, "rank": 3, "world_size": 4, "step": 2, "state_kind": "dataset",
                       "state": plan.dataset_state(3)}
    assert payload["state"]["topology"]["sp_group_index"] == 1


def test_preview_writes_nothing(run, tmp_path) -> None:
    before = tree_digest(tmp_path, mtimes=True, modes=True)
    ok = preview_migration(request_for(run))
    bad = preview_migration(request_for(run, expected_step=9, output_dir=str(tmp_path / "new" / "deeper")))
    assert ok.plan is not None and bad.plan is None
    assert tree_digest(tmp_path, mtimes=True, modes=True) == before
    assert not os.path.exists(tmp_path / "sidecars") and not os.path.exists(tmp_path / "new")


def test_step_checked_against_metadata_and_directory_name(tmp_path) -> None:
    run = small_run(tmp_path / "run", steps=())
    write_checkpoint(run.output_dir, 2, run.config, metadata_step=3)
    p = preview_migration(request_for(run, expected_step=2))
    r = refusal_for(p, "expected_step")
    assert "expected_step" in r.message and "metadata.json step is 3" in r.message and "2" in r.message
    p = preview_migration(request_for(run, expected_step=3, consumed_batches_per_rank=3))
    r = refusal_for(p, "expected_step")
    assert "directory name says step 2" in r.message and "is 3" in r.message


def test_world_size_and_consumed_batches(run) -> None:
    p = preview_migration(request_for(run, expected_world_size=8, consumed_batches_per_rank=3))
    world = refusal_for(p, "expected_world_size")
    assert "expected_world_size" in world.message and "8" in world.message and "num_gpus is 4" in world.message
    consumed = refusal_for(p, "consumed_batches_per_rank")
    assert "consumed_batches_per_rank" in consumed.message and "is 3" in consumed.message
    assert "gradient_accumulation_steps 1 is 2" in consumed.message
    assert p.plan is None


def test_gradient_accumulation_multiplies_consumed_batches(tmp_path) -> None:
    run = small_run(tmp_path / "run", steps=(2,), grad_accum=3)
    assert preview_migration(request_for(run)).plan.yielded_samples_per_rank == 2 * 3 * 2
    p = preview_migration(request_for(run, consumed_batches_per_rank=2))
    assert "step 2 x training.loop.gradient_accumulation_steps 3 is 6" in refusal_for(p, "consumed_batches_per_rank").message


@pytest.mark.parametrize(
    "kwargs, field, fragments",
    [
        ({"dataloader_type": "map"}, "training.data.dataloader_type", ["'map'", "streaming"]),
        ({"num_workers": 2}, "training.data.dataloader_num_workers", ["is 2", "requires 0"]),
        ({"sp_size": 3}, "training.distributed.sp_size", ["3 does not divide", "num_gpus 4"]),
    ],
)
def test_layout_refusals(tmp_path, kwargs, field, fragments) -> None:
    run = small_run(tmp_path / "run", steps=(2,), **kwargs)
    r = refusal_for(preview_migration(request_for(run)), field)
    assert field in r.message
    for fragment in fragments:
        assert fragment in r.message


def test_critical_config_mismatch_one_refusal_with_rows(run) -> None:
    p = preview_migration(request_for(run, overrides=("training.data.seed=7", "training.data.train_batch_size=3",
                                                       "training.loop.max_train_steps=5")))
    assert refusal_fields(p).count("config") == 1
    r = refusal_for(p, "config")
    assert "differs from the checkpoint's embedded config on 2 critical keys: " in r.message
    assert "training.data.seed: checkpoint=42, config=7" in r.message
    assert "training.data.train_batch_size: checkpoint=2, config=3" in r.message
    critical = [m.path for m in p.mismatches if m.critical]
    assert critical == ["training.data.train_batch_size", "training.data.seed"]
    assert any(m.path == "training.loop.max_train_steps" and not m.critical for m in p.mismatches)
    assert "the run config differs from the checkpoint's embedded config on 1 non-critical key" in p.warnings


def test_keys_and_overrides_are_counted_one_and_many(run) -> None:
    """Issue 28 item 3: "1 critical key", "the override X"; "2 non-critical keys", "the overrides X Y"."""
    p = preview_migration(request_for(run, overrides=("training.data.seed=7", "training.loop.max_train_steps=5",
                                                       "training.optimizer.learning_rate=0.5")))
    r = refusal_for(p, "config")
    assert "differs from the checkpoint's embedded config on 1 critical key: training.data.seed" in r.message
    assert r.why.detail.endswith("if the run was launched with the checkpoint's values, add the override "
                                 "training.data.seed=42")
    assert r.message.endswith("repeat them: --set training.data.seed=42")
    assert "the run config differs from the checkpoint's embedded config on 2 non-critical keys" in p.warnings


def test_a_critical_mismatch_an_override_would_fix_suggests_that_override(run) -> None:
    # The run was launched with other values than its YAML says: the refusal names the overrides
    # that make the YAML say what the checkpoint says (in the console's words and the command line's).
    p = preview_migration(request_for(run, overrides=("training.data.seed=7", "training.data.train_batch_size=3")))
    r = refusal_for(p, "config")
    assert r.reason.code == "config.critical_override"
    assert r.why.detail.endswith("if the run was launched with the checkpoint's values, add the overrides "
                                 "training.data.train_batch_size=2 training.data.seed=42")
    assert r.message.endswith("repeat them: --set training.data.train_batch_size=2 --set training.data.seed=42")
    fixed = preview_migration(request_for(run, overrides=("training.data.train_batch_size=2", "training.data.seed=42")))
    assert "config" not in refusal_fields(fixed)


def test_launch_overrides_reconcile_yaml_with_embedded_config(tmp_path) -> None:
    # The YAML on disk says 2 GPUs; the checkpoint was launched with --training.distributed.num_gpus 4.
    run = small_run(tmp_path / "run", steps=(2,))
    from fvconsole.demo.builders import write_run_config

    disk = json.loads(json.dumps(run.config))
    disk["training"]["distributed"]["num_gpus"] = 2
    write_run_config(run.config_path, disk)
    # A world-size change alone is a reshard's: refused naming the option (tests/migration/test_reshard_plan.py).
    assert refusal_fields(preview_migration(request_for(run))) == ["reshard"]
    p = preview_migration(request_for(run, overrides=("training.distributed.num_gpus=4",)))
    assert p.refusals == () and p.plan.world_size == 4


def test_manifest_integrity_problem_refuses(run) -> None:
    edit_manifest(run.manifest_path, lambda d: d["row_groups"][0].__setitem__("rows", 11))
    r = refusal_for(preview_migration(request_for(run)), "manifest")
    assert "manifest" in r.message and "fingerprint" in r.message


def test_unreadable_manifest_refuses_naming_the_config_field(run) -> None:
    with open(run.manifest_path, "w") as fh:
        fh.write("{")
    r = refusal_for(preview_migration(request_for(run)), "training.data.streaming_manifest_path")
    assert "training.data.streaming_manifest_path" in r.message and "not valid JSON" in r.message


def test_source_drift_refuses_unless_skipped(run) -> None:
    victim = os.path.join(run.dataset_root, "part-00000.parquet")
    os.utime(victim, ns=(0, 123))
    p = preview_migration(request_for(run))
    r = refusal_for(p, "manifest.source")
    assert "manifest.source" in r.message and "part-00000.parquet" in r.message and p.plan is None
    p = preview_migration(request_for(run, skip_source_check=True))
    assert p.refusals == () and p.plan is not None
    assert any("source check skipped" in w and "part-00000.parquet" in w for w in p.warnings)


def test_epoch_boundary_refuses(tmp_path) -> None:
    # 4 GPUs, sp 1: shards of 30 rows, batch 2 → samples_per_worker 30; step 15 → 30 samples.
    run = small_run(tmp_path / "run", steps=(14, 15))
    assert preview_migration(request_for(run, step=14)).plan is not None
    r = refusal_for(preview_migration(request_for(run, step=15)), "consumed_batches_per_rank")
    assert "epoch boundary" in r.message and "samples_per_worker 30" in r.message and "30 samples" in r.message


def test_dataset_too_small_refuses(tmp_path) -> None:
    run = small_run(tmp_path / "run", steps=(1,), num_gpus=8, files=1, row_groups_per_file=3, rows_per_group=1)
    r = refusal_for(preview_migration(request_for(run, step=1)), "samples_per_worker")
    assert "samples_per_worker" in r.message and "too small" in r.message


def test_output_dir_inside_or_equal_to_checkpoint(run, tmp_path) -> None:
    ckpt = run.checkpoint(2)
    for out in (ckpt, os.path.join(ckpt, "dcp", "sidecars"), ckpt + "/./"):
        r = refusal_for(preview_migration(request_for(run, output_dir=out)), "output_dir")
        assert "output_dir" in r.message and ckpt in r.message
    link = tmp_path / "innocent-looking"
    os.symlink(os.path.join(ckpt, "dcp"), link)
    r = refusal_for(preview_migration(request_for(run, output_dir=str(link))), "output_dir")
    assert "resolves to" in r.message and str(link) in r.message
    # A sibling whose name merely starts with the checkpoint's is fine.
    assert preview_migration(request_for(run, output_dir=ckpt + "-sidecars")).refusals == ()


def test_existing_sidecars_need_overwrite(run, tmp_path) -> None:
    out = tmp_path / "sidecars"
    out.mkdir()
    (out / "dataloader_state_rank0.pt").write_bytes(b"old")
    r = refusal_for(preview_migration(request_for(run, output_dir=str(out))), "output_dir")
    assert "1 dataloader_state_rank<r>.pt" in r.message and str(out) in r.message and "overwrite" in r.message
    assert preview_migration(request_for(run, output_dir=str(out), overwrite=True)).plan is not None
    (tmp_path / "file").write_text("x")
    assert "not a directory" in refusal_for(
        preview_migration(request_for(run, output_dir=str(tmp_path / "file"))), "output_dir").message


def test_missing_dcp_metadata_and_embedded_config(tmp_path) -> None:
    run = small_run(tmp_path / "run", steps=(2, 4, 6))
    shutil.rmtree(os.path.join(run.checkpoint(2), "dcp"))
    r = refusal_for(preview_migration(request_for(run, step=2)), "checkpoint.dcp")
    assert "dcp" in r.message and run.checkpoint(2) in r.message
    os.unlink(os.path.join(run.checkpoint(4), "metadata.json"))
    r = refusal_for(preview_migration(request_for(run, step=4)), "metadata.json")
    assert "metadata.json" in r.message and "missing" in r.message
    write_checkpoint(run.output_dir, 8, run.config, embed_config=False)
    r = refusal_for(preview_migration(request_for(run, step=8)), "metadata.config")
    assert "config" in r.message


def test_checkpoint_not_a_directory_or_badly_named(run, tmp_path) -> None:
    p = preview_migration(request_for(run, checkpoint=str(tmp_path / "nope")))
    assert "is not a directory" in refusal_for(p, "checkpoint").message
    renamed = tmp_path / "step2-copy"
    shutil.copytree(run.checkpoint(2), renamed)
    r = refusal_for(preview_migration(request_for(run, checkpoint=str(renamed))), "checkpoint")
    assert "checkpoint-<step>" in r.message


def test_kind_and_completeness_warnings(tmp_path) -> None:
    run = small_run(tmp_path / "run", steps=())
    write_checkpoint(run.output_dir, 2, run.config, complete=False)
    p = preview_migration(request_for(run))
    assert p.plan is not None and any("incomplete" in w for w in p.warnings)
    write_checkpoint(run.output_dir, 4, run.config, kind="none")
    p = preview_migration(request_for(run, step=4))
    assert p.plan is not None and any("kind 'none'" in w for w in p.warnings)
    write_checkpoint(run.output_dir, 6, run.config, kind="rank-local")
    r = refusal_for(preview_migration(request_for(run, step=6)), "checkpoint.kind")
    assert "rank-local" in r.message and "unnecessary" in r.message


def test_all_applicable_refusals_are_collected(run, tmp_path) -> None:
    os.utime(os.path.join(run.dataset_root, "part-00000.parquet"), ns=(0, 5))
    p = preview_migration(request_for(
        run, expected_step=3, expected_world_size=2, consumed_batches_per_rank=9,
        output_dir=run.checkpoint(2), overrides=("training.data.seed=1",)))
    fields = set(refusal_fields(p))
    assert {"expected_step", "expected_world_size", "consumed_batches_per_rank", "output_dir", "config",
            "manifest.source"} <= fields
    assert p.plan is None
    for r in p.refusals:
        assert r.message.startswith(r.field + ": ") and "\n" not in r.message


def test_bad_run_config_is_a_refusal(run, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    r = refusal_for(preview_migration(request_for(run, config_path=str(bad))), "config")
    assert str(bad) in r.message and "mapping" in r.message


def test_progress_is_reported(run) -> None:
    seen: list[tuple[int, int, str]] = []
    preview_migration(request_for(run), progress=lambda d, t, m: seen.append((d, t, m)))
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] and len(seen) >= 3


def test_output_dir_inside_dataset_refuses(run) -> None:
    r = refusal_for(preview_migration(request_for(run, output_dir=os.path.join(run.dataset_root, "x"))), "output_dir")
    assert "dataset root" in r.message and "training.data.data_path" in r.message


@pytest.mark.parametrize("dotted", ["training.data.data_path", "training.data.streaming_manifest_path"])
def test_nul_byte_in_a_config_path_is_a_refusal_naming_the_field(run, tmp_path, dotted) -> None:
    # Regression (reliability D1/D2): realpath("\x00") raised ValueError -> "internal error".
    import yaml

    from fvconsole.demo.builders import write_run_config

    with open(run.config_path) as fh:
        config = yaml.safe_load(fh)
    section, _, key = dotted.rpartition(".")
    node = config
    for part in section.split("."):
        node = node[part]
    node[key] = "/data/\x00evil"
    bad = write_run_config(tmp_path / "nul.yaml", config)
    before = tree_digest(run.root, mtimes=True, modes=True)
    p = preview_migration(request_for(run, config_path=bad))
    assert p.plan is None
    messages = [r.message for r in p.refusals if r.field == dotted]
    assert messages and "NUL byte" in messages[0] and bad in messages[0]
    assert tree_digest(run.root, mtimes=True, modes=True) == before


def test_nul_byte_in_a_request_path_is_a_refusal(run) -> None:
    p = preview_migration(request_for(run, output_dir="/tmp/x\x00y"))
    assert p.plan is None and "NUL byte" in refusal_for(p, "output_dir").message


def test_missing_dcp_warning_does_not_claim_unreadable_metadata(run) -> None:
    shutil.rmtree(os.path.join(run.checkpoint(2), "dcp"))
    p = preview_migration(request_for(run))
    assert not any("unreadable" in w for w in p.warnings)
    assert any("no dcp/.metadata" in w for w in p.warnings)


def test_absurd_world_size_is_refused_without_building_its_shards(run) -> None:
    # Regression: num_gpus=1e11 built one shard per data-parallel group and exhausted memory.
    p = preview_migration(request_for(run, overrides=("training.distributed.num_gpus=100000000000",)))
    assert p.plan is None
    r = refusal_for(p, "samples_per_worker")
    assert "12 row groups cannot feed 50000000000 data-parallel groups" in r.message
    # --expected-world-size confirms the checkpoint's world size (4), which it does.
    assert "expected_world_size" not in refusal_fields(p)


def test_missing_dcp_metadata_file_refuses(tmp_path) -> None:
    # Reliability Q1: dcp.save writes .metadata last; without it FastVideo cannot load the
    # checkpoint, so migrating it was pointless (it used to pass with two warnings).
    run = small_run(tmp_path / "run", steps=())
    write_checkpoint(run.output_dir, 2, run.config, complete=False, incomplete="dcp-metadata")
    p = preview_migration(request_for(run))
    assert p.plan is None
    r = refusal_for(p, "checkpoint.dcp")
    assert os.path.join(run.checkpoint(2), "dcp", ".metadata") in r.message and "interrupted" in r.message
