"""Elastic resume end to end on real fixtures: `migrate --reshard`, its refusals, the written sets, verify.

Expected states and accounting come from tests/fastvideo_reference.py (independent of
fvconsole.core); the written sidecars are read back with real torch and replayed sample by
sample on the target topology, as FastVideo's loader would resume from them.
"""

from __future__ import annotations

import json
import os
import shlex

import pytest
from fastvideo_reference import (
    contiguous_row_group_shards,
    elastic_accounting,
    elastic_state,
    epoch_loader_state,
    samples_per_worker,
    torchdata_loader_state,
)
from migration_runs import one_json
from reliability.harness import tree_digest

from fvconsole.cli import main
from fvconsole.core.migration import MigrationRequest, preview_migration
from fvconsole.demo.builders import build_run, write_checkpoint

BATCH = 2
UNEVEN = (7, 12, 5, 9, 11, 6, 8, 10, 4, 13, 9, 7, 6, 10, 3, 12)


def _run(root, *, world: int, sp: int = 1, kind: str = "legacy", steps=(3,), **kwargs):
    return build_run(os.fspath(root), steps=steps, kind=kind, num_gpus=world, sp_size=sp, train_batch_size=BATCH,
                     files=8, row_groups_per_file=4, rows_per_group=UNEVEN, **kwargs)


def _manifest(run) -> dict:
    with open(run.manifest_path) as fh:
        return json.load(fh)


def _argv(run, step: int, out, *extra: str, world: int, consumed: int | None = None) -> list[str]:
    return ["migrate", "--config", run.config_path, "--checkpoint", run.checkpoint(step), "--output-dir", str(out),
            "--expected-step", str(step), "--expected-world-size", str(world),
            "--consumed-batches-per-rank", str(step if consumed is None else consumed), *extra]


