"""Cache entries of exact sizes on a small real tmpfs, for free-space tests (no torch, no fvconsole code).

Each entry is written by hand: a valid ``manifest.json`` (a few hundred bytes: one 4 KiB
tmpfs page) and one shard ``shard0-of-1.safetensors`` of exactly ``mib`` MiB (a minimal
safetensors header padded with zeros, every page written). So an entry occupies exactly
``mib`` MiB + 4 KiB of the tmpfs, and its last use (the manifest's mtime) is ``age``
seconds ago: tests compute expected victims and free space by hand from these numbers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@contextlib.contextmanager
def mounted_tmpfs(where: Path, size_mib: int) -> Iterator[Path]:
    """A fresh tmpfs of ``size_mib`` MiB at ``where`` (skips the test where mounting is not permitted)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {proc.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
