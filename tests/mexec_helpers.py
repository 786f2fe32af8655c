"""Shared fixtures for the migration-exec tests: a real legacy run, tree digests, CLI runs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from fvconsole.demo.builders import RunFixture, build_run

STEP = 5
WORLD = 8
SP = 2
BATCH = 2
ROWS = [7, 11, 13, 9, 10, 12]


@dataclass(frozen=True)
class Legacy:
    run: RunFixture
    checkpoint: str
    out: str

    def migrate_argv(self, *extra: str, out: str | None = None, step: int = STEP, world: int = WORLD) -> list[str]:
        return [
            "migrate",
            "--config", self.run.config_path,
            "--checkpoint", self.checkpoint,
            "--output-dir", out or self.out,
            "--expected-step", str(step),
            "--expected-world-size", str(world),
            "--consumed-batches-per-rank", str(step),
            *extra,
        ]

    def verify_argv(self, *extra: str, sidecar_dir: str | None = None) -> list[str]:
        return [
            "sidecars", "verify",
            "--config", self.run.config_path,
            "--checkpoint", self.checkpoint,
            "--sidecar-dir", sidecar_dir or self.out,
            *extra,
        ]


def build_legacy(root: str, *, world: int = WORLD, sp: int = SP, **kwargs) -> Legacy:
    """A real legacy DCP checkpoint at step 5 over a real 12-row-group Parquet dataset."""
    run = build_run(
        os.path.join(root, "run"),
        steps=(STEP,),
        kind="legacy",
        num_gpus=world,
        sp_size=sp,
        train_batch_size=BATCH,
        rows_per_group=ROWS,
        **kwargs,
    )
    return Legacy(run, run.checkpoint(STEP), os.path.join(root, "sidecars"))


def request(legacy: Legacy, *, out: str | None = None, overwrite: bool = False, overrides: Sequence[str] = ()):
    from fvconsole.core.migration.plan import MigrationRequest

    return MigrationRequest(
        config_path=legacy.run.config_path,
        checkpoint=legacy.checkpoint,
        output_dir=out or legacy.out,
        expected_step=STEP,
        expected_world_size=WORLD,
        consumed_batches_per_rank=STEP,
        overrides=tuple(overrides),
        overwrite=overwrite,
    )


def plan_for(legacy: Legacy, *, break_lock: bool = False, **kwargs):
    from fvconsole.core.migration.plan import plan_migration

    preview = plan_migration(request(legacy, **kwargs), break_lock=break_lock)
    assert preview.plan is not None, [r.message for r in preview.refusals]
    return preview.plan


def tree_hash(root: str) -> dict[str, tuple]:
    """Every entry under ``root``: type, size, content hash, mode and mtime (symlinks not followed)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as fh:
                    out[rel] = ("file", st.st_size, hashlib.sha256(fh.read()).hexdigest(), st.st_mode, st.st_mtime_ns)
            else:
                out[rel] = ("dir", st.st_mode)
    return out


def run_cli(argv: Sequence[str], capsys) -> tuple[int, str, str]:
    """Run ``fvconsole`` in-process; returns (exit code, stdout, stderr)."""
    from fvconsole.cli import main

    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_json(stdout: str) -> dict:
    """stdout must be exactly one JSON object."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, stdout
    return json.loads(lines[0])
