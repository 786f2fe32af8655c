"""`fvconsole demo`: the workspace it builds is real, varied, and rebuilt only where safe."""

from __future__ import annotations

import os

import pytest

from fvconsole.cli import main
from fvconsole.demo.workspace import MARKER, build_demo_workspace


def test_demo_no_tui_builds_a_realistic_workspace(tmp_path, capsys) -> None:
    from fvconsole.core.cache import scan_cache
    from fvconsole.core.checkpoints.listing import discover_checkpoints
    from fvconsole.core.migration.plan import MigrationRequest, preview_migration

    root = tmp_path / "demo"
    assert main(["demo", str(root), "--no-tui"]) == 0
    printed = capsys.readouterr().out
    assert f"demo workspace: {root}" in printed and "fvconsole migrate --config" in printed
    infos = {i.step: i for i in discover_checkpoints(str(root / "output"))}
    assert sorted(infos) == [100, 200, 300, 400, 500]
    assert [infos[s].kind for s in (100, 200, 300)] == ["legacy"] * 3
    assert infos[400].kind == "rank-local" and infos[400].complete
    assert not infos[500].complete
    scan = scan_cache(str(root / "shard-cache"))
    assert {"complete", "partial", "incomplete", "invalid"} <= {e.status for e in scan.entries}
    assert "README.txt" in " ".join(scan.foreign)
    ages = sorted(scan.scanned_at - e.last_used for e in scan.entries if e.last_used is not None)
    assert ages[0] < 86400 < ages[-1]  # hours to days

    def preview(step: int):
        return preview_migration(MigrationRequest(
            config_path=str(root / "run.yaml"), checkpoint=str(root / "output" / f"checkpoint-{step}"),
            output_dir=str(tmp_path / "side"), expected_step=step, expected_world_size=8,
            consumed_batches_per_rank=step * 2))

    # checkpoint-100's set carries FastVideo's validation receipt, and it holds.
    validated = str(root / "output" / "dataloader-state" / "validated-100")
    assert f"--sidecar-dir {validated}" in printed
    assert main(["sidecars", "verify", "--config", str(root / "run.yaml"), "--checkpoint",
                 str(root / "output" / "checkpoint-100"), "--sidecar-dir", validated]) == 0
    assert "validated in FastVideo's loader on 8 ranks at " in capsys.readouterr().out

    clean = preview(300)
    assert clean.refusals == () and clean.plan is not None and clean.plan.world_size == 8
    assert any(m.critical and m.path == "training.data.seed" for m in preview(200).mismatches)


def test_demo_refuses_foreign_dir_and_rebuilds_its_own(tmp_path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["demo", str(foreign), "--no-tui"]) == 1
    assert os.listdir(foreign) == ["notes.txt"]

    ws = build_demo_workspace(str(tmp_path / "demo"))
    (tmp_path / "demo" / "output" / "stray").mkdir()
    again = build_demo_workspace(ws.root)
    assert os.path.isfile(os.path.join(again.root, MARKER))
    assert not os.path.exists(os.path.join(again.root, "output", "stray"))


