"""What a cache scan reads, and that reading less changes nothing (issue 19 item 9, D37).

The scan opens an entry's manifest and shards as it lists them (their fstat replaces the
lstat) and reads a small safetensors header in one pread. The expected values here come from
``os.lstat`` and from safetensors' own reader, never from the scan.
"""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from fvconsole.core.cache import scan_cache
from fvconsole.core.cache.files import (
    HEAD_READ_BYTES,
    MAX_OPENED,
    close_opened,
    list_fd_opening,
    read_safetensors_header,
)
from fvconsole.core.shared.process_use import ProcessUse
from fvconsole.demo.cache_builders import write_cache_entry

NOW = 1_800_000_000.0


def _shard(path, header_pad: int) -> None:
    """A real safetensors file whose header is about ``header_pad`` bytes longer than bare."""
    tensors = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, dtype=np.int64)}
    save_file(tensors, str(path), metadata={"pad": "x" * header_pad})


@pytest.mark.parametrize("pad", [0, 100, HEAD_READ_BYTES - 200, HEAD_READ_BYTES - 120, HEAD_READ_BYTES - 60,
                                 HEAD_READ_BYTES, 3 * HEAD_READ_BYTES])
def test_header_read_matches_safetensors_around_the_first_read(tmp_path, pad):
    path = tmp_path / "shard0-of-1.safetensors"
    _shard(path, pad)
    header = read_safetensors_header(str(path))
    with safe_open(str(path), framework="numpy") as f:
        assert header["__metadata__"] == f.metadata()
        names = f.keys()
        assert sorted(k for k in header if k != "__metadata__") == sorted(names)
        for name in names:
            piece = f.get_slice(name)
            assert header[name]["shape"] == piece.get_shape()
            assert header[name]["dtype"] == piece.get_dtype()


def test_a_header_longer_than_its_file_is_still_refused(tmp_path):
    path = tmp_path / "s.safetensors"
    path.write_bytes((50).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="runs past the end"):
        read_safetensors_header(str(path))


def test_listing_gives_each_opened_file_the_fields_of_its_lstat(tmp_path):
    entry = write_cache_entry(tmp_path / "cache", status="complete", num_shards=MAX_OPENED + 4, seed=3)
    os.symlink("manifest.json", os.path.join(entry, "shard99-of-99.safetensors"))
    os.mkfifo(os.path.join(entry, "shard98-of-99.safetensors"))
    fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listing, opened = list_fd_opening(fd, lambda name: name.endswith((".json", ".safetensors")))
        try:
            assert len(opened) == MAX_OPENED
            for child, st in opened.values():
                assert stat.S_ISREG(st.st_mode) and os.fstat(child).st_ino == st.st_ino
        finally:
            close_opened(opened)
    finally:
        os.close(fd)
    keys = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_size", "st_blocks", "st_mtime_ns", "st_ctime_ns")
    want = {name: tuple(getattr(os.lstat(os.path.join(entry, name)), k) for k in keys) for name in os.listdir(entry)}
    assert {name: tuple(getattr(st, k) for k in keys) for name, st in listing} == want


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_scan_closes_every_file_it_opened(tmp_path):
    root = tmp_path / "cache"
    for i, status in enumerate(["complete", "partial", "invalid-manifest", "invalid-shard", "writing"] * 4):
        write_cache_entry(root, status=status, num_shards=MAX_OPENED + 2, seed=i)
    before = _fd_count()
    for check in (True, False):
        scan = scan_cache(root, now=NOW, check_headers=check, processes=ProcessUse())
        assert len(scan.entries) == 20
    assert _fd_count() == before


def _read_calls() -> int:
    """Read system calls of this process so far (``syscr`` of /proc/self/io: read, pread, ...)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("syscr:"))


def test_a_small_header_costs_one_read(tmp_path):
    """An entry of a manifest and one small shard: two reads (the manifest, the shard's first
    64 KiB), not three. Measured as the difference between two roots, so the scan's fixed reads
    (mountinfo) cancel out."""
    roots = []
    for count in (10, 40):
        root = tmp_path / f"cache{count}"
        for i in range(count):
            write_cache_entry(root, status="complete", num_shards=1, seed=i)
        roots.append((count, root))
    calls = {}
    for count, root in roots:
        scan_cache(root, now=NOW, processes=ProcessUse())  # warm: the same code paths, caches filled
        start = _read_calls()
        scan = scan_cache(root, now=NOW, processes=ProcessUse())
        calls[count] = _read_calls() - start
        assert all(e.status == "complete" for e in scan.entries)
    per_entry = (calls[40] - calls[10]) / 30
    assert per_entry <= 2.1, calls


def test_scan_result_unchanged_for_every_kind_of_entry(tmp_path):
    """The scan with opened files equals one built from lstat and separate reads."""
    root = tmp_path / "cache"
    for i, status in enumerate(["complete", "partial", "incomplete", "writing", "invalid-manifest",
                                "invalid-shard", "key-mismatch", "wrong-version"]):
        write_cache_entry(root, status=status, num_shards=3, seed=i)
    scan = scan_cache(root, now=NOW, processes=ProcessUse())
    for entry in scan.entries:
        names = os.listdir(entry.path)
        regular = [n for n in names if stat.S_ISREG(os.lstat(os.path.join(entry.path, n)).st_mode)]
        assert entry.bytes == sum(os.lstat(os.path.join(entry.path, n)).st_size for n in regular)
        if "manifest.json" in names:
            assert entry.manifest_mtime_ns == os.lstat(os.path.join(entry.path, "manifest.json")).st_mtime_ns
        if entry.status in ("complete", "partial"):
            with open(os.path.join(entry.path, "manifest.json")) as f:
                assert entry.num_shards == json.load(f)["num_shards"]
