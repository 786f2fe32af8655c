"""`fvconsole migrate` through the real CLI (migration-exec)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from migration_runs import WORLD, build_legacy, one_json
from mounts import tmpfs
from reliability.harness import tree_digest

from fvconsole.core.migration import verify, write


@pytest.fixture()
def legacy(tmp_path):
    return build_legacy(str(tmp_path))


def test_dry_run_writes_nothing(legacy, tmp_path, cli) -> None:
    before = tree_digest(str(tmp_path), mtimes=True, modes=True)
    code, out, err = cli(legacy.migrate_argv())
    assert code == 0, err
    assert f"dry run: nothing written; re-run with --yes to write {WORLD} sidecars to {legacy.out}" in out
    assert "SP size 2 (4 data-parallel groups)" in out
    assert "rank" in out and "next sample" in out
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == before


def test_dry_run_refuses_what_yes_would_about_the_output_name(legacy, tmp_path, cli) -> None:
    """A name too long for the staging dir beside it: the dry run refused nothing before (exit 0)."""
    out = str(tmp_path / ("x" * 230))  # its lock file name (+16 bytes) still fits
    code, _, err = cli(legacy.migrate_argv(out=out))
    assert code == 1
    assert err.startswith(f"error: output_dir: {out}: output dir name is too long for its staging dir"), err
    code, _, err = cli(legacy.migrate_argv("--yes", out=out))
    assert code == 1 and "too long for its staging dir" in err and not os.path.exists(out)


def test_dry_run_json_shape(legacy, tmp_path, cli) -> None:
    before = tree_digest(str(tmp_path), mtimes=True, modes=True)
    code, out, _ = cli(legacy.migrate_argv("--json"))
    data = one_json(out)
    assert code == 0
    assert data["executed"] is False and data["receipt"] is None
    assert isinstance(data["plan"], dict) and isinstance(data["mismatches"], list)
    assert isinstance(data["warnings"], list)
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == before


def test_execute_json_then_verify(legacy, cli) -> None:
    code, out, err = cli(legacy.migrate_argv("--yes", "--json"))
    assert code == 0, err
    data = one_json(out)
    assert data["executed"] is True
    assert len(data["receipt"]["sidecars"]) == WORLD
    with open(os.path.join(legacy.out, "migration_receipt.json"), encoding="utf-8") as fh:
        assert json.load(fh) == data["receipt"]
    code, _, err = cli(legacy.verify_argv())
    assert code == 0, err


def test_execute_human_prints_next_step(legacy, cli) -> None:
    code, out, err = cli(legacy.migrate_argv("--yes"))
    assert code == 0, err
    assert f"receipt: {os.path.join(legacy.out, 'migration_receipt.json')}" in out
    assert f"export FASTVIDEO_DATALOADER_STATE_DIR={legacy.out}" in out
    assert "progress: 8/8" in err  # plain progress lines when stderr is not a TTY


def test_mismatched_config_refused_with_path(legacy, tmp_path, cli) -> None:
    before = tree_digest(str(tmp_path), mtimes=True, modes=True)
    code, out, err = cli(legacy.migrate_argv("--set", "training.distributed.num_gpus=16", "--yes", "--json"))
    assert code == 1
    data = one_json(out)
    assert data["executed"] is False and "error" in data
    assert data["refusals"] and all({"field", "message"} <= set(r) for r in data["refusals"])
    critical = [m for m in data["mismatches"] if m["critical"]]
    assert critical[0]["path"] == "training.distributed.num_gpus"
    assert (critical[0]["checkpoint"], critical[0]["config"]) == (8, 16)
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == before
    code, out, err = cli(legacy.migrate_argv("--set", "training.distributed.num_gpus=16", "--yes"))
    assert code == 1 and "training.distributed.num_gpus" in out + err
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == before


def test_existing_set_without_overwrite_refused_then_overwritten(legacy, cli) -> None:
    assert cli(legacy.migrate_argv("--yes")).returncode == 0
    before = tree_digest(legacy.out, mtimes=True, modes=True)
    code, _, err = cli(legacy.migrate_argv("--yes"))
    assert code == 1 and "overwrite" in err
    assert tree_digest(legacy.out, mtimes=True, modes=True) == before
    code, out, err = cli(legacy.migrate_argv("--yes", "--overwrite", "--json"))
    assert code == 0, err
    assert one_json(out)["executed"] is True
    assert tree_digest(legacy.out, mtimes=True, modes=True) != before  # new receipt (created_at) and new files


def test_partial_failure_exit_3_keeps_old_set(legacy, monkeypatch, cli) -> None:
    assert cli(legacy.migrate_argv("--yes")).returncode == 0
    before = tree_digest(legacy.out, mtimes=True, modes=True)
    real = write._write_file_atomic

    def failing(directory, name, data, *rest):
        if name == "dataloader_state_rank4.pt":
            raise OSError(5, "Input/output error")
        return real(directory, name, data, *rest)

    monkeypatch.setattr(write, "_write_file_atomic", failing)
    code, out, err = cli(legacy.migrate_argv("--yes", "--overwrite", "--json"))
    assert code == 3
    data = one_json(out)
    assert data["executed"] is False and "Input/output error" in data["error"]
    assert data["failure"]["stage"] == "writing sidecars" and data["failure"]["sidecars_written"] == 4
    assert err.startswith("error: ") and err.count("\n") == 1
    assert tree_digest(legacy.out, mtimes=True, modes=True) == before


def test_output_inside_checkpoint_refused(legacy, cli) -> None:
    before = tree_digest(legacy.checkpoint, mtimes=True, modes=True)
    code, _, err = cli(legacy.migrate_argv("--yes", out=os.path.join(legacy.checkpoint, "state")))
    assert code == 1 and "checkpoint" in err
    assert tree_digest(legacy.checkpoint, mtimes=True, modes=True) == before


def test_usage_errors_exit_2(legacy) -> None:
    from fvconsole.cli import main

    with pytest.raises(SystemExit) as info:
        main(["migrate", "--config", legacy.run.config_path])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(legacy.migrate_argv()[:-2] + ["--consumed-batches-per-rank", "-1"])
    assert info.value.code == 2


def test_subprocess_python_m_fvconsole(legacy, tmp_path) -> None:
    before = tree_digest(legacy.checkpoint, mtimes=True, modes=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FVCONSOLE_FAULT")}
    done = subprocess.run(
        [sys.executable, "-m", "fvconsole", *legacy.migrate_argv("--yes")],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"export FASTVIDEO_DATALOADER_STATE_DIR={legacy.out}" in done.stdout
    assert "Traceback" not in done.stderr
    assert tree_digest(legacy.checkpoint, mtimes=True, modes=True) == before
    assert verify.verify_sidecars(legacy.run.config_path, legacy.checkpoint, legacy.out).ok


def test_dry_run_already_refuses_foreign_output_dir(legacy, tmp_path, cli) -> None:
    os.makedirs(legacy.out)
    with open(os.path.join(legacy.out, "train.log"), "w", encoding="utf-8") as fh:
        fh.write("not ours")
    before = tree_digest(str(tmp_path), mtimes=True, modes=True)
    code, out, err = cli(legacy.migrate_argv("--json"))
    assert code == 1
    data = one_json(out)
    assert data["refusals"][0]["field"] == "output_dir" and "train.log" in data["error"]
    assert "train.log" in err
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == before


@pytest.mark.parametrize(("world", "sp", "sidecars", "groups", "already"), [
    (1, 1, "1 sidecar", "1 data-parallel group", "1 dataloader_state_rank<r>.pt sidecar"),
    (2, 1, "2 sidecars", "2 data-parallel groups", "2 dataloader_state_rank<r>.pt sidecars"),
])
def test_the_sidecars_are_counted_with_their_noun(tmp_path, cli, world, sp, sidecars, groups, already) -> None:
    """Issue 28 item 3: a world size of 1 writes "1 sidecar", never "1 sidecars"."""
    run = build_legacy(str(tmp_path), world=world, sp=sp)
    code, out, err = cli(run.migrate_argv(world=world))
    assert code == 0, err
    assert f"world size {world}, SP size {sp} ({groups}), " in out
    assert f"dry run: nothing written; re-run with --yes to write {sidecars} to {run.out}" in out
    code, out, err = cli(run.migrate_argv("--yes", world=world))
    assert code == 0, err
    assert f"wrote {sidecars} to {run.out}" in out
    code, out, err = cli(run.verify_argv())
    assert code == 0, err
    assert f"OK: {sidecars} and the receipt match the plan" in out
    code, _, err = cli(run.migrate_argv(world=world))
    assert code == 1 and err == (f"error: output_dir: {run.out} already contains {already} and a receipt "
                                 f"(e.g. dataloader_state_rank0.pt); use --overwrite to replace them\n")


def test_a_failed_verification_counts_its_problems_with_their_noun(tmp_path, cli) -> None:
    """Issue 28 item 3: `sidecars verify` says "1 problem", "2 problems", never "problem(s)"."""
    run = build_legacy(str(tmp_path), world=2, sp=1)
    assert cli(run.migrate_argv("--yes", world=2)).returncode == 0
    os.remove(os.path.join(run.out, "dataloader_state_rank1.pt"))
    code, out, err = cli(run.verify_argv())
    assert code == 1 and "FAILED: 1 problem:\n  - rank 1: dataloader_state_rank1.pt: missing\n" in out
    assert err == "error: verification failed (1 problem); first: rank 1: dataloader_state_rank1.pt: missing\n"
    os.remove(os.path.join(run.out, "dataloader_state_rank0.pt"))
    code, out, err = cli(run.verify_argv())
    assert code == 1 and "FAILED: 2 problems:\n" in out
    assert err == "error: verification failed (2 problems); first: rank 0: dataloader_state_rank0.pt: missing\n"


def test_refusals_are_counted_with_their_noun(legacy, cli) -> None:
    """Issue 28 item 3: "refused (1 reason)", "(+1 more refusal)", "1 file", never "reason(s)"."""
    os.makedirs(legacy.out)
    with open(os.path.join(legacy.out, "train.log"), "w", encoding="utf-8") as fh:
        fh.write("not ours")
    foreign = (f"output_dir: {legacy.out}: output dir contains 1 file other than fvconsole sidecars (train.log); "
               "refusing to replace it (--output-dir)")
    code, out, err = cli(legacy.migrate_argv())
    assert code == 1 and err == f"error: {foreign}\n"
    assert out.splitlines()[-2:] == ["refused (1 reason); nothing written:", f"  - {foreign}"]
    with open(os.path.join(legacy.out, "notes.txt"), "w", encoding="utf-8") as fh:
        fh.write("not ours either")
    code, out, err = cli(legacy.migrate_argv(world=4))
    assert code == 1 and err.endswith(" (+1 more refusal)\n")
    assert "refused (2 reasons); nothing written:" in out
    assert f"{legacy.out}: output dir contains 2 files other than fvconsole sidecars (" in out
    code, out, err = cli(legacy.migrate_argv(world=4, step=4))
    assert code == 1 and err.endswith(" (+4 more refusals)\n") and "refused (5 reasons); nothing written:" in out


def test_dry_run_refuses_an_output_dir_on_a_read_only_filesystem(tmp_path, capsys) -> None:
    """The dry run must not promise a write that execution would fail part-way (exit 3)."""
    from fvconsole.cli import main
    from fvconsole.demo.builders import build_run

    ro = tmp_path / "ro"
    with tmpfs(ro, 1 << 20, "ro"):
        run = build_run(str(tmp_path / "run"), steps=(2,), num_gpus=4, sp_size=2)
        code = main(["migrate", "--config", run.config_path, "--checkpoint", run.checkpoint(2),
                     "--output-dir", str(ro / "sidecars"), "--expected-step", "2", "--expected-world-size", "4",
                     "--consumed-batches-per-rank", "2"])
        err = capsys.readouterr().err
        assert code == 1 and "read-only filesystem" in err and "output_dir" in err


# ------------------------------------------------------------ execution's re-checks, between plan and write


def _between_plan_and_write(monkeypatch, tmp_path, change) -> dict:
    """``migrate --yes`` plans, then ``change()`` runs (another process editing the sources), then it
    executes: returns the tree digest of ``tmp_path`` right after the change, to show nothing was written."""
    import fvconsole.core.migration as planning  # the façade the CLI plans through

    real_plan = planning.preview_migration
    after: dict = {}

    def plan_then_change(*args, **kwargs):
        preview = real_plan(*args, **kwargs)
        assert preview.plan is not None, [r.message for r in preview.refusals]
        change()
        after["digest"] = tree_digest(str(tmp_path), mtimes=True, modes=True)
        return preview

    monkeypatch.setattr(planning, "preview_migration", plan_then_change)
    return after


def _sha12(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()[:12]


def test_a_run_config_edited_after_the_plan_is_refused_with_the_config_field(legacy, tmp_path, monkeypatch,
                                                                             cli) -> None:
    """The refusal object was ``{"field": "execute", ...}``, written by hand; it is now the preview's shape."""
    config = legacy.run.config_path

    def edit() -> None:
        with open(config, "a", encoding="utf-8") as fh:
            fh.write("# edited after planning\n")

    after = _between_plan_and_write(monkeypatch, tmp_path, edit)
    code, out, err = cli(legacy.migrate_argv("--yes", "--json"))
    said = f"{config}: run config changed since the plan was made (sha256)"
    assert code == 1
    assert err == f"error: {said}\n"  # the one line is what it was
    data = one_json(out)
    assert data["error"] == said and data["executed"] is False
    assert data["refusals"] == [{"field": "config", "message": f"config: {said}"}]
    assert not os.path.lexists(legacy.out)
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == after["digest"]


