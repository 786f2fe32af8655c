"""Real weight shard cache entries for tests, demos and benchmarks (docs/formats.md §6).

Shards are written with ``safetensors.torch.save_file`` (small bf16/fp32 tensors), the
manifest last, exactly in FastVideo's layout; mtimes are then set with ``os.utime`` to
simulate when an entry was last used. torch is imported only when an entry is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from typing import Any

from fvconsole.demo import demo_module

STATUSES = (
    "complete", "partial", "incomplete", "empty", "writing",
    "invalid-manifest", "invalid-shard", "key-mismatch", "wrong-version", "disagreeing-shard",
)
#: The tensor a ``disagreeing-shard`` entry stores in the wrong dtype (bf16, its manifest says fp32).
DISAGREEING_PARAM = "final_norm.weight"
_COLS = 64


def make_key(text: str) -> str:
    """A cache key: the first 16 hex chars of sha256(text), like FastVideo's."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _unused_key(root: str, seed: int, status: str, num_shards: int) -> str:
    counter = 0
    while True:
        key = make_key(f"fvconsole-demo:{seed}:{status}:{num_shards}:{counter}")
        if not os.path.lexists(os.path.join(root, key)):
            return key
        counter += 1


def _default_present(status: str, num_shards: int) -> list[int]:
    if status in ("partial", "writing"):
        return list(range(max(1, num_shards // 2)))
    return list(range(num_shards))


def _shapes(tensor_bytes: int, num_shards: int) -> dict[str, dict[str, Any]]:
    """Params table rows: two row-sharded bf16 DTensors and one replicated fp32 tensor."""
    rows = max(1, (tensor_bytes * 3 // 8) // (_COLS * 2))
    norm = max(1, tensor_bytes // 16)
    table: dict[str, dict[str, Any]] = {}
    for name in ("blocks.0.attn.to_qkv.weight", "blocks.0.ffn.proj_out.weight"):
        table[name] = {"kind": "dtensor", "dtype": "torch.bfloat16", "global_shape": [rows * num_shards, _COLS],
                       "placements": ["Shard(dim=0)"], "local_shape": [rows, _COLS]}
    table["final_norm.weight"] = {"kind": "tensor", "dtype": "torch.float32", "global_shape": [norm]}
    return table


def _shard_tensors(table: dict[str, dict[str, Any]], seed: int, shard: int) -> dict[str, Any]:
    torch = demo_module("torch")
    gen = torch.Generator().manual_seed(seed * 1000 + shard)
    out = {}
    for name, info in table.items():
        shape = info.get("local_shape", info["global_shape"])
        dtype = torch.bfloat16 if info["dtype"] == "torch.bfloat16" else torch.float32
        out[name] = torch.randn(*shape, generator=gen).to(dtype)
    return out


def _disagree(tensors: dict[str, Any]) -> dict[str, Any]:
    """The shard as a buggy or mixed-up writer left it: one tensor in bf16 where the manifest says fp32.

    Its header is valid safetensors and ``cache ls`` calls the entry complete; only
    ``cache verify`` (and FastVideo's load on that rank) sees the disagreement.
    """
    torch = demo_module("torch")
    return {**tensors, DISAGREEING_PARAM: tensors[DISAGREEING_PARAM].to(torch.bfloat16)}


def _write_shard(path: str, tensors: dict[str, Any]) -> None:
    save_file = demo_module("safetensors.torch").save_file
    tmp = path + ".tmp"
    save_file(tensors, tmp)
    os.replace(tmp, path)


def _manifest(key: str, num_shards: int, table: dict[str, Any], status: str) -> bytes:
    manifest = {
        "format_version": 2 if status == "wrong-version" else 1,
        "key": make_key("someone-else:" + key) if status == "key-mismatch" else key,
        "num_shards": num_shards,
        "params": table,
        "reverse_param_names_mapping": {
            name: [name.replace("blocks.", "transformer_blocks."), 0, 1] for name in table
        },
    }
    data = json.dumps(manifest).encode()
    if status == "invalid-manifest":
        return data[: len(data) // 2]  # a torn, unparsable write
    return data


def _corrupt_header(path: str) -> None:
    """Overwrite the start of the JSON header so it no longer parses (length kept)."""
    with open(path, "r+b") as handle:
        handle.seek(8)
        handle.write(b"\xff\xfe garbage \x00")


def write_cache_entry(
    root: str | os.PathLike[str],
    key: str | None = None,
    *,
    num_shards: int = 4,
    present: Iterable[int] | None = None,
    status: str = "complete",
    last_used: float | None = None,
    tensor_bytes: int = 4096,
    seed: int = 0,
) -> str:
    """Create ``<root>/<key>`` in the given state and return its path.

    ``last_used`` (epoch seconds, default one hour ago) becomes the mtime of every file
    and of the entry directory; a ``writing`` entry instead gets a fresh ``.tmp`` file.
    """
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    root = os.fspath(root)
    os.makedirs(root, exist_ok=True)
    key = key or _unused_key(root, seed, status, num_shards)
    entry = os.path.join(root, key)
    os.makedirs(entry, exist_ok=True)
    table = _shapes(tensor_bytes, num_shards)
    shards = [] if status == "empty" else sorted(set(_default_present(status, num_shards) if present is None else present))
    odd = shards[min(1, len(shards) - 1)] if status == "disagreeing-shard" and shards else None
    for i in shards:
        tensors = _shard_tensors(table, seed, i)
        _write_shard(os.path.join(entry, f"shard{i}-of-{num_shards}.safetensors"),
                     _disagree(tensors) if i == odd else tensors)
    if status == "invalid-shard" and shards:
        _corrupt_header(os.path.join(entry, f"shard{shards[0]}-of-{num_shards}.safetensors"))
    if status not in ("incomplete", "writing", "empty"):
        tmp = os.path.join(entry, "manifest.json.tmp")
        with open(tmp, "wb") as handle:
            handle.write(_manifest(key, num_shards, table, status))
        os.replace(tmp, os.path.join(entry, "manifest.json"))
    when = time.time() - 3600 if last_used is None else float(last_used)
    for name in os.listdir(entry):
        os.utime(os.path.join(entry, name), (when, when))
    if status == "writing":
        missing = next(i for i in range(num_shards + 1) if i not in shards)
        with open(os.path.join(entry, f"shard{missing}-of-{num_shards}.safetensors.tmp"), "wb") as handle:
            handle.write(b"\0" * 64)
    else:
        os.utime(entry, (when, when))
    return entry


def build_demo_cache(root: str | os.PathLike[str], now: float | None = None) -> list[str]:
    """One entry of every kind, with varied ages, for the console's demo workspace."""
    now = time.time() if now is None else now
    specs = [
        ("complete", 8, 2 * 3600, 1), ("complete", 8, 3 * 86400, 2), ("complete", 4, 9 * 86400, 3),
        ("partial", 8, 6 * 3600, 4), ("incomplete", 8, 2 * 86400, 5), ("writing", 8, 30, 6),
        ("invalid-manifest", 4, 5 * 86400, 7), ("invalid-shard", 4, 12 * 86400, 8),
        ("key-mismatch", 2, 20 * 86400, 9), ("disagreeing-shard", 4, 4 * 86400, 10),
        ("empty", 8, 4 * 3600, 11),
    ]
    return [
        write_cache_entry(root, status=status, num_shards=n, last_used=now - age, seed=seed,
                          tensor_bytes=16384 * seed)
        for status, n, age, seed in specs
    ]
