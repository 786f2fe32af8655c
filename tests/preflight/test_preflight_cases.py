"""`fvconsole preflight` on real FastVideo-format runs, each breaking one thing the issue names.

Every run is built by ``fvconsole.demo.builders`` as FastVideo writes it: a real single-process
DCP save (torch CPU), real Parquet files and manifest, per-rank ``dataloader_state_rank<r>.pt``
(native) or a published migration set (legacy), per-rank RNG snapshots with FastVideo's keys.
The expected verdicts (go or not, the first blocking check, the ranks and the words that name
the file or field) are written by hand from FastVideo's resume code, never read from preflight;
and every verdict is checked against FastVideo's own resume run on every target rank
(``tests/fastvideo_reference.py: resume_every_rank``: a real ``dcp.load``, ``torch.load`` of each
sidecar and RNG file, the streaming dataset's checks): ``go`` must be "every rank resumes".
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import fastvideo_reference
import pytest
import yaml

from fvconsole.demo.builders import DEFAULT_COLUMNS, build_run, rng_state

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _flag(extra: tuple[str, ...], name: str) -> list[str]:
    return [extra[i + 1] for i, word in enumerate(extra) if word == name]


def _oracle(run, extra: tuple[str, ...]) -> tuple[bool, list[str]]:
    """FastVideo's own resume on every target rank (tests/fastvideo_reference.py), for the same inputs."""
    config = yaml.safe_load(Path(run.config_path).read_text(encoding="utf-8"))
    for item in _flag(extra, "--set"):
        key, _, value = item.partition("=")
        node = config
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value) if value else None
    world = int((_flag(extra, "--world-size") or [config["training"]["distributed"]["num_gpus"]])[0])
    resume = (_flag(extra, "--resume") or [config["training"]["checkpoint"].get("resume_from_checkpoint")])[0]
    override = (_flag(extra, "--dataloader-state-dir") or [None])[0]
    return fastvideo_reference.resume_every_rank(config, resume=resume, world_size=world, override=override,
                                                 columns=DEFAULT_COLUMNS)


def _agrees(doc: dict, oracle: tuple[bool, list[str]]) -> None:
    """preflight's go is "every rank resumes" in FastVideo; a no-go names a rank or a stage FastVideo fails on."""
    resumes, failures = oracle
    assert doc["go"] == resumes, (doc["problems"], failures)
    if resumes:
        return
    failing = {int(f.split(":")[0].split()[1]) for f in failures if f.startswith("rank ")}
    blocking = _blocking(doc)
    if failing:
        assert any(failing & set(c.get("ranks", ())) for c in blocking), (doc["problems"], failures)
    else:
        stage = failures[0].split(":")[0]
        assert any(c["check"] == stage for c in blocking), (doc["problems"], failures)


def _preflight(cli, run, *extra: str) -> tuple[int, dict]:
    """``preflight --json`` of ``run`` (``--resume latest`` unless ``extra`` names another: the demo's
    run config resumes from nothing), checked against FastVideo's own resume unless ``--strict``."""
    resume = () if "--resume" in extra else ("--resume", "latest")
    code, out, err = cli(["preflight", "--config", run.config_path, "--json", *resume, *extra])
    assert err == "", err
    doc = json.loads(out)
    if "--strict" not in extra:
        _agrees(doc, _oracle(run, (*resume, *extra)))
    return code, doc


def _blocking(doc: dict) -> list[dict]:
    return [c for c in doc["checks"] if c["status"] == "fail"]


def _native(root: Path, *, world: int = 4, steps=(2,), **kwargs):
    return build_run(root / "run", steps=steps, kind="rank-local", num_gpus=world, **kwargs)


def _torch_save(payload, path: str) -> None:
    import torch

    torch.save(payload, path)


# --------------------------------------------------------------------------- healthy runs


