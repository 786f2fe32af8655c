"""Elastic resume under hostile sizes: a sidecar's huge integers and a world size of a billion ranks.

Real files: the run and its checkpoint from the demo builders, the native sidecars written
with real torch; the CLI in a subprocess where only a time bound tells a hang from an answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fastvideo_reference import epoch_loader_state, torchdata_loader_state
from migration_runs import one_json

from fvconsole.cli import main
from fvconsole.demo.builders import build_run

BATCH = 2
HUGE = 2**2039 - 1
#: FastVideo's batches per epoch in this run's layout (16 row groups of 10 rows over 4 ranks: 40 rows, 20 batches).
PER_EPOCH = 20


def _native_with_epoch(root, epoch: int):
    """A native checkpoint at step 1 whose every sidecar names ``epoch``, its run's accumulation as large.

    The accumulation makes step 1 consume exactly the batches the sidecars' epoch says, so
    nothing but the size of the number stands in the way.
    """
    import torch

    consumed = epoch * PER_EPOCH + 1
    run = build_run(os.fspath(root), steps=(1,), kind="rank-local", num_gpus=4, sp_size=1, train_batch_size=BATCH,
                    grad_accum=consumed, files=4, row_groups_per_file=4, rows_per_group=10)
    with open(run.manifest_path) as fh:
        manifest = json.load(fh)
    for rank in range(4):
        state = epoch_loader_state(manifest, rank=rank, world_size=4, sp_world_size=1, batch_size=BATCH,
                                   read_batch_size=8, seed=42, shuffle_row_groups=True, epoch=0,
                                   yielded_samples=BATCH)
        state["epoch"] = epoch
        torch.save({"version": 1, "rank": rank, "world_size": 4, "step": 1, "state_kind": "dataloader",
                    "state": torchdata_loader_state(state, 1)},
                   os.path.join(run.checkpoint(1), f"dataloader_state_rank{rank}.pt"))
    return run, consumed


def _reshard_argv(run, out, consumed: int, mode: str, *extra: str) -> list[str]:
    return ["migrate", "--config", run.config_path, "--checkpoint", run.checkpoint(1), "--output-dir", str(out),
            "--expected-step", "1", "--expected-world-size", "4", "--consumed-batches-per-rank", str(consumed),
            "--set", "training.distributed.num_gpus=8", "--reshard", mode, *extra]


def test_a_sidecar_epoch_of_2039_bits_is_refused_naming_the_file_and_field(tmp_path, capsys) -> None:
    run, consumed = _native_with_epoch(tmp_path / "run", HUGE)
    view = tmp_path / "views" / "checkpoint-1"
    sidecar = os.path.join(run.checkpoint(1), "dataloader_state_rank0.pt")
    for mode in ("next-epoch", "nearest"):
        code = main(_reshard_argv(run, view, consumed, mode, "--yes"))
        out, err = capsys.readouterr()
        assert code == 1, err
        assert err.count("\n") == 1 and "internal error" not in err
        assert sidecar in err and "'state.dataset_state.epoch'" in err and "2039-bit" in err
        assert not view.exists() and not view.parent.exists()
    code = main(_reshard_argv(run, view, consumed, "next-epoch", "--json"))
    refusal = one_json(capsys.readouterr().out)["refusals"]
    assert code == 1 and [r["field"] for r in refusal] == ["checkpoint.dataloader_state"]


def test_the_largest_int64_epoch_is_refused_for_the_epoch_after_it(tmp_path, capsys) -> None:
    run, consumed = _native_with_epoch(tmp_path / "run", 2**63 - 1)
    code = main(_reshard_argv(run, tmp_path / "views" / "checkpoint-1", consumed, "next-epoch", "--yes"))
    err = capsys.readouterr().err
    assert code == 1 and "'state.epoch' is 9223372036854775807" in err and "internal error" not in err


def test_a_billion_ranks_in_one_sp_group_is_refused_at_once(tmp_path) -> None:
    run = build_run(os.fspath(tmp_path / "run"), steps=(3,), num_gpus=4, sp_size=1, train_batch_size=BATCH,
                    files=4, row_groups_per_file=4, rows_per_group=10)
    out = tmp_path / "out"
    argv = ["migrate", "--config", run.config_path, "--checkpoint", run.checkpoint(3), "--output-dir", str(out),
            "--expected-step", "3", "--expected-world-size", "4", "--consumed-batches-per-rank", "3",
            "--set", "training.distributed.num_gpus=1000000000", "--set", "training.distributed.sp_size=1000000000",
            "--reshard", "nearest"]
    # Planned rank by rank this ran for hours and took gigabytes; refused, it answers in about a second.
    for extra in ((), ("--yes",)):
        done = subprocess.run([sys.executable, "-m", "fvconsole", *argv, *extra], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, FVCONSOLE_JOURNAL=str(tmp_path / "journal.jsonl")))
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1
        assert done.stderr.startswith("error: training.distributed.num_gpus: ")
        assert "1000000000" in done.stderr and "65536" in done.stderr
        assert not out.exists()