def test_checkpoint_metadata_rewritten_after_the_plan_is_refused_with_the_metadata_field(legacy, tmp_path,
                                                                                         monkeypatch, cli) -> None:
    meta = os.path.join(os.path.realpath(legacy.checkpoint), "metadata.json")
    with open(meta, "rb") as fh:
        planned = fh.read()
    rewritten = planned.rstrip() + b"\n\n"  # the same JSON, other bytes: a save rewrote it

    def rewrite() -> None:
        with open(meta, "wb") as fh:
            fh.write(rewritten)

    after = _between_plan_and_write(monkeypatch, tmp_path, rewrite)
    code, out, err = cli(legacy.migrate_argv("--yes", "--json"))
    said = f"{meta}: changed since the plan was made (sha256 {_sha12(rewritten)} != {_sha12(planned)})"
    assert code == 1 and err == f"error: {said}\n"
    data = one_json(out)
    assert data["refusals"] == [{"field": "metadata.json", "message": f"metadata.json: {said}"}]
    assert not os.path.lexists(legacy.out)
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == after["digest"]


def test_a_foreign_file_appearing_after_the_plan_is_the_previews_refusal(legacy, tmp_path, monkeypatch, cli) -> None:
    """The same output dir rule refuses with the same field and words in the preview and in execution."""
    said = (f"output_dir: {legacy.out}: output dir contains 1 file other than fvconsole sidecars "
            f"(train.log); refusing to replace it (--output-dir)")

    def drop_a_log() -> None:
        os.makedirs(legacy.out)
        with open(os.path.join(legacy.out, "train.log"), "w", encoding="utf-8") as fh:
            fh.write("not ours")

    after = _between_plan_and_write(monkeypatch, tmp_path, drop_a_log)
    code, out, err = cli(legacy.migrate_argv("--yes", "--json"))
    assert code == 1
    assert one_json(out)["refusals"] == [{"field": "output_dir", "message": said}]
    assert tree_digest(str(tmp_path), mtimes=True, modes=True) == after["digest"]
    monkeypatch.undo()
    code, out, err = cli(legacy.migrate_argv("--json"))  # the dry run, now that the log is there
    assert code == 1 and one_json(out)["refusals"] == [{"field": "output_dir", "message": said}]