def test_a_native_checkpoint_resumed_at_the_same_world_size_is_a_go(cli, tmp_path) -> None:
    run = _native(tmp_path)
    code, doc = _preflight(cli, run, "--resume", "latest")
    assert code == 0 and doc["go"] is True
    assert doc["resume"] == {"checkpoint": os.path.join(run.output_dir, "checkpoint-2"), "step": 2}
    assert (doc["world_size"], doc["sp_size"], doc["problems"]) == (4, 1, [])
    by = {c["check"]: c for c in doc["checks"]}
    assert by["dataloader"]["ranks"] == [0, 1, 2, 3] and by["dataloader"]["status"] == "ok"
    assert by["rng"]["ranks"] == [0, 1, 2, 3] and by["rng"]["status"] == "ok"
    code, out, _ = cli(["preflight", "--config", run.config_path, "--resume", "latest"])
    assert code == 0 and out.splitlines()[-1] == "GO: resume checkpoint-2 (step 2) on 4 ranks"
    assert "ranks 0-3:" in out


def test_no_checkpoint_to_resume_from_is_a_fresh_start_go(cli, tmp_path) -> None:
    run = _native(tmp_path)
    code, out, _ = cli(["preflight", "--config", run.config_path, "--set", "training.checkpoint.output_dir="
                        + str(tmp_path / "elsewhere"), "--resume", "latest"])
    assert code == 0
    assert out.splitlines()[-1] == "GO: fresh start on 4 ranks (no checkpoint to resume from)"
    code, out, _ = cli(["preflight", "--config", run.config_path, "--json"])
    doc = json.loads(out)
    assert code == 0 and doc["resume"] is None and doc["go"] is True


@pytest.mark.parametrize("target", [8, 2])
def test_a_checkpoint_resharded_for_a_grown_or_shrunk_world_is_a_go(cli, tmp_path, target) -> None:
    run = _native(tmp_path, world=4)
    view = tmp_path / f"view-{target}" / "checkpoint-2"
    code, _, err = cli(["migrate", "--config", run.config_path, "--set", f"training.distributed.num_gpus={target}",
                        "--checkpoint", run.checkpoint(2), "--output-dir", str(view), "--expected-step", "2",
                        "--expected-world-size", "4", "--consumed-batches-per-rank", "2", "--reshard", "nearest",
                        "--yes"])
    assert code == 0, err
    code, doc = _preflight(cli, run, "--world-size", str(target), "--resume", str(view))
    assert code == 0 and doc["go"] is True, doc["problems"]
    by = {c["check"]: c for c in doc["checks"] if c["status"] != "ok"}
    assert "resharded for world size" in by["config"]["detail"]
    if target > 4:  # the new ranks have no RNG snapshot: FastVideo skips the restore there
        assert by["rng"]["status"] == "warn" and by["rng"]["ranks"] == list(range(4, target))


# --------------------------------------------------------------------------- one thing broken each


def test_latest_picks_an_interrupted_save_while_a_complete_one_exists(cli, tmp_path) -> None:
    from fvconsole.demo.builders import write_checkpoint

    run = _native(tmp_path, steps=(2,))
    write_checkpoint(run.output_dir, 4, run.config, kind="rank-local", complete=False, incomplete="dcp-metadata")
    code, doc = _preflight(cli, run, "--resume", "latest")
    assert code == 1 and doc["resume"]["step"] == 4
    resolve = [c for c in doc["checks"] if c["check"] == "resolve"][0]
    assert resolve["status"] == "warn" and "interrupted save" in resolve["detail"] and "checkpoint-2" in \
        resolve["detail"]
    first = _blocking(doc)[0]
    assert first["check"] == "dcp" and first["detail"].startswith(
        os.path.join(run.output_dir, "checkpoint-4", "dcp", ".metadata"))
    code, out, _ = cli(["preflight", "--config", run.config_path, "--resume", "latest"])
    assert out.splitlines()[-1].startswith("NO-GO: ")
    assert f"fix: fvconsole checkpoints prune {run.output_dir} --incomplete" in out


