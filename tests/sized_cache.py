"""Cache entries of exact sizes for free-space tests on a small real tmpfs (``mounts.tmpfs``) (no torch, no fvconsole code).

Each entry is written by hand: a valid ``manifest.json`` (a few hundred bytes: one 4 KiB
tmpfs page) and one shard ``shard0-of-1.safetensors`` of exactly ``mib`` MiB (a minimal
safetensors header padded with zeros, every page written). So an entry occupies exactly
``mib`` MiB + 4 KiB of the tmpfs, and its last use (the manifest's mtime) is ``age``
seconds ago: tests compute expected victims and free space by hand from these numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from pathlib import Path

MIB = 1 << 20
PAGE = 4096


def key_of(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def sized_entry(root: Path, name: str, mib: int, age: float) -> str:
    """``<root>/<key of name>``: an entry occupying ``mib`` MiB + one page, last used ``age`` s ago."""
    key = key_of(name)
    entry = root / key
    entry.mkdir(parents=True)
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    head = struct.pack("<Q", len(header)) + header
    with open(entry / "shard0-of-1.safetensors", "wb") as handle:
        handle.write(head + b"\0" * (mib * MIB - len(head)))
    manifest = {"format_version": 1, "key": key, "num_shards": 1,
                "params": {"w": {"kind": "tensor", "dtype": "torch.float32", "global_shape": [1]}}}
    (entry / "manifest.json").write_text(json.dumps(manifest))
    when = time.time() - age
    for path in (entry / "shard0-of-1.safetensors", entry / "manifest.json", entry):
        os.utime(path, (when, when))
    return key


def fs_free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
