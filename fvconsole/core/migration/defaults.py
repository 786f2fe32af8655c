"""What a migration form starts from: values derived from a checkpoint and its run config, or
the request recorded in a published set's receipt. Pure: no file-system access."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from fvconsole.core.formats.runconfig import RunConfig

#: Sidecar sets go beside the checkpoints, in ``<output_dir>/dataloader-state/checkpoint-<step>``.
SIDECAR_SUBDIR = "dataloader-state"


@dataclass(frozen=True)
class MigrationDefaults:
    """Values a migration form is prefilled with; the operator confirms or edits them."""

    checkpoint: str
    config_path: str
    output_dir: str
    expected_step: int | None
    expected_world_size: int | None
    consumed_batches_per_rank: int | None
    derivation: tuple[str, ...]
    overrides: tuple[str, ...] = ()


def suggest_output_dir(checkpoint: str, step: int | None) -> str:
    """A sidecar directory beside (never inside) the checkpoint.

    ``<output_dir>/dataloader-state/checkpoint-<step>``: FastVideo's keep_last cleanup only
    removes ``checkpoint-*`` directories, so this survives it.
    """
    parent = os.path.dirname(os.path.abspath(checkpoint.rstrip("/")))
    name = os.path.basename(checkpoint.rstrip("/")) if step is None else f"checkpoint-{step}"
    return os.path.join(parent, SIDECAR_SUBDIR, name)


def config_output_dir(run_config: RunConfig | None) -> str | None:
    """``training.checkpoint.output_dir`` of a loaded run config, if any."""
    if run_config is None:
        return None
    value = run_config.get("training.checkpoint.output_dir", None)
    return os.path.expanduser(str(value)) if value else None


def migration_defaults(checkpoint: str, step: int | None, config_path: str | None,
                       run_config: RunConfig | None) -> MigrationDefaults:
    """Derive expected step, world size and consumed batches from the step and the run config."""
    notes = []
    world = gas = None
    if run_config is not None:
        world = _as_int(run_config.get("training.distributed.num_gpus", None))
        gas = _as_int(run_config.get("training.loop.gradient_accumulation_steps", None))
    if step is not None:
        notes.append(f"step {step} ← directory name checkpoint-{step}")
    if world is not None:
        notes.append(f"world size {world} ← training.distributed.num_gpus")
    consumed = step * gas if step is not None and gas is not None else None
    if consumed is not None:
        notes.append(f"consumed batches/rank {consumed} = step {step} × grad accum {gas}")
    return MigrationDefaults(
        checkpoint=checkpoint,
        config_path=config_path or "",
        output_dir=suggest_output_dir(checkpoint, step),
        expected_step=step,
        expected_world_size=world,
        consumed_batches_per_rank=consumed,
        derivation=tuple(notes),
    )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
