"""The approaches fvconsole is measured against, re-implemented faithfully.

* ``upstream_rank_state``: FastVideo's ``reconstruct_streaming_dataset_state`` as the seed
  migration script calls it, once per rank, over the full list of row-group dicts (split the
  whole manifest into shards, sum every shard, shuffle this rank's shard, walk it).
* ``seed_write_loop``: the seed script's sequential per-rank loop: atomic ``torch.save``
  (temp file, flush, fsync, ``os.replace``), ``torch.load`` back, compare, sha256 the file.
* ``du_bytes``: ``du -sb`` of a directory, the floor for "one stat per file".
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import subprocess
from collections.abc import Callable, Sequence
from typing import Any


def upstream_contiguous_shards(row_groups: list[dict[str, Any]], num_shards: int) -> list[list[dict[str, Any]]]:
    """FastVideo's greedy row-balanced split, over the row-group dicts themselves."""
    if num_shards < 1:
        raise ValueError("num_shards must be positive")
    shards: list[list[dict[str, Any]]] = [[] for _ in range(num_shards)]
    remaining_rows = sum(int(item["rows"]) for item in row_groups)
    cursor = 0
    for shard_index in range(num_shards):
        shards_left = num_shards - shard_index
        target = remaining_rows / shards_left if shards_left else 0
        shard_rows = 0
        while cursor < len(row_groups):
            item = row_groups[cursor]
            item_rows = int(item["rows"])
            items_left = len(row_groups) - cursor
            if shard_rows and shard_rows + item_rows > target and items_left >= shards_left - 1:
                break
            shards[shard_index].append(item)
            shard_rows += item_rows
            remaining_rows -= item_rows
            cursor += 1
        if cursor >= len(row_groups):
            break
    return shards


def upstream_rank_state(
    manifest: dict[str, Any],
    *,
    global_rank: int,
    world_size: int,
    sp_world_size: int,
    batch_size: int,
    read_batch_size: int,
    seed: int,
    shuffle_row_groups: bool,
    yielded_samples: int,
) -> dict[str, Any]:
    """One rank's streaming dataset state, recomputed from scratch (num_workers 0 → 1 worker)."""
    row_groups = manifest["row_groups"]
    num_sp_groups = world_size // sp_world_size
    shards = upstream_contiguous_shards(row_groups, num_sp_groups)
    shard_rows = [sum(int(item["rows"]) for item in shard) for shard in shards]
    samples_per_worker = min(shard_rows) // batch_size * batch_size
    if samples_per_worker == 0 or yielded_samples >= samples_per_worker:
        raise ValueError("outside the first epoch")
    sp_group_index = global_rank // sp_world_size
    shard = list(shards[sp_group_index])
    if shuffle_row_groups:
        random.Random(int(seed)).shuffle(shard)
    row_group_position = 0
    row_offset = 0
    remaining = yielded_samples
    if remaining:
        for position, item in enumerate(shard):
            rows = int(item["rows"])
            if remaining <= rows:
                row_group_position = position
                row_offset = remaining
                break
            remaining -= rows
        else:
            raise ValueError("yielded_samples exceeds the selected streaming shard")
    return {
        "version": 2,
        "manifest_fingerprint": str(manifest["fingerprint"]),
        "topology": {
            "global_rank": global_rank,
            "world_size": world_size,
            "sp_world_size": sp_world_size,
            "sp_group_index": sp_group_index,
            "num_workers": 1,
            "batch_size": batch_size,
            "read_batch_size": read_batch_size,
            "seed": int(seed),
            "shuffle_row_groups": bool(shuffle_row_groups),
            "samples_per_worker": samples_per_worker,
        },
        "worker_id": 0,
        "epoch": 0,
        "row_group_position": row_group_position,
        "row_offset": row_offset,
        "yielded_samples": yielded_samples,
    }


def upstream_fingerprint(row_groups: list[dict[str, Any]]) -> str:
    """FastVideo's ``_manifest_fingerprint`` (stdlib json.dumps)."""
    payload = json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _atomic_torch_save(payload: Any, path: str) -> None:
    """FastVideo's ``_atomic_torch_save``: temp file beside it, save, flush, fsync, replace."""
    import torch

    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "wb") as handle:
        torch.save(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def seed_write_loop(output_dir: str, ranks: Sequence[int], payload_for: Callable[[int], dict]) -> list[dict]:
    """The seed script's sequential write/verify/hash loop plus its receipt write."""
    import torch

    os.makedirs(output_dir, exist_ok=True)
    sidecars = []
    for rank in ranks:
        payload = payload_for(rank)
        path = os.path.join(output_dir, f"dataloader_state_rank{rank}.pt")
        _atomic_torch_save(payload, path)
        loaded = torch.load(path, map_location="cpu", weights_only=False)
        if loaded != payload:
            raise RuntimeError(f"Sidecar round-trip mismatch: {path}")
        sidecars.append({"rank": rank, "path": os.path.basename(path), "sha256": _sha256_file(path)})
    receipt_tmp = os.path.join(output_dir, ".migration_receipt.json.tmp")
    with open(receipt_tmp, "w", encoding="utf-8") as handle:
        json.dump({"sidecars": sidecars}, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(receipt_tmp, os.path.join(output_dir, "migration_receipt.json"))
    return sidecars


def du_bytes(path: str) -> int:
    """``du -sb PATH``: apparent size in bytes (one lstat per file)."""
    out = subprocess.run(["du", "-sb", path], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])