def test_a_lock_taken_after_the_plan_is_refused_under_the_output_dir_field(legacy, tmp_path, monkeypatch,
                                                                           cli) -> None:
    from fvconsole.core.migration.output_dir import migration_lock

    other = migration_lock(legacy.out)  # another migration of this host, still running
    after = _between_plan_and_write(monkeypatch, tmp_path, other.acquire)
    try:
        code, out, err = cli(legacy.migrate_argv("--yes", "--json"))
        # Trying the lock linked and removed a temp file beside it: the dir's own mtime moved, no entry did.
        assert tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False) == {
            k: v for k, v in after["digest"].items() if k != "."}
    finally:
        other.release()
    assert code == 1
    [refusal] = one_json(out)["refusals"]
    assert refusal["field"] == "output_dir"
    assert refusal["message"].startswith(f"output_dir: {legacy.out}: another migration holds the lock (pid {os.getpid()} ")
    assert err.startswith(f"error: {legacy.out}: another migration holds the lock (pid {os.getpid()} ")
    assert not os.path.lexists(legacy.out)


@pytest.mark.parametrize(("value", "says"), [
    ("abc", "must be an integer in the override training.distributed.num_gpus=abc (got 'abc')"),
    ("-2", "must be >= 1 in the override training.distributed.num_gpus=-2 (got -2)"),
    ("true", "must be an integer in the override training.distributed.num_gpus=true (got True)"),
])
def test_a_wrong_typed_override_is_named_as_the_source_of_its_value(legacy, cli, value, says) -> None:
    """The file-and-field rule: a bad value that came from --set names the override, not the run config file."""
    code, out, err = cli(legacy.migrate_argv("--set", f"training.distributed.num_gpus={value}"))
    assert code == 1
    assert err.startswith(f"error: training.distributed.num_gpus: {says}"), err
    assert legacy.run.config_path not in err.split(" (+")[0]
    code, out, _ = cli(legacy.migrate_argv("--set", f"training.distributed={{num_gpus: {value}}}", "--json"))
    first = one_json(out)["refusals"][0]
    assert first["field"] == "training.distributed.num_gpus"
    assert f"in the override training.distributed={{num_gpus: {value}}}" in first["message"]


