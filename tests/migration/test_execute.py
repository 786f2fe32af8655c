"""execute_plan on real legacy DCP checkpoints and real Parquet datasets (migration-exec)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch
from fastvideo_reference import live_loader_state
from migration_runs import BATCH, SP, STEP, WORLD, build_legacy, plan_for
from reliability.harness import tree_digest

from fvconsole.core.migration import locked, output_dir, verify, write
from fvconsole.core.migration.receipt import RECEIPT_SCHEMA
from fvconsole.core.shared.errors import FvError, PartialFailure

RECEIPT_FIELDS = [
    "schema", "created_at_utc", "source_checkpoint", "source_checkpoint_metadata_sha256", "source_config",
    "source_config_sha256", "manifest", "manifest_fingerprint", "step", "world_size", "sp_world_size",
    "batch_size", "gradient_accumulation_steps", "consumed_batches_per_rank", "yielded_samples_per_rank",
    "sidecars",
]


def _sha(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_execute_writes_exactly_the_plan(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    ck_before = tree_digest(legacy.checkpoint, mtimes=True, modes=True)
    plan = plan_for(legacy)
    calls = []
    receipt = locked.execute_migration(plan, progress=lambda d, t, m: calls.append((d, t))).receipt
    with open(legacy.run.manifest_path, encoding="utf-8") as fh:
        manifest = json.load(fh)

    assert sorted(os.listdir(legacy.out)) == sorted(
        [f"dataloader_state_rank{r}.pt" for r in range(WORLD)] + ["migration_receipt.json"]
    )
    for rank in range(WORLD):
        path = os.path.join(legacy.out, f"dataloader_state_rank{rank}.pt")
        payload = torch.load(path, map_location="cpu", weights_only=True)
        assert payload == plan.sidecar_payload(rank)
        assert payload["version"] == 1 and payload["rank"] == rank and payload["world_size"] == WORLD
        assert payload["step"] == STEP and payload["state_kind"] == "dataset"
        # Independent oracle: the state FastVideo's loader reports at this step, replayed sample by sample.
        assert payload["state"] == live_loader_state(legacy.run.config, manifest, rank=rank, step=STEP)
    # Ranks of one SP group read the same samples.
    a, b = (plan.sidecar_payload(r)["state"] for r in (2, 3))
    assert (a["row_group_position"], a["row_offset"]) == (b["row_group_position"], b["row_offset"])

    with open(os.path.join(legacy.out, "migration_receipt.json"), encoding="utf-8") as fh:
        on_disk = json.load(fh)
    assert on_disk == receipt
    for key in RECEIPT_FIELDS:
        assert key in receipt, key
    assert receipt["schema"] == RECEIPT_SCHEMA
    assert receipt["step"] == STEP and receipt["world_size"] == WORLD and receipt["sp_world_size"] == SP
    assert receipt["batch_size"] == BATCH and receipt["yielded_samples_per_rank"] == STEP * BATCH
    assert receipt["consumed_batches_per_rank"] == STEP and receipt["tool"] == "fvconsole"
    assert receipt["source_checkpoint_metadata_sha256"] == _sha(os.path.join(legacy.checkpoint, "metadata.json"))
    assert receipt["source_config_sha256"] == _sha(legacy.run.config_path)
    with open(legacy.run.manifest_path, encoding="utf-8") as fh:
        assert receipt["manifest_fingerprint"] == json.load(fh)["fingerprint"]
    assert [s["rank"] for s in receipt["sidecars"]] == list(range(WORLD))
    for entry in receipt["sidecars"]:
        assert entry["sha256"] == _sha(os.path.join(legacy.out, entry["path"]))
        state = plan.sidecar_payload(entry["rank"])["state"]
        assert entry["row_group_position"] == state["row_group_position"]
        assert entry["row_offset"] == state["row_offset"]
        assert entry["yielded_samples"] == state["yielded_samples"]

    assert calls and calls[-1] == (WORLD, WORLD)
    assert not [n for n in os.listdir(tmp_path) if "fvconsole-staging" in n]
    assert tree_digest(legacy.checkpoint, mtimes=True, modes=True) == ck_before


def test_parallel_writes_many_ranks(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path), world=32, sp=8)
    from migration_runs import request

    from fvconsole.core.migration.plan import preview_migration

    req = dataclasses.replace(request(legacy), expected_world_size=32)
    plan = preview_migration(req).plan
    assert plan is not None
    receipt = locked.execute_migration(plan, workers=4).receipt
    assert len(receipt["sidecars"]) == 32
    for entry in receipt["sidecars"]:
        path = os.path.join(legacy.out, entry["path"])
        assert torch.load(path, weights_only=True) == plan.sidecar_payload(entry["rank"])
        assert entry["sha256"] == _sha(path)


def test_overwrite_replaces_set_and_failure_keeps_old_set(tmp_path, monkeypatch) -> None:
    legacy = build_legacy(str(tmp_path))
    first = locked.execute_migration(plan_for(legacy)).receipt
    old_ino = os.stat(legacy.out).st_ino
    plan = plan_for(legacy, overwrite=True)
    second = locked.execute_migration(plan).receipt
    assert os.stat(legacy.out).st_ino != old_ino  # a new directory was swapped in
    assert second["created_at_utc"] >= first["created_at_utc"]
    before = tree_digest(legacy.out, mtimes=True, modes=True)

    real = write._write_file_atomic
    count = {"n": 0}

    def flaky(directory: str, name: str, data: bytes, *rest: bool) -> str:
        count["n"] += 1
        if count["n"] == 3:
            raise OSError(28, "No space left on device")
        return real(directory, name, data, *rest)

    monkeypatch.setattr(write, "_write_file_atomic", flaky)
    with pytest.raises(PartialFailure) as info:
        locked.execute_migration(plan)
    assert info.value.exit_code == 3
    assert info.value.report["sidecars_written"] == 2 and info.value.report["staging_removed"] is True
    assert "No space left" in str(info.value)
    assert tree_digest(legacy.out, mtimes=True, modes=True) == before
    assert not [n for n in os.listdir(tmp_path) if "fvconsole-staging" in n]


def test_overwrite_without_renameat2_falls_back_to_renames(tmp_path, monkeypatch) -> None:
    import fvconsole.core.shared.atomic as atomic

    legacy = build_legacy(str(tmp_path))
    locked.execute_migration(plan_for(legacy))
    monkeypatch.setattr(atomic, "exchange_paths", lambda a, b: False)
    receipt = locked.execute_migration(plan_for(legacy, overwrite=True)).receipt
    with open(os.path.join(legacy.out, "migration_receipt.json"), encoding="utf-8") as fh:
        assert json.load(fh)["created_at_utc"] == receipt["created_at_utc"]
    assert sorted(n for n in os.listdir(tmp_path) if n != "run") == ["sidecars"]


def test_swap_failure_leaves_old_set(tmp_path, monkeypatch) -> None:
    import fvconsole.core.shared.atomic as atomic

    legacy = build_legacy(str(tmp_path))
    locked.execute_migration(plan_for(legacy))
    before = tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False)

    def broken(a, b):
        raise OSError(5, "Input/output error", a)

    monkeypatch.setattr(atomic, "exchange_paths", broken)
    with pytest.raises(PartialFailure, match="while publishing") as info:
        locked.execute_migration(plan_for(legacy, overwrite=True))
    assert info.value.report["output_dir_changed"] is False
    # The source's reader's record came and went beside its run (issue 37 item 3): the dir holding the
    # run's output dir had its own mtime moved, no entry did.
    after = tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False)
    assert {k: v for k, v in after.items() if k != "run"} == {k: v for k, v in before.items() if k != "run"}
    assert after["run"][::2] == before["run"][::2]


def test_existing_set_needs_overwrite(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)  # planned while the output dir did not exist yet
    locked.execute_migration(plan)
    before = tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False)
    with pytest.raises(FvError, match="--overwrite") as info:
        locked.execute_migration(plan)
    assert info.value.exit_code == 1
    assert tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False) == before


def test_foreign_files_refused_even_with_overwrite(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy, overwrite=True)  # planned before the foreign file appeared
    os.makedirs(legacy.out)
    with open(os.path.join(legacy.out, "notes.txt"), "w") as fh:
        fh.write("mine")
    before = tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False)
    with pytest.raises(FvError, match="notes.txt"):
        locked.execute_migration(plan)
    assert tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False) == before


def _replace_out(plan, out: str):
    return dataclasses.replace(plan, output_dir=out, request=dataclasses.replace(plan.request, output_dir=out))


@pytest.mark.parametrize("where", ["inside", "symlink-to-checkpoint", "symlink-into-checkpoint"])
def test_output_in_checkpoint_refused(tmp_path, where) -> None:
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    if where == "inside":
        out = os.path.join(legacy.checkpoint, "sidecars")
    else:
        out = str(tmp_path / "link")
        target = legacy.checkpoint if where == "symlink-to-checkpoint" else os.path.join(legacy.checkpoint, "dcp")
        os.symlink(target, out)
    before = tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False)
    with pytest.raises(FvError) as info:
        locked.execute_migration(_replace_out(plan, out))
    assert "checkpoint" in str(info.value) or "symlink" in str(info.value)
    assert tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False) == before


def test_sources_rechecked_before_writing(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    with open(legacy.run.config_path, "a", encoding="utf-8") as fh:
        fh.write("# edited after planning\n")
    with pytest.raises(FvError, match="run.yaml"):
        locked.execute_migration(plan)
    assert not os.path.exists(legacy.out)


def test_stale_staging_dirs_cleaned_safely(tmp_path) -> None:
    """Only this host identity's staging dirs with a dead PID go; the rest are reported, untouched."""
    legacy = build_legacy(str(tmp_path))
    name = os.path.basename(legacy.out)
    dead = tmp_path / output_dir.staging_name(name, pid=_dead_pid())
    dead.mkdir()
    (dead / "dataloader_state_rank0.pt").write_bytes(b"partial")
    alive = tmp_path / output_dir.staging_name(name, pid=os.getpid())
    alive.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "dataloader_state_rank0.pt").write_bytes(b"keep me")
    link = tmp_path / output_dir.staging_name(name, pid=_dead_pid())
    os.symlink(victim, link)
    # Same dead PID, but written by another host (the key differs) or by an older version (no identity).
    other = tmp_path / f".{name}.fvconsole-staging-login2-0123456789ab-{_dead_pid()}-feed"
    other.mkdir()
    (other / "dataloader_state_rank0.pt").write_bytes(b"theirs")
    legacy_name = tmp_path / f".{name}.fvconsole-staging-{_dead_pid()}-abcd"
    legacy_name.mkdir()
    warnings = locked.execute_migration(plan_for(legacy)).warnings  # the plan's, then execution's own
    assert not dead.exists()
    assert alive.is_dir()
    assert os.path.islink(link) and (victim / "dataloader_state_rank0.pt").read_bytes() == b"keep me"
    assert (other / "dataloader_state_rank0.pt").read_bytes() == b"theirs" and legacy_name.is_dir()
    text = "\n".join(warnings)
    assert f"{other}: staging dir of another host or container (login2, pid" in text, text
    assert f"{legacy_name}: staging dir without a host identity" in text, text
    assert f"{alive}: staging dir of a running migration on this host (pid {os.getpid()})" in text, text


