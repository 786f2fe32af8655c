"""Real fixture workspaces for the reliability suite, built with the project's own builders.

A small world (16 ranks, SP 2) keeps each crash trial quick while still exercising the
parallel write path; the dataset is real Parquet and the checkpoint a real torch DCP save.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from migration_runs import migrate_argv, verify_argv

WORLD = 16
STEP = 2


@dataclass(frozen=True)
class MigrationWorkspace:
    """A legacy checkpoint plus everything `fvconsole migrate` needs, under ``root``."""

    root: Path
    config: Path
    checkpoint: Path
    manifest: Path
    dataset: Path
    world: int = WORLD
    step: int = STEP

    def migrate_args(self, output_dir: str | os.PathLike[str], *extra: str, yes: bool = True) -> list[str]:
        return migrate_argv(self.config, self.checkpoint, output_dir, step=self.step, world=self.world,
                            consumed=self.step, extra=("--yes", *extra) if yes else extra)

    def verify_args(self, sidecar_dir: str | os.PathLike[str], *extra: str) -> list[str]:
        return verify_argv(self.config, self.checkpoint, sidecar_dir, extra=extra)


def build_migration_workspace(root: str | os.PathLike[str], *, world: int = WORLD) -> MigrationWorkspace:
    """Dataset (4 files x 8 row groups x 10 rows), manifest, YAML config, legacy checkpoint-2."""
    from fvconsole.demo.builders import build_run

    run = build_run(
        root,
        steps=(STEP,),
        kind="legacy",
        files=4,
        row_groups_per_file=8,
        rows_per_group=10,
        num_gpus=world,
        sp_size=2,
        train_batch_size=2,
        grad_accum=1,
    )
    return MigrationWorkspace(
        root=Path(run.root),
        config=Path(run.config_path),
        checkpoint=Path(run.checkpoint(STEP)),
        manifest=Path(run.manifest_path),
        dataset=Path(run.dataset_root),
        world=world,
    )


def cheap_entries(root: Path, n: int, *, prefix: str = "cheap", last_used: float = 1_700_000_000) -> list[str]:
    """``n`` tiny complete cache entries (hand-written minimal safetensors, no torch); returns keys.

    Manifest mtimes (last use) are ``last_used + i`` so the LRU order is the creation order.
    """
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    shard = struct.pack("<Q", len(header)) + header + b"\0\0\0\0"
    root.mkdir(parents=True, exist_ok=True)
    keys = []
    for i in range(n):
        key = hashlib.sha256(f"{prefix}-{i}".encode()).hexdigest()[:16]
        keys.append(key)
        entry = root / key
        entry.mkdir()
        (entry / "shard0-of-1.safetensors").write_bytes(shard)
        manifest = {"format_version": 1, "key": key, "num_shards": 1,
                    "params": {"w": {"kind": "tensor", "dtype": "torch.float32", "global_shape": [1]}},
                    "reverse_param_names_mapping": {}}
        (entry / "manifest.json").write_text(json.dumps(manifest))
        old = last_used + i
        for path in (entry / "shard0-of-1.safetensors", entry / "manifest.json", entry):
            os.utime(path, (old, old))
    return keys