def test_a_value_the_overrides_leave_alone_still_names_the_file(legacy, cli) -> None:
    with open(legacy.run.config_path, encoding="utf-8") as fh:
        text = fh.read()
    assert "seed: " in text
    with open(legacy.run.config_path, "w", encoding="utf-8") as fh:
        fh.write(text.replace("seed: ", "seed: x", 1))
    code, _, err = cli(legacy.migrate_argv("--set", "training.distributed.num_gpus=8"))
    assert code == 1
    assert f"training.data.seed: must be an integer in {legacy.run.config_path} (got " in err, err


def test_a_config_mismatch_names_where_each_new_value_came_from(legacy, cli) -> None:
    """The refusal said 'run config FILE differs' for a difference a --set made: each key names its source."""
    path = legacy.run.config_path
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert "seed: 42\n" in text
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text.replace("seed: 42\n", "seed: 7\n", 1))  # the file differs on the seed
    code, out, err = cli(legacy.migrate_argv("--set", "training.data.train_batch_size=3"))  # an override, the batch
    assert code == 1
    assert err.startswith("error: config: the run config differs from the checkpoint's embedded config on 2 critical keys: "
                          "training.data.train_batch_size: checkpoint=2, config=3 (in the override "
                          "training.data.train_batch_size=3); "
                          f"training.data.seed: checkpoint=42, config=7 (in {path}); "), err
    rows = {line.split()[1]: line.split()[-2:] for line in out.splitlines() if line.startswith("!  training.")}
    assert rows == {"training.data.train_batch_size": ["--set", "training.data.train_batch_size=3"],
                    "training.data.seed": ["7", path]}
    code, out, _ = cli(legacy.migrate_argv("--set", "training.data.train_batch_size=3", "--json"))
    assert code == 1
    mismatches = {m["path"]: m for m in one_json(out)["mismatches"]}
    assert mismatches["training.data.train_batch_size"] == {
        "path": "training.data.train_batch_size", "checkpoint": 2, "config": 3, "critical": True,
        "config_set_by": "training.data.train_batch_size=3"}
    assert mismatches["training.data.seed"]["config_set_by"] is None
