"""Issue 37 item 10: FastVideo's limit as its ``int(training.checkpoint.checkpoints_total_limit or 0)`` reads it.

The expected values are Python's own answers, worked out by hand (and checked in a Python 3.11
shell): ``int([] or 0)`` is 0, ``int('_3')`` and ``int('3__0')`` raise ValueError (an underscore
only between digits), ``int('3_0')`` is 30, ``int(b'3')`` is 3. The values reach ``checkpoints
ls`` as FastVideo gets them: in the embedded config of a real checkpoint, in a YAML run config.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from migration_runs import one_json
from retention_runs import DAY, make_checkpoint

FORTY = "1234567890" * 4


def _out(tmp_path: Path, limit: object) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    for step, days in ((100, 4), (200, 3), (300, 2), (400, 1)):
        path = make_checkpoint(out, step, age=days * DAY)
        meta = json.loads((path / "metadata.json").read_text())
        meta["config"]["training"]["checkpoint"] = {"checkpoints_total_limit": limit}
        (path / "metadata.json").write_text(json.dumps(meta))
    return out


@pytest.mark.parametrize(("limit", "expected", "deletes"), [
    ([], 0, []), ({}, 0, []), ("", 0, []), ("3_0", 30, []), (FORTY, int(FORTY), []), ("2", 2, [100, 200, 300]),
])
def test_a_value_fastvideo_reads(tmp_path: Path, cli, limit: object, expected: int, deletes: list[int]) -> None:
    code, stdout, err = cli(["checkpoints", "ls", str(_out(tmp_path, limit)), "--json"])
    assert code == 0, err
    data = one_json(stdout)
    assert data["fastvideo"]["cleanup_limit"] == expected and data["fastvideo"]["cleanup_deletes"] == deletes
    assert not [w for w in data["warnings"] if "FastVideo will refuse" in w]


@pytest.mark.parametrize("limit", ["_3", "3__0", "three", [3], {"n": 3}])
def test_a_value_fastvideo_refuses_to_start_with(tmp_path: Path, cli, limit: object) -> None:
    out = _out(tmp_path, limit)
    code, stdout, err = cli(["checkpoints", "ls", str(out), "--json"])
    assert code == 0, err
    data = one_json(stdout)
    assert data["fastvideo"]["cleanup_limit"] is None and data["fastvideo"]["cleanup_deletes"] == []
    [warning] = [w for w in data["warnings"] if w.startswith("FastVideo will refuse to start: ")]
    assert "training.checkpoint.checkpoints_total_limit" in warning and "checkpoint-400" in warning
    code, stdout, err = cli(["checkpoints", "ls", str(out)])
    assert "fastvideo: FastVideo will refuse to start: checkpoints_total_limit (from the embedded config of " \
           "checkpoint-400) is not a number it reads" in stdout


def test_a_binary_yaml_value_is_read_as_int_reads_bytes(tmp_path: Path, cli) -> None:
    out = _out(tmp_path, None)
    run = tmp_path / "run.yaml"
    run.write_text("training:\n  checkpoint:\n    checkpoints_total_limit: !!binary Mw==\n")  # b'3'
    code, stdout, err = cli(["checkpoints", "ls", str(out), "--config", str(run), "--json"])
    assert code == 0, err
    assert one_json(stdout)["fastvideo"] == {"cleanup_limit": 3, "cleanup_deletes": [100, 200], "latest": 400, "latest_resume_step": 400}


def test_set_without_config_applies_to_the_embedded_config(tmp_path: Path, cli) -> None:
    out = _out(tmp_path, 0)
    argv = ["checkpoints", "ls", str(out), "--set", "training.checkpoint.checkpoints_total_limit=2"]
    code, stdout, err = cli([*argv, "--json"])
    assert code == 0, err
    assert one_json(stdout)["fastvideo"] == {"cleanup_limit": 2, "cleanup_deletes": [100, 200, 300], "latest": 400, "latest_resume_step": 400}
    code, stdout, err = cli(argv)
    assert ("fastvideo: checkpoints_total_limit 2 (from the embedded config of checkpoint-400 with the overrides given): right "
            "after the next save its cleanup deletes checkpoint-100, checkpoint-200, checkpoint-300") in stdout
