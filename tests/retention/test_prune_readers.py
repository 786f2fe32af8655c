"""Issue 37 item 3: a migration and a prune of the same run exclude each other.

A real ``migrate --yes`` process (a legacy checkpoint-4 into ``OUT/dataloader-state/checkpoint-4``)
is paused mid-run by the test-only fault hook (``FVCONSOLE_FAULT_PAUSE_AT``); meanwhile a real
``checkpoints prune OUT --keep-last 1 --yes`` runs. The migration's reader's record beside the
checkpoint keeps it (the prune names the reader); resumed, the migration publishes. And when the
source is gone all the same before it publishes (its record could not be seen), the migration
re-checks and publishes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from migration_runs import migrate_argv, small_run
from reliability.harness import cli_env


@contextmanager
def paused_migration(run, step: int, target: str, at: str, flag: Path) -> Iterator[subprocess.Popen[str]]:
    accum = run.config["training"]["loop"]["gradient_accumulation_steps"]
    argv = [sys.executable, "-m", "fvconsole", *migrate_argv(run.config_path, run.checkpoint(step), target, step=step,
                                                              world=4, consumed=step * accum,
                                                              extra=("--yes", "--json", "--no-journal"))]
    env = cli_env({"FVCONSOLE_FAULT_PAUSE_AT": at, "FVCONSOLE_FAULT_PAUSE_FILE": str(flag)})
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        yield proc
    finally:
        flag.unlink(missing_ok=True)  # resumed; the test reads its output (communicate) afterwards


def _records(out: str) -> list[str]:
    """The reader's records beside the run ``out`` (in its parent: ``.<name>.fvconsole-reader.*``)."""
    parent, name = os.path.split(out)
    return [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(f".{name}.fvconsole-reader.")]


def _prune(out: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "fvconsole", "checkpoints", "prune", out, "--keep-last", "1",
                           "--yes", "--json", "--no-journal"], env=cli_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_a_prune_keeps_the_checkpoint_a_paused_migration_reads_naming_the_reader(tmp_path: Path) -> None:
    run = small_run(tmp_path / "run", steps=(2, 4, 6))
    target = os.path.join(run.output_dir, "dataloader-state", "checkpoint-4")
    with paused_migration(run, 4, target, "^mkdir .*fvconsole-staging", tmp_path / "pause") as proc:
        [record] = _records(run.output_dir)
        assert f"-{proc.pid}-" in os.path.basename(record)
        done = _prune(run.output_dir)
        assert [r["step"] for r in done["removed"]] == [2]
        [kept] = [k for k in done["kept"] if k["step"] == 4]
        assert kept["reason"].startswith(f"read by pid {proc.pid} on host ") and "(migrate: " in kept["reason"]
        assert os.path.isdir(run.checkpoint(4))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, (stdout, stderr)
    assert os.path.isfile(os.path.join(target, "migration_receipt.json"))
    assert _records(run.output_dir) == []


def test_a_migration_whose_source_was_pruned_meanwhile_publishes_nothing(tmp_path: Path) -> None:
    run = small_run(tmp_path / "run", steps=(2, 4, 6))
    target = os.path.join(run.output_dir, "dataloader-state", "checkpoint-4")
    with paused_migration(run, 4, target, "^recheck ", tmp_path / "pause") as proc:
        # Its record unseen (another tool, a filesystem that lost it): the prune deletes the source.
        for record in _records(run.output_dir):
            os.unlink(record)
        done = _prune(run.output_dir)
        assert [r["step"] for r in done["removed"]] == [4, 2]
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, (stdout, stderr)
    assert "the source checkpoint is gone since the plan was made" in json.loads(stdout)["error"]
    assert not os.path.exists(target)
