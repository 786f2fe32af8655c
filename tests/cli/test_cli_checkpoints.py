"""`fvconsole checkpoints ls|show` on real DCP checkpoints (migration-exec)."""

from __future__ import annotations

import os

import pytest
from migration_runs import STEP, build_legacy, one_json
from reliability.harness import tree_digest

from fvconsole.demo.builders import write_checkpoint


@pytest.fixture()
def legacy(tmp_path):
    legacy = build_legacy(str(tmp_path))
    # A newer checkpoint whose save was interrupted (half the rng states).
    write_checkpoint(legacy.run.output_dir, 10, legacy.run.config, complete=False)
    return legacy


def test_ls_table_newest_first_and_latest_warning(legacy, tmp_path, cli) -> None:
    before = tree_digest(str(tmp_path), mtimes=True, modes=True)
    code, out, err = cli(["checkpoints", "ls", legacy.run.output_dir])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["step", "complete", "kind"]
    assert lines[2].split()[:3] == ["10", "NO", "legacy"]
    assert lines[3].split()[:3] == [str(STEP), "yes", "legacy"]
    assert not any(line.startswith("warning:") for line in lines)  # warnings go to stderr
    assert any(line.startswith("warning:") and "checkpoint-10" in line and "latest" in line for line in err.splitlines())
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == before


def test_ls_json_shape(legacy, cli) -> None:
    code, out, _ = cli(["checkpoints", "ls", legacy.run.output_dir, "--json"])
    data = one_json(out)
    assert code == 0
    assert [c["step"] for c in data["checkpoints"]] == [10, STEP]
    for row in data["checkpoints"]:
        assert {"path", "step", "complete", "kind", "rank_sidecars", "rng_states", "has_config", "bytes"} <= set(row)
    assert data["checkpoints"][0]["complete"] is False and data["checkpoints"][1]["complete"] is True
    assert data["latest"].endswith("checkpoint-10")
    assert any("checkpoint-10" in w for w in data["warnings"])


def test_ls_missing_dir_is_one_line_error(tmp_path, cli) -> None:
    code, out, err = cli(["checkpoints", "ls", str(tmp_path / "nope"), "--json"])
    assert code == 1
    assert "nope" in one_json(out)["error"]
    assert err.startswith("error: ") and err.count("\n") == 1


def test_show_with_config_mismatch(legacy, cli) -> None:
    ckpt = legacy.checkpoint
    code, out, err = cli(
        ["checkpoints", "show", ckpt, "--config", legacy.run.config_path, "--set", "training.distributed.num_gpus=16"])
    assert code == 0, err
    assert "legacy dataloader state in DCP" in out
    row = next(line for line in out.splitlines() if "training.distributed.num_gpus" in line and "16" in line)
    assert row.lstrip().startswith("!")
    assert row.rstrip().endswith(" --set training.distributed.num_gpus=16")  # the value's source, not the file
    code, out, _ = cli(
        ["checkpoints", "show", ckpt, "--config", legacy.run.config_path,
         "--set", "training.distributed.num_gpus=16", "--json"])
    data = one_json(out)
    assert data["checkpoint"]["step"] == STEP and data["metadata_step"] == STEP
    assert data["dcp"]["prefixes"]["dataloader"] >= 1 and data["dcp"]["dataloader_keys"]
    assert data["critical_config"]["training.distributed.num_gpus"] == 8
    assert data["mismatches"][0] == {
        "path": "training.distributed.num_gpus", "checkpoint": 8, "config": 16, "critical": True,
        "config_set_by": "training.distributed.num_gpus=16",
    }


def test_show_without_config_and_matching_config(legacy, cli) -> None:
    code, out, _ = cli(["checkpoints", "show", legacy.checkpoint, "--json"])
    assert code == 0 and one_json(out)["mismatches"] is None
    code, out, _ = cli(["checkpoints", "show", legacy.checkpoint, "--config", legacy.run.config_path])
    assert code == 0 and "matches the checkpoint's embedded config" in out
    code, _, err = cli(["checkpoints", "show", os.path.join(legacy.run.output_dir, "checkpoint-99")])
    assert code == 1 and "checkpoint-99" in err


def test_show_damaged_metadata_shows_the_rest_then_exits_1(legacy, tmp_path, cli) -> None:
    import shutil

    ckpt = tmp_path / "checkpoint-2"
    shutil.copytree(legacy.checkpoint, ckpt)
    (ckpt / "metadata.json").write_bytes(b"\x00\xff")
    code, out, err = cli(["checkpoints", "show", str(ckpt)])
    assert code == 1
    assert "DCP state" in out  # what can be read is still shown
    errors = [line for line in err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: ") and "metadata.json" in errors[0]
    code, out, _ = cli(["checkpoints", "show", str(ckpt), "--json"])
    assert code == 1 and "metadata.json" in one_json(out)["error"]
