"""Real legacy runs for the migration tests, requests and plans for them, and their command lines.

Built with ``fvconsole.demo.builders`` (real Parquet, real DCP checkpoints):
:func:`build_legacy` (8 ranks, SP 2, checkpoint-5 over 12 uneven row groups) with
:func:`request`/:func:`plan_for`; :func:`small_run` (4 GPUs, 3 files x 4 row groups x 10
rows) with :func:`request_for`; :func:`migrate_argv`/:func:`verify_argv`, the one place a
``fvconsole migrate`` / ``sidecars verify`` command line is spelled out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.migration.plan import MigrationRequest
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
        return migrate_argv(self.run.config_path, self.checkpoint, out or self.out, step=step, world=world,
                            consumed=step, extra=extra)

    def verify_argv(self, *extra: str, sidecar_dir: str | None = None) -> list[str]:
        return verify_argv(self.run.config_path, self.checkpoint, sidecar_dir or self.out, extra=extra)


def migrate_argv(config: Any, checkpoint: Any, output_dir: Any, *, step: int, world: int, consumed: int,
                 extra: Sequence[str] = ()) -> list[str]:
    """``fvconsole migrate`` for this run with its three confirmations (a dry run unless ``--yes`` in extra)."""
    return [
        "migrate",
        "--config", str(config),
        "--checkpoint", str(checkpoint),
        "--output-dir", str(output_dir),
        "--expected-step", str(step),
        "--expected-world-size", str(world),
        "--consumed-batches-per-rank", str(consumed),
        *extra,
    ]


def verify_argv(config: Any, checkpoint: Any, sidecar_dir: Any, *, extra: Sequence[str] = ()) -> list[str]:
    """``fvconsole sidecars verify`` of ``sidecar_dir`` against the plan recomputed for this run."""
    return ["sidecars", "verify", "--config", str(config), "--checkpoint", str(checkpoint),
            "--sidecar-dir", str(sidecar_dir), *extra]


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


def request(legacy: Legacy, *, out: str | None = None, overwrite: bool = False,
            overrides: Sequence[str] = ()) -> MigrationRequest:
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
    from fvconsole.core.migration.plan import preview_migration

    preview = preview_migration(request(legacy, **kwargs), break_lock=break_lock)
    assert preview.plan is not None, [r.message for r in preview.refusals]
    return preview.plan


def one_json(stdout: str) -> dict:
    """stdout must be exactly one JSON object."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, stdout
    return json.loads(lines[0])


def small_run(root: Any, *, steps=(2,), kind: str = "legacy", **kwargs: Any) -> RunFixture:
    """A 4-GPU run over 3 files × 4 row groups × 10 rows (120 samples), one checkpoint per step."""
    kwargs.setdefault("num_gpus", 4)
    return build_run(os.fspath(root), steps=steps, kind=kind, **kwargs)


def request_for(run: RunFixture, step: int = 2, **overrides: Any) -> MigrationRequest:
    """A request that should succeed for ``run`` (override any field)."""
    world = run.config["training"]["distributed"]["num_gpus"]
    accum = run.config["training"]["loop"]["gradient_accumulation_steps"]
    fields: dict[str, Any] = {
        "config_path": run.config_path,
        "checkpoint": run.checkpoint(step),
        "output_dir": os.path.join(run.root, "sidecars"),
        "expected_step": step,
        "expected_world_size": world,
        "consumed_batches_per_rank": step * accum,
    }
    fields.update(overrides)
    return MigrationRequest(**fields)


def edit_manifest(path: str, mutate) -> None:
    """Rewrite a manifest JSON in place after ``mutate(data)`` (fingerprint left as is)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    mutate(data)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, sort_keys=True)


def refusal_fields(preview) -> list[str]:
    return [r.field for r in preview.refusals]


def refusal_for(preview, field: str):
    """The first refusal with ``field`` (AssertionError listing all refusals otherwise)."""
    for r in preview.refusals:
        if r.field == field:
            return r
    raise AssertionError(f"no refusal for {field!r}; got {[r.message for r in preview.refusals]}")