@pytest.mark.parametrize("argv", [["demo", "--help"]])
def test_demo_help_exits_cleanly(argv, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    assert "--no-tui" in capsys.readouterr().out


# ---------------------------------------------------------------- D28: the demo deletes only what it built


def _user_dir(tmp_path, marker: str | None) -> tuple[str, dict[str, str]]:
    """A user's directory with source files and (maybe) a file named like the demo's marker."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    files = {"src/train.py": "print('train')\n", "README.md": "my project\n"}
    for rel, text in files.items():
        (root / rel).write_text(text)
    if marker is not None:
        (root / MARKER).write_text(marker)
    return str(root), files


@pytest.mark.parametrize("marker", ["{}", "not json", '{"state": "complete"}', "[]",
                                    '{"token": "0123", "created": ["src"]}',
                                    '{"token": "' + "a" * 32 + '", "created": ["src", "README.md"]}'])
def test_demo_refuses_a_marker_that_is_not_the_demos(tmp_path, capsys, marker) -> None:
    root, files = _user_dir(tmp_path, marker)
    assert main(["demo", root, "--no-tui"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {root}: directory is not empty and is not a demo workspace")
    for rel, text in files.items():
        assert (tmp_path / "project" / rel).read_text() == text
    assert sorted(os.listdir(root)) == sorted(["src", "README.md", MARKER])


def test_demo_rebuild_refuses_what_it_did_not_build(tmp_path, capsys) -> None:
    ws = build_demo_workspace(str(tmp_path / "demo"))
    (tmp_path / "demo" / "notes").mkdir()
    (tmp_path / "demo" / "notes" / "todo.txt").write_text("mine\n")
    (tmp_path / "demo" / "zz.txt").write_text("mine too\n")
    before = sorted(os.listdir(ws.root))
    assert main(["demo", ws.root, "--no-tui"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {ws.root}/notes: not made by the demo (its marker does not list it); the demo "
                   "deletes only what it built: move it away or choose another DIR"]
    assert sorted(os.listdir(ws.root)) == before
    assert (tmp_path / "demo" / "notes" / "todo.txt").read_text() == "mine\n"
    assert os.path.isdir(os.path.join(ws.root, "output", "checkpoint-300"))  # nothing of the old build went


def test_demo_builds_a_stand_in_fleet_and_prints_the_command_that_tries_it(tmp_path, capsys) -> None:
    import shutil
    import subprocess
    import sys

    root = tmp_path / "demo"
    assert main(["demo", str(root), "--no-tui"]) == 0
    printed = capsys.readouterr().out
    command = next(line.strip() for line in printed.splitlines()
                   if line.strip().startswith("PATH=") and "fleet cache ls" in line).split("   #")[0]
    assert command.startswith(f'PATH={root}/fleet/bin:"$PATH" fvconsole fleet cache ls --nodes ')
    # Run as printed, in a shell, with this interpreter's fvconsole first on PATH.
    bindir = os.path.dirname(shutil.which("fvconsole") or sys.executable)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    env.pop("SLURM_JOB_ID", None)
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "gpu[001-008] (8 nodes" in proc.stdout and "nodes: 8 ok" in proc.stdout, proc.stdout
    assert all(f"gpu00{i}" in proc.stdout for i in range(1, 9))


def test_the_stand_in_squeue_answers_what_it_is_asked(tmp_path, capsys, monkeypatch) -> None:
    """`fleet cache ls --job 812345` (the job the demo's fleet shows) finds its four nodes through the
    stand-in squeue; an unknown job is "no such job", as with Slurm's own squeue."""
    import time

    from fvconsole.cli.demo import cli_commands
    from fvconsole.demo.fleet_builders import DEMO_JOB, build_fleet

    fleet = build_fleet(str(tmp_path / "fleet"), time.time())
    monkeypatch.setenv("PATH", f"{os.path.dirname(fleet.srun)}:{os.environ['PATH']}")
    assert main(["fleet", "cache", "ls", "--job", DEMO_JOB, "--cache-root", fleet.root]) == 0
    out = capsys.readouterr().out
    assert f"on job {DEMO_JOB}: gpu[001-004] (4 nodes" in out and "nodes: 4 ok" in out, out
    assert main(["fleet", "cache", "ls", "--job", "999", "--cache-root", fleet.root]) == 1
    assert capsys.readouterr().err.strip() == "error: --job 999: no such job in squeue (finished, or never existed)"
    ws = build_demo_workspace(str(tmp_path / "demo"))
    assert any(f"fleet cache ls --job {DEMO_JOB} " in c for c in cli_commands(ws))


def test_the_run_config_has_the_keys_fastvideo_reads(tmp_path, capsys) -> None:
    """FastVideo's cleanup reads training.checkpoint.checkpoints_total_limit; its save interval
    training_state_checkpointing_steps; the tracker training.tracker.project_name: no keys it ignores."""
    import yaml

    ws = build_demo_workspace(str(tmp_path / "demo"))
    with open(ws.config_path) as fh:
        config = yaml.safe_load(fh)
    assert config["training"]["checkpoint"] == {"output_dir": ws.output_dir, "training_state_checkpointing_steps": 100,
                                                "checkpoints_total_limit": 3,
                                                "resume_from_checkpoint": ws.legacy_checkpoint}
    assert config["training"]["tracker"] == {"project_name": "fastvideo-t2v"} and "tracker" not in config
    assert main(["checkpoints", "ls", ws.output_dir]) == 0
    out = capsys.readouterr().out
    assert "fastvideo: checkpoints_total_limit 3 (from the embedded config of checkpoint-500)" in out, out


def test_the_run_config_resumes_checkpoint_300_and_preflight_judges_it(tmp_path, capsys) -> None:
    """Issue 36 item 4: run.yaml resumes the legacy checkpoint-300 (8 ranks): a no-go naming the missing
    rank-local dataloader state and the migrate fix before the migration; a go given the published dir
    after it; the new key is no config mismatch against a checkpoint whose embedded config lacks it."""
    ws = build_demo_workspace(str(tmp_path / "demo"))
    assert main(["preflight", "--config", ws.config_path]) == 1
    out = capsys.readouterr().out
    assert "ok    config      the next config equals the checkpoint's embedded config" in out, out
    assert "no dataloader_state_rank<r>.pt" in out and f"fix: fvconsole migrate --config {ws.config_path}" in out
    assert out.splitlines()[-1].startswith("NO-GO: 1 blocking problem; first: dataloader: ranks 0-7:"), out
    assert main(["migrate", "--config", ws.config_path, "--checkpoint", ws.legacy_checkpoint, "--output-dir",
                 ws.sidecar_dir, "--expected-step", "300", "--expected-world-size", "8",
                 "--consumed-batches-per-rank", "600", "--yes"]) == 0
    capsys.readouterr()
    assert main(["preflight", "--config", ws.config_path, "--dataloader-state-dir", ws.sidecar_dir]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "GO: resume checkpoint-300 (step 300) on 8 ranks"
    # Migrated but not given the dir: still FastVideo's failure, and the fix is the dir, not a second migration.
    assert main(["preflight", "--config", ws.config_path]) == 1
    out = capsys.readouterr().out
    assert f"fix: export FASTVIDEO_DATALOADER_STATE_DIR={ws.sidecar_dir}" in out, out
    assert "fix: fvconsole migrate" not in out, out