def _cli(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _expected(manifest: dict, mode: str, source: dict, t_world: int, t_sp: int) -> tuple[dict, dict]:
    states = {r: elastic_state(manifest, mode, source=source, rank=r, target_world=t_world, target_sp=t_sp,
                               batch_size=BATCH, read_batch_size=8, seed=42, shuffle_row_groups=True)
              for r in range(t_world)}
    counted = elastic_accounting(manifest, source=source, target_states=states, target_world=t_world,
                                 target_sp=t_sp, batch_size=BATCH, seed=42, shuffle_row_groups=True)
    return states, counted


def _written_states(out: str, t_world: int) -> dict[int, dict]:
    import torch

    states = {}
    for rank in range(t_world):
        payload = torch.load(os.path.join(out, f"dataloader_state_rank{rank}.pt"), weights_only=True)
        assert (payload["version"], payload["rank"], payload["world_size"], payload["state_kind"]) == (
            1, rank, t_world, "dataset")
        states[rank] = payload["state"]
    return states


@pytest.mark.parametrize(("world", "t_world", "sp", "t_sp"), [(4, 8, 1, 1), (8, 4, 1, 1), (8, 8, 1, 2)])
def test_a_legacy_checkpoint_resharded_in_each_mode_matches_the_replay(tmp_path, world, t_world, sp, t_sp) -> None:
    run = _run(tmp_path / "run", world=world, sp=sp)
    manifest = _manifest(run)
    source = {"world_size": world, "sp_world_size": sp, "epoch": 0, "yielded_samples": 3 * BATCH}
    target = (f"training.distributed.num_gpus={t_world}", f"training.distributed.sp_size={t_sp}")
    for mode in ("next-epoch", "epoch-start", "nearest"):
        preview = preview_migration(MigrationRequest(
            run.config_path, run.checkpoint(3), str(tmp_path / "out"), 3, world, 3, overrides=target, reshard=mode))
        assert preview.refusals == (), [r.message for r in preview.refusals]
        plan = preview.plan
        states, counted = _expected(manifest, mode, source, t_world, t_sp)
        assert (plan.world_size, plan.sp_world_size) == (t_world, t_sp)
        assert {r: plan.dataset_state(r) for r in range(t_world)} == states
        data = plan.to_json()
        assert data["reshard"]["mode"] == mode and data["reshard"]["accounting"] == counted
        assert data["reshard"]["source"] == {"world_size": world, "sp_world_size": sp, "epoch": 0,
                                             "yielded_samples_per_rank": 3 * BATCH}
        assert data["ranks"][0]["epoch"] == states[0]["epoch"]


@pytest.mark.parametrize(("t_world", "said"), [
    (5, "the checkpoint has no rng_state_rank<r>.pt for 1 target rank (rank 4): FastVideo "),
    (7, "the checkpoint has no rng_state_rank<r>.pt for 3 target ranks (ranks 4-6): FastVideo "),
])
def test_the_target_ranks_without_an_rng_state_are_counted_with_their_noun(tmp_path, t_world, said) -> None:
    """Issue 28 item 3: "1 target rank (rank 4)", "3 target ranks (ranks 4-6)", never "rank(s)"."""
    run = _run(tmp_path / "run", world=4)
    preview = preview_migration(MigrationRequest(run.config_path, run.checkpoint(3), str(tmp_path / "out"), 3, 4, 3,
                                              overrides=(f"training.distributed.num_gpus={t_world}",),
                                              reshard="nearest"))
    assert preview.refusals == (), [r.message for r in preview.refusals]
    (warning,) = [w for w in preview.warnings if "rng_state_rank" in w]
    assert warning.startswith(said) and warning.endswith(" there"), warning


def test_write_then_verify_a_legacy_reshard_and_replay_what_the_target_reads(tmp_path, capsys) -> None:
    run = _run(tmp_path / "run", world=4)
    out = tmp_path / "state-3"
    code, stdout, _err = _cli(_argv(run, 3, out, "--set", "training.distributed.num_gpus=8", "--reshard", "nearest",
                                    "--yes", "--json", world=4), capsys)
    assert code == 0, stdout
    data = one_json(stdout)
    manifest = _manifest(run)
    source = {"world_size": 4, "sp_world_size": 1, "epoch": 0, "yielded_samples": 3 * BATCH}
    states, counted = _expected(manifest, "nearest", source, 8, 1)
    written = _written_states(str(out), 8)
    assert written == states
    # FastVideo's loader resumed from the written states reads exactly what the accounting counts.
    replayed = elastic_accounting(manifest, source=source, target_states=written, target_world=8, target_sp=1,
                                  batch_size=BATCH, seed=42, shuffle_row_groups=True)
    assert replayed == counted == data["plan"]["reshard"]["accounting"]
    receipt = json.loads((out / "migration_receipt.json").read_text())
    assert receipt["reshard"]["mode"] == "nearest" and receipt["reshard"]["accounting"] == counted
    assert receipt["reshard"]["source"]["world_size"] == 4 and receipt["world_size"] == 8
    code, stdout, _err = _cli(["sidecars", "verify", "--config", run.config_path, "--checkpoint", run.checkpoint(3),
                               "--sidecar-dir", str(out), "--set", "training.distributed.num_gpus=8"], capsys)
    assert code == 0, stdout


def _native(tmp_path, *, world: int, epoch: int, batches_in_epoch: int):
    """A FastVideo-native checkpoint in ``epoch``: torchdata 0.11 loader states written with real torch."""
    import torch

    run = _run(tmp_path / "run", world=world, kind="rank-local", steps=(1,))
    manifest = _manifest(run)
    spw = samples_per_worker(contiguous_row_group_shards(manifest["row_groups"], world), BATCH)
    step = epoch * (spw // BATCH) + batches_in_epoch
    ckpt = write_checkpoint(run.output_dir, step, run.config, kind="rank-local")
    for rank in range(world):
        state = epoch_loader_state(manifest, rank=rank, world_size=world, sp_world_size=1, batch_size=BATCH,
                                   read_batch_size=8, seed=42, shuffle_row_groups=True, epoch=epoch,
                                   yielded_samples=batches_in_epoch * BATCH)
        torch.save({"version": 1, "rank": rank, "world_size": world, "step": step, "state_kind": "dataloader",
                    "state": torchdata_loader_state(state, step)}, os.path.join(ckpt, f"dataloader_state_rank{rank}.pt"))
    return run, manifest, step


def test_a_native_checkpoint_in_a_later_epoch_becomes_a_checkpoint_view(tmp_path, capsys) -> None:
    run, manifest, step = _native(tmp_path, world=4, epoch=2, batches_in_epoch=2)
    ckpt = run.checkpoint(step)
    before = tree_digest(ckpt, mtimes=True, modes=True)
    view = tmp_path / "views" / f"checkpoint-{step}"
    code, stdout, _err = _cli(_argv(run, step, view, "--set", "training.distributed.num_gpus=6", "--reshard",
                                    "nearest", "--yes", "--json", world=4), capsys)
    assert code == 0, stdout
    source = {"world_size": 4, "sp_world_size": 1, "epoch": 2, "yielded_samples": 2 * BATCH}
    states, counted = _expected(manifest, "nearest", source, 6, 1)
    assert _written_states(str(view), 6) == states
    assert one_json(stdout)["plan"]["reshard"]["accounting"] == counted
    # Every other entry of the source is a link to it; the source is unchanged.
    for name in os.listdir(ckpt):
        if not name.startswith("dataloader_state_rank"):
            assert os.path.islink(view / name) and os.readlink(view / name) == os.path.join(ckpt, name)
    assert tree_digest(ckpt, mtimes=True, modes=True) == before
    assert "rng_state_rank5.pt" not in os.listdir(view)
    code, stdout, _err = _cli(["sidecars", "verify", "--config", run.config_path, "--checkpoint", ckpt,
                               "--sidecar-dir", str(view), "--set", "training.distributed.num_gpus=6"], capsys)
    assert code == 0, stdout
    os.unlink(view / "metadata.json")
    code, stdout, _err = _cli(["sidecars", "verify", "--config", run.config_path, "--checkpoint", ckpt,
                               "--sidecar-dir", str(view), "--set", "training.distributed.num_gpus=6"], capsys)
    assert code == 1 and "metadata.json: missing" in stdout


def test_a_native_view_must_be_a_new_checkpoint_dir_outside_the_run(tmp_path) -> None:
    run, _manifest_, step = _native(tmp_path, world=4, epoch=1, batches_in_epoch=0)
    for out, said in ((tmp_path / "views" / "elsewhere", f"name it checkpoint-{step}"),
                      (os.path.join(run.output_dir, "v", f"checkpoint-{step}"), "inside the run's output dir")):
        preview = preview_migration(MigrationRequest(
            run.config_path, run.checkpoint(step), str(out), step, 4, step,
            overrides=("training.distributed.num_gpus=8",), reshard="epoch-start"))
        assert any(said in r.message for r in preview.refusals), [r.message for r in preview.refusals]


def test_refusals_name_the_option_and_carry_every_mode(tmp_path, capsys) -> None:
    run = _run(tmp_path / "run", world=4)
    out = tmp_path / "state-3"
    grow = ("--set", "training.distributed.num_gpus=8")
    for extra in ((), ("--yes",)):
        code, stdout, _err = _cli(_argv(run, 3, out, *grow, *extra, "--json", world=4), capsys)
        data = one_json(stdout)
        assert code == 1 and [r["field"] for r in data["refusals"]] == ["reshard"]
        assert "--reshard MODE" in data["refusals"][0]["message"]
        assert data["reshard"]["mode"] is None and data["reshard"]["accounting"] is None
        assert set(data["reshard"]["modes"]) == {"next-epoch", "epoch-start", "nearest"}
        assert not out.exists()
    # --expected-world-size is the checkpoint's, not the new config's.
    code, stdout, _err = _cli(_argv(run, 3, out, *grow, "--reshard", "nearest", "--json", world=8), capsys)
    assert code == 1 and "expected_world_size" in [r["field"] for r in one_json(stdout)["refusals"]]
    # Another critical key still refuses.
    code, stdout, _err = _cli(_argv(run, 3, out, *grow, "--set", "training.data.train_batch_size=3", "--reshard",
                                    "nearest", "--json", world=4), capsys)
    assert code == 1 and "train_batch_size" in json.dumps(one_json(stdout)["refusals"])
    # A target the dataset cannot feed: samples_per_worker 0.
    code, stdout, _err = _cli(_argv(run, 3, out, "--set", "training.distributed.num_gpus=64", "--reshard",
                                    "nearest", "--json", world=4), capsys)
    assert code == 1 and "samples_per_worker" in [r["field"] for r in one_json(stdout)["refusals"]]
    assert not out.exists()


def test_more_than_one_worker_and_a_wrong_batch_count_refuse_a_native_reshard(tmp_path) -> None:
    run, _manifest_, step = _native(tmp_path, world=4, epoch=1, batches_in_epoch=2)
    view = str(tmp_path / "views" / f"checkpoint-{step}")
    grow = "training.distributed.num_gpus=8"
    workers = preview_migration(MigrationRequest(run.config_path, run.checkpoint(step), view, step, 4, step,
                                              overrides=(grow, "training.data.dataloader_num_workers=2"),
                                              reshard="nearest"))
    assert any("one worker's cursor" in r.message for r in workers.refusals)
    wrong = preview_migration(MigrationRequest(run.config_path, run.checkpoint(step), view, step, 4, step + 1,
                                            overrides=(grow, "training.loop.gradient_accumulation_steps=1"),
                                            reshard="nearest"))
    assert "consumed_batches_per_rank" in [r.field for r in wrong.refusals]


def test_a_count_past_the_epoch_is_refused_saying_so(tmp_path) -> None:
    """A native state that counts into the next epoch under the old one (epoch 0, more samples than
    an epoch holds: what the demo's checkpoint-400 used to say) is refused naming both numbers."""
    import torch

    run, manifest, step = _native(tmp_path, world=4, epoch=1, batches_in_epoch=2)
    spw = samples_per_worker(contiguous_row_group_shards(manifest["row_groups"], 4), BATCH)
    ckpt = run.checkpoint(step)
    for rank in range(4):
        path = os.path.join(ckpt, f"dataloader_state_rank{rank}.pt")
        payload = torch.load(path, weights_only=True)
        payload["state"]["dataset_state"].update(epoch=0, yielded_samples=spw + 2 * BATCH)
        torch.save(payload, path)
    preview = preview_migration(MigrationRequest(run.config_path, ckpt, str(tmp_path / "views" / f"checkpoint-{step}"),
                                              step, 4, step, overrides=("training.distributed.num_gpus=8",),
                                              reshard="nearest"))
    said = [r.message for r in preview.refusals]
    assert any(f"{spw + 2 * BATCH} exceeds the {spw} samples of an epoch" in m for m in said), said


def test_the_demo_native_checkpoint_is_in_its_second_epoch_and_reshards(tmp_path, capsys) -> None:
    """The demo's checkpoint-400 as FastVideo writes it: 800 samples per rank are epoch 1 after 76 of 724,
    and the reshard the demo prints plans (exit 0)."""
    from fvconsole.cli.demo import cli_commands
    from fvconsole.core.formats.sidecar_files import decode_sidecar, read_sidecar_bytes
    from fvconsole.demo.workspace import build_demo_workspace

    ws = build_demo_workspace(str(tmp_path / "demo"))
    ckpt = os.path.join(ws.output_dir, "checkpoint-400")
    state = decode_sidecar(read_sidecar_bytes(os.path.join(ckpt, "dataloader_state_rank0.pt")))["state"]
    dataset = state["dataset_state"]
    assert (dataset["epoch"], dataset["yielded_samples"], dataset["topology"]["samples_per_worker"]) == (1, 76, 724)
    [command] = [c for c in cli_commands(ws) if "--reshard" in c]
    argv = shlex.split(command.replace("\\\n", " "), comments=True)  # a backslash-newline continues the line
    assert argv[:2] == ["fvconsole", "migrate"]
    code, out, err = _cli([*argv[1:], "--json"], capsys)
    assert code == 0, out + err
    assert one_json(out)["plan"]["reshard"]["mode"] == "nearest"
