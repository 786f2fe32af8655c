"""Synthetic inputs, written under a temp dir: manifests, datasets, runs, cache roots.

Manifests and runs come from fvconsole's own fixture builders (``fvconsole.demo.builders``)
so the benchmark exercises files shaped like FastVideo's. The dataset behind a large
synthetic manifest is sparse files whose size and mtime match the manifest, so the source
check (one ``os.stat`` per file) passes without writing gigabytes of Parquet.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

STEP = 500
#: Where FastVideo's node-local caches live; on it fsync is free and nothing waits for a disk.
TMPFS = "/dev/shm"
BATCH = 2
ROW_GROUPS_PER_FILE = 64


def synthetic_manifest(num_row_groups: int, dataset_root: str, seed: int = 0) -> dict[str, Any]:
    """A valid manifest dict (row counts 1..64) from the migration-core builder."""
    from fvconsole.demo.builders import synthetic_manifest as build

    return build(num_row_groups, dataset_root=dataset_root, seed=seed, row_groups_per_file=ROW_GROUPS_PER_FILE)


def materialise_dataset(manifest: dict[str, Any]) -> int:
    """Create one sparse file per manifest file with the recorded size and mtime; returns the count."""
    root = manifest["dataset_root"]
    seen: dict[str, tuple[int, int]] = {}
    for item in manifest["row_groups"]:
        seen.setdefault(item["file"], (item["file_size"], item["file_mtime_ns"]))
    for name, (size, mtime_ns) in seen.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.truncate(size)
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return len(seen)


def write_manifest(path: str, manifest: dict[str, Any]) -> str:
    """Write it the way FastVideo does (``json.dump(sort_keys=True)``)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, sort_keys=True)
    return path


@dataclass(frozen=True)
class MigrationRun:
    """A legacy checkpoint with its run config and manifest, ready for ``fvconsole migrate``."""

    root: str
    config_path: str
    checkpoint: str
    manifest_path: str
    world_size: int
    step: int
    manifest: dict[str, Any]

    def cli_args(self, output_dir: str) -> list[str]:
        return [
            "migrate", "--config", self.config_path, "--checkpoint", self.checkpoint,
            "--output-dir", output_dir, "--expected-step", str(self.step),
            "--expected-world-size", str(self.world_size), "--consumed-batches-per-rank", str(self.step),
        ]

    def request(self, output_dir: str) -> Any:
        from fvconsole.core.migration.plan import MigrationRequest

        return MigrationRequest(
            config_path=self.config_path, checkpoint=self.checkpoint, output_dir=output_dir,
            expected_step=self.step, expected_world_size=self.world_size, consumed_batches_per_rank=self.step,
        )


def migration_run(
    root: str, *, world_size: int, num_row_groups: int, sp_size: int = 1, step: int = STEP
) -> MigrationRun:
    """Dataset (sparse), manifest, run config and a complete legacy checkpoint at ``step``."""
    from fvconsole.demo.builders import run_config, write_checkpoint, write_run_config

    root = os.path.realpath(root)
    dataset = os.path.join(root, "dataset")
    manifest = synthetic_manifest(num_row_groups, dataset)
    materialise_dataset(manifest)
    manifest_path = write_manifest(os.path.join(root, "cache", "manifest.json"), manifest)
    output_dir = os.path.join(root, "output")
    config = run_config(
        data_path=dataset, manifest_path=manifest_path, output_dir=output_dir,
        num_gpus=world_size, sp_size=sp_size, train_batch_size=BATCH, grad_accum=1, shuffle=True,
    )
    config_path = write_run_config(os.path.join(root, "run.yaml"), config)
    checkpoint = write_checkpoint(output_dir, step, config, world_size=world_size, kind="legacy")
    return MigrationRun(root, config_path, checkpoint, manifest_path, world_size, step, manifest)


# --------------------------------------------------------------------------- weight shard cache

_TENSOR = b"\0" * 16
_HEADER = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, separators=(",", ":")).encode()
SHARD_BYTES = len(_HEADER).to_bytes(8, "little") + _HEADER + _TENSOR


def cache_root(root: str, entries: int, shards: int, last_used: float = 1_700_000_000.0) -> str:
    """``entries`` complete cache entries (docs/formats.md §6) of ``shards`` small valid safetensors files."""
    os.makedirs(root, exist_ok=True)
    for e in range(entries):
        key = f"{e:016x}"
        entry = os.path.join(root, key)
        os.mkdir(entry)
        for i in range(shards):
            with open(os.path.join(entry, f"shard{i}-of-{shards}.safetensors"), "wb") as handle:
                handle.write(SHARD_BYTES)
        manifest = {
            "format_version": 1, "key": key, "num_shards": shards,
            "params": {"w": {"kind": "tensor", "dtype": "torch.float32", "global_shape": [4 * shards]}},
            "reverse_param_names_mapping": {},
        }
        path = os.path.join(entry, "manifest.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(manifest, handle)
        when = last_used + e
        os.utime(path, (when, when))
    return root


# --------------------------------------------------------------------------- many checkpoints


def checkpoints_dir(root: str, count: int, world_size: int = 2) -> str:
    """An output dir of ``count`` real checkpoints: one written by the fixture builder (DCP,
    RNG files, metadata.json with the config), copied ``count - 1`` times with its step set.

    Each copy's ``dcp/.metadata`` is what torch's writer would have written for that save: its
    own path and a fresh ``save_id`` (so no two are byte-identical, as in a real run)."""
    import dataclasses
    import pickle
    import shutil
    import uuid

    from fvconsole.demo.builders import run_config, write_checkpoint

    out = os.path.join(root, "output")
    config = run_config(data_path=os.path.join(root, "d"), manifest_path=os.path.join(root, "m.json"),
                        output_dir=out, num_gpus=world_size)
    first = write_checkpoint(out, 1, config, kind="legacy")
    with open(os.path.join(first, "metadata.json"), encoding="utf-8") as fh:
        meta = json.load(fh)
    with open(os.path.join(first, "dcp", ".metadata"), "rb") as fh:
        dcp_meta = pickle.load(fh)  # our own fixture, written by torch a moment ago (torch is imported)
    storage = dcp_meta.storage_meta
    for step in range(2, count + 1):
        ckpt = os.path.join(out, f"checkpoint-{step}")
        shutil.copytree(first, ckpt)
        meta["step"] = step
        with open(os.path.join(ckpt, "metadata.json"), "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
        dcp_meta.storage_meta = dataclasses.replace(
            storage, checkpoint_id=type(storage.checkpoint_id)(os.path.join(ckpt, "dcp")), save_id=str(uuid.uuid4()))
        with open(os.path.join(ckpt, "dcp", ".metadata"), "wb") as fh:
            pickle.dump(dcp_meta, fh)
    return out


@contextlib.contextmanager
def tmpfs_dir() -> Iterator[str | None]:
    """A temp dir on :data:`TMPFS` (removed after), or None where there is no writable tmpfs."""
    if not (os.path.isdir(TMPFS) and os.access(TMPFS, os.W_OK)):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="fvconsole-bench-", dir=TMPFS) as shm:
        yield shm
