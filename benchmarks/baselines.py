"""The approaches fvconsole is measured against, re-implemented faithfully.

* ``upstream_rank_state``: FastVideo's ``reconstruct_streaming_dataset_state`` as the seed
  migration script calls it, once per rank, over the full list of row-group dicts (split the
  whole manifest into shards, sum every shard, shuffle this rank's shard, walk it), and
  ``upstream_fingerprint`` (``_manifest_fingerprint``, stdlib ``json.dumps``). Both are the
  independent FastVideo transcription the tests use as their oracle, tests/fastvideo_reference.py.
* ``seed_write_loop``: the seed script's sequential per-rank loop: atomic ``torch.save``
  (temp file, flush, fsync, ``os.replace``), ``torch.load`` back, compare, sha256 the file.
* ``du_bytes``: ``du -sb`` of a directory, the floor for "one stat per file".
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)  # after everything else: it only adds modules the tests hold

from fastvideo_reference import manifest_fingerprint as upstream_fingerprint  # noqa: E402
from fastvideo_reference import reconstruct_streaming_dataset_state as upstream_rank_state  # noqa: E402

__all__ = ["du_bytes", "seed_write_loop", "upstream_fingerprint", "upstream_rank_state"]


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