def test_a_truncated_distcp_shard_fails_naming_the_file(cli, tmp_path) -> None:
    run = _native(tmp_path)
    shard = Path(run.checkpoint(2)) / "dcp" / "__0_0.distcp"
    size = shard.stat().st_size
    os.truncate(shard, size // 2)
    code, doc = _preflight(cli, run, "--resume", "latest")
    assert code == 1 and doc["go"] is False
    first = _blocking(doc)[0]
    assert first["check"] == "dcp"
    assert first["detail"] == f"{shard}: {size // 2} bytes, shorter than the {size} its items read (truncated)"


def test_rank_11s_sidecar_missing_from_the_override_dir(cli, tmp_path) -> None:
    run = build_run(tmp_path / "run", steps=(2,), kind="legacy", num_gpus=12)
    state = tmp_path / "state"
    code, _, err = cli(["migrate", "--config", run.config_path, "--checkpoint", run.checkpoint(2), "--output-dir",
                        str(state), "--expected-step", "2", "--expected-world-size", "12",
                        "--consumed-batches-per-rank", "2", "--yes"])
    assert code == 0, err
    code, doc = _preflight(cli, run, "--dataloader-state-dir", str(state))
    assert code == 0 and doc["go"] is True, doc["problems"]
    (state / "dataloader_state_rank11.pt").unlink()
    code, doc = _preflight(cli, run, "--dataloader-state-dir", str(state))
    assert code == 1
    first = _blocking(doc)[0]
    assert first["check"] == "dataloader" and first["ranks"] == [11]
    assert first["detail"] == (f"rank 11: FASTVIDEO_DATALOADER_STATE_DIR is set, but the rank's state is missing: "
                               f"{state}/dataloader_state_rank<r>.pt")


def test_a_legacy_checkpoint_without_an_override_dir_names_the_published_set(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("FASTVIDEO_DATALOADER_STATE_DIR", raising=False)
    run = build_run(tmp_path / "run", steps=(2,), kind="legacy", num_gpus=4)
    code, doc = _preflight(cli, run)
    assert code == 1
    first = _blocking(doc)[0]
    assert first["check"] == "dataloader" and first["ranks"] == [0, 1, 2, 3]
    assert "refuses legacy multi-rank DCP dataloader state" in first["detail"]
    code, out, _ = cli(["preflight", "--config", run.config_path, "--resume", "latest"])
    assert "fix: fvconsole migrate --config" in out


def test_another_world_size_without_a_reshard_fails_on_every_rank(cli, tmp_path) -> None:
    run = _native(tmp_path, world=4)
    code, doc = _preflight(cli, run, "--world-size", "8")
    assert code == 1 and doc["world_size"] == 8
    first = _blocking(doc)[0]
    assert first["check"] == "dataloader" and first["ranks"] == [0, 1, 2, 3]
    assert "field 'world_size' is 4, expected 8" in first["detail"]
    code, out, _ = cli(["preflight", "--config", run.config_path, "--world-size", "8", "--resume", "latest"])
    assert "--reshard nearest" in out


def test_a_changed_sampling_config_fails_the_streaming_topology_check(cli, tmp_path) -> None:
    run = _native(tmp_path)
    code, doc = _preflight(cli, run, "--set", "training.data.streaming_read_batch_size=4")
    assert code == 1
    first = _blocking(doc)[0]
    assert first["check"] == "dataloader" and first["ranks"] == [0, 1, 2, 3]
    assert "'streaming loader topology or sampling config changed' (read_batch_size 8 -> 4)" in first["detail"]


def test_an_older_single_rng_file_without_gen_cuda_fails(cli, tmp_path) -> None:
    run = _native(tmp_path)
    ckpt = Path(run.checkpoint(2))
    for rank in range(4):
        (ckpt / f"rng_state_rank{rank}.pt").unlink()
    _torch_save(rng_state(0, 2, keys=("torch_rng", "python_rng", "numpy_rng", "cuda_rng")), str(ckpt / "rng_state.pt"))
    code, doc = _preflight(cli, run)
    assert code == 1
    (first,) = _blocking(doc)
    assert first["check"] == "rng" and first["ranks"] == [0, 1, 2, 3]
    assert "rng_state.pt" in first["detail"] and "'gen_cuda'" in first["detail"]


def test_no_rng_file_at_all_is_a_warning_and_strict_makes_it_a_no_go(cli, tmp_path) -> None:
    run = _native(tmp_path)
    for rank in range(4):
        (Path(run.checkpoint(2)) / f"rng_state_rank{rank}.pt").unlink()
    code, doc = _preflight(cli, run)
    assert code == 0 and doc["go"] is True
    code, doc = _preflight(cli, run, "--strict")
    assert code == 1 and doc["go"] is False and doc["problems"][0].startswith("resolve: ") is False


def test_a_touched_parquet_file_changes_the_fingerprint_the_cursors_were_made_against(cli, tmp_path) -> None:
    run = _native(tmp_path)
    parquet = sorted(Path(run.dataset_root).rglob("*.parquet"))[1]
    st = parquet.stat()
    os.utime(parquet, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    code, doc = _preflight(cli, run)
    assert code == 1
    first = _blocking(doc)[0]
    assert first["check"] == "dataset" and first["ranks"] == [0, 1, 2, 3]
    assert "streaming dataset manifest changed" in first["detail"]


def test_a_missing_manifest_that_rebuilds_to_the_same_fingerprint_is_a_go(cli, tmp_path) -> None:
    run = _native(tmp_path)
    os.unlink(run.manifest_path)
    code, doc = _preflight(cli, run)
    assert code == 0 and doc["go"] is True, doc["problems"]
    assert any("rebuilds it at the start" in c["detail"] for c in doc["checks"] if c["check"] == "dataset")


def test_a_dataset_with_no_parquet_file_left_is_fastvideos_failure(cli, tmp_path) -> None:
    run = _native(tmp_path)
    for parquet in Path(run.dataset_root).rglob("*.parquet"):
        parquet.unlink()
    code, doc = _preflight(cli, run)
    assert code == 1
    first = _blocking(doc)[0]
    assert first["check"] == "dataset" and "no Parquet file under" in first["detail"]


def test_usage_errors_exit_2(cli, tmp_path) -> None:
    run = _native(tmp_path)
    code, _, err = cli(["preflight", "--config", run.config_path, "--nodes", "n[1-2]"])
    assert code == 2 and "--cache-root" in err
    code, _, err = cli(["preflight", "--config", run.config_path, "--world-size", "0"])
    assert code == 2 and "--world-size" in err


def test_the_weight_cache_is_warm_or_cold_and_never_blocks(cli, tmp_path) -> None:
    from fvconsole.demo.cache_builders import write_cache_entry

    run = _native(tmp_path)
    cache = tmp_path / "wcache"
    write_cache_entry(cache, num_shards=8)  # another job's layout: cold for 4 ranks
    code, doc = _preflight(cli, run, "--cache-root", str(cache))
    (line,) = [c for c in doc["checks"] if c["check"] == "cache"]
    assert code == 0 and doc["go"] is True
    assert line["status"] == "warn" and "cold (no complete entry of 4 shards)" in line["detail"]
    key = os.path.basename(write_cache_entry(cache, num_shards=4))
    code, doc = _preflight(cli, run, "--cache-root", str(cache))
    (line,) = [c for c in doc["checks"] if c["check"] == "cache"]
    assert line["status"] == "ok" and f"warm ({key}, 4 shards" in line["detail"]
    code, doc = _preflight(cli, run, "--cache-root", str(tmp_path / "no-such-cache"), "--strict")
    assert code == 1 and [c["status"] for c in doc["checks"] if c["check"] == "cache"] == ["warn"]


def test_the_cache_check_runs_on_every_node_through_the_fleet(cli, tmp_path, srun_on_path) -> None:
    from fvconsole.demo.cache_builders import write_cache_entry

    run = _native(tmp_path)
    write_cache_entry(tmp_path / "a1" / "wcache", num_shards=4, tensor_bytes=256)
    write_cache_entry(tmp_path / "a2" / "wcache", num_shards=8, tensor_bytes=256)
    code, doc = _preflight(cli, run, "--cache-root", str(tmp_path / "{node}" / "wcache"), "--nodes", "a[1-2]")
    lines = {c["detail"].split(":")[0]: c for c in doc["checks"] if c["check"] == "cache"}
    assert code == 0 and set(lines) == {"a1", "a2"}
    assert lines["a1"]["status"] == "ok" and "warm" in lines["a1"]["detail"]
    assert lines["a2"]["status"] == "warn" and "cold" in lines["a2"]["detail"]


def test_a_planted_pickle_as_rank_2s_rng_file_is_a_finding_and_never_runs(cli, tmp_path) -> None:
    from reliability.harness import write_malicious_pt

    run = _native(tmp_path)
    marker = tmp_path / "pwned"
    write_malicious_pt(Path(run.checkpoint(2)) / "rng_state_rank2.pt", marker)
    code, out, _ = cli(["preflight", "--config", run.config_path, "--resume", "latest", "--json"])
    doc = json.loads(out)
    assert code == 1 and not marker.exists()
    (first,) = _blocking(doc)
    assert first["check"] == "rng" and first["ranks"] == [2] and "is not readable" in first["detail"]


def test_a_wrong_typed_override_is_named_as_the_source_of_its_value(cli, tmp_path) -> None:
    """The file-and-field rule: preflight names the --set override that gave a bad value, not the run config file."""
    run = _native(tmp_path)
    code, _, err = cli(["preflight", "--config", run.config_path, "--set", "training.distributed.num_gpus=abc"])
    assert code == 1
    assert err == ("error: the override training.distributed.num_gpus=abc: field 'training.distributed.num_gpus' "
                   "must be an integer >= 1 (got 'abc')\n")
    code, _, err = cli(["preflight", "--config", run.config_path, "--set", "training.distributed.sp_size=-1"])
    assert code == 1 and err.startswith("error: the override training.distributed.sp_size=-1: field "), err
    code, doc = _preflight(cli, run, "--set", "training.data.seed=abc", "--strict")
    assert code == 1
    assert _blocking(doc)[0]["detail"] == ("the next config: training.data.seed: must be an integer in the override "
                                           "training.data.seed=abc (got 'abc')")


def test_the_config_check_names_where_each_differing_value_came_from(cli, tmp_path) -> None:
    """As ``migrate``'s mismatch report: the --set override that set a key, else the run config file (the
    check named neither before: it compared the config without its overrides' names)."""
    run = _native(tmp_path)
    config = Path(run.config_path)
    config.write_text(config.read_text(encoding="utf-8").replace("seed: 42", "seed: 7"), encoding="utf-8")
    read_batch = "training.data.streaming_read_batch_size=4"
    says = ("2 differences from the embedded config: training.data.streaming_read_batch_size: checkpoint=8, "
            f"config=4 (in the override {read_batch}); training.data.seed: checkpoint=42, config=7 "
            f"(in {run.config_path})")
    _, doc = _preflight(cli, run, "--set", read_batch)
    (check,) = [c for c in doc["checks"] if c["check"] == "config"]
    assert (check["status"], check["detail"]) == ("warn", says), check
    _, out, _ = cli(["preflight", "--config", run.config_path, "--set", read_batch, "--resume", "latest"])
    assert f"warn  config      {says}" in out.splitlines(), out
    # --world-size is the override of num_gpus the fix commands repeat
    _, doc = _preflight(cli, run, "--world-size", "8")
    (check,) = [c for c in doc["checks"] if c["check"] == "config"]
    assert check["detail"].startswith("2 differences from the embedded config: training.distributed.num_gpus: "
                                      "checkpoint=4, config=8 (in the override training.distributed.num_gpus=8); "
                                      f"training.data.seed: checkpoint=42, config=7 (in {run.config_path})"), check
