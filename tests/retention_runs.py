"""Training output dirs for the retention tests: ``checkpoint-<step>`` dirs laid out as FastVideo saves them.

A complete save has ``metadata.json`` (step and the embedded config), ``dcp/.metadata`` with its
shard files and one ``rng_state_rank<r>.pt`` per rank; an interrupted one stops part-way (no
``dcp/.metadata``). Retention never decodes the DCP metadata, so its bytes here are opaque; the
tests that need real DCP checkpoints use ``fvconsole.demo.builders``. Every file of a checkpoint
gets the mtime its age asks for (a checkpoint's age is its newest file's mtime).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DAY = 86400.0


def make_checkpoint(out: Path, step: int, *, complete: bool = True, world: int = 2, rank_local: bool = True,
                    age: float = DAY, size: int = 1000, limit: object = None, now: float | None = None) -> Path:
    """``out/checkpoint-<step>``; ``age`` seconds old; ``limit``: ``checkpoints_total_limit`` in its config."""
    path = out / f"checkpoint-{step}"
    (path / "dcp").mkdir(parents=True)
    config: dict = {"training": {"distributed": {"num_gpus": world}}}
    if limit is not None:
        config["training"]["checkpoint"] = {"checkpoints_total_limit": limit}
    (path / "metadata.json").write_text(json.dumps({"step": step, "config": config}))
    for rank in range(world):
        (path / "dcp" / f"__{rank}_0.distcp").write_bytes(b"x" * size)
    if complete:
        (path / "dcp" / ".metadata").write_bytes(b"opaque")
        for rank in range(world):
            (path / f"rng_state_rank{rank}.pt").write_bytes(b"r")
            if rank_local:
                (path / f"dataloader_state_rank{rank}.pt").write_bytes(b"d")
    stamp = (time.time() if now is None else now) - age
    for root, _dirs, files in os.walk(path):
        for name in files:
            os.utime(os.path.join(root, name), (stamp, stamp))
    return path