@pytest.mark.slow
def test_fault_hook_kill_leaves_no_half_set(tmp_path, monkeypatch) -> None:
    """SIGKILL at a file-system step: the output dir is absent or a complete, verifiable set."""
    legacy = build_legacy(str(tmp_path))
    trace = tmp_path / "trace.txt"
    monkeypatch.setenv("FVCONSOLE_FAULT_TRACE", str(trace))
    locked.execute_migration(plan_for(legacy, out=str(tmp_path / "traced")))
    monkeypatch.delenv("FVCONSOLE_FAULT_TRACE")
    labels = trace.read_text().splitlines()
    publish = next(i for i, line in enumerate(labels, 1) if line.endswith(f"-> {tmp_path / 'traced'}"))
    # Every sidecar's create/write/rename came before the set was made durable (one syncfs on
    # this local filesystem), and that before the receipt and the publishing rename.
    renamed = [i for i, line in enumerate(labels, 1) if "rename" in line and "dataloader_state_rank" in line]
    synced = next(i for i, line in enumerate(labels, 1) if " syncfs " in line)
    receipt = next(i for i, line in enumerate(labels, 1) if "create" in line and "migration_receipt" in line)
    assert len(renamed) == WORLD and max(renamed) < synced < receipt < publish
    for kill_at in (WORLD * 2, publish):
        out = str(tmp_path / f"out-{kill_at}")
        env = dict(os.environ, FVCONSOLE_FAULT_KILL_AT=str(kill_at))
        argv = [sys.executable, "-m", "fvconsole", *legacy.migrate_argv("--yes", out=out)]
        killed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert killed.returncode == -9, killed.stderr
        assert not os.path.exists(out)  # never published before complete
        assert any(f"out-{kill_at}.fvconsole-staging" in n for n in os.listdir(tmp_path))
    # Killed right after the publishing rename: the set is there and complete.
    out = str(tmp_path / "out-after")
    env = dict(os.environ, FVCONSOLE_FAULT_KILL_AT=str(publish + 1))
    argv = [sys.executable, "-m", "fvconsole", *legacy.migrate_argv("--yes", out=out)]
    assert subprocess.run(argv, env=env, capture_output=True, timeout=120).returncode == -9
    assert verify.verify_sidecars(legacy.run.config_path, legacy.checkpoint, out).ok
    # The next run (breaking the killed run's lock) cleans its staging dir and publishes a complete set.
    out = str(tmp_path / f"out-{publish}")
    locked.execute_migration(plan_for(legacy, out=out, break_lock=True), break_lock=True)
    assert [n for n in os.listdir(tmp_path) if f"out-{publish}.fvconsole-staging" in n] == []
    assert verify.verify_sidecars(legacy.run.config_path, legacy.checkpoint, out).ok


def test_parallel_write_failure_reports_the_ranks_before_it(tmp_path, monkeypatch) -> None:
    """The thread pool does only I/O; a failure still stops the run and counts, in rank order,
    the sidecars written and checked before the first rank that failed."""
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    real = write._write_file_atomic

    def failing(directory: str, name: str, data: bytes, *rest: bool) -> str:
        if name == "dataloader_state_rank5.pt":
            raise OSError(28, "No space left on device")
        return real(directory, name, data, *rest)

    monkeypatch.setattr(write, "_write_file_atomic", failing)
    with pytest.raises(PartialFailure) as info:
        locked.execute_migration(plan, workers=4)
    assert info.value.report["sidecars_written"] == 5 and info.value.report["staging_removed"] is True
    assert not os.path.exists(legacy.out)
    assert not [n for n in os.listdir(tmp_path) if "fvconsole-staging" in n]
