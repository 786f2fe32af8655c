"""Scanning a real weight shard cache root (entries written with safetensors.torch.save_file)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fvconsole.core.cache import scan_cache
from fvconsole.core.cache.files import CacheFileError, read_safetensors_header
from fvconsole.core.cache.scan import Child, compact_indices, scan_entry
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import format_duration
from fvconsole.demo.cache_builders import make_key, write_cache_entry

NOW = time.time()
HOUR = 3600.0


def _by_status(scan):
    return {e.key: e for e in scan.entries}


def test_every_status_and_its_explanation(tmp_path):
    root = tmp_path / "cache"
    paths = {
        status: write_cache_entry(root, status=status, num_shards=4, last_used=NOW - 5 * HOUR, seed=i)
        for i, status in enumerate(
            ["complete", "partial", "incomplete", "writing", "invalid-manifest", "invalid-shard",
             "key-mismatch", "wrong-version"]
        )
    }
    entries = _by_status(scan_cache(root))
    got = {status: entries[os.path.basename(path)] for status, path in paths.items()}

    assert got["complete"].status == "complete"
    assert got["complete"].shards_present == (0, 1, 2, 3) and got["complete"].num_shards == 4
    assert got["complete"].summary is not None and got["complete"].summary.params == 3
    assert dict(got["complete"].summary.dtypes) == {"torch.bfloat16": 2, "torch.float32": 1}

    assert got["partial"].status == "partial" and got["partial"].shards_present == (0, 1)
    assert "node-local" in got["partial"].explanation

    assert got["incomplete"].status == "incomplete" and got["incomplete"].last_used is None
    assert "rank 0" in got["incomplete"].explanation and "never gets a cache hit" in got["incomplete"].explanation
    assert not got["incomplete"].writing

    assert got["writing"].status == "incomplete" and got["writing"].writing
    assert "write in progress" in got["writing"].explanation
    assert got["writing"].tmp_files == ("shard2-of-4.safetensors.tmp",)

    for status, field in (("invalid-manifest", "parse"), ("key-mismatch", "'key'"),
                          ("wrong-version", "'format_version'"), ("invalid-shard", "shard0-of-4")):
        assert got[status].status == "invalid", status
        assert field in got[status].explanation, (status, got[status].explanation)
    # an invalid manifest still has an mtime: FastVideo's GC orders it by that mtime
    assert got["key-mismatch"].last_used == pytest.approx(NOW - 5 * HOUR, abs=1e-3)


def test_bytes_count_regular_files_only_and_never_follow_symlinks(tmp_path):
    root = tmp_path / "cache"
    path = write_cache_entry(root, num_shards=2)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * 100_000)
    expected = sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))
    os.symlink(outside / "big.bin", os.path.join(path, "link.bin"))
    os.mkdir(os.path.join(path, "subdir"))
    entry = scan_cache(root).entries[0]
    assert entry.bytes == expected
    assert any("link.bin is a symlink" in p for p in entry.problems)
    assert entry.status == "complete"


def test_symlinked_entry_is_reported_not_followed(tmp_path):
    root = tmp_path / "cache"
    real = write_cache_entry(tmp_path / "elsewhere", num_shards=2)
    key = make_key("linked")
    os.makedirs(root)
    os.symlink(real, root / key)
    entry = scan_cache(root).get(key)
    assert entry is not None and entry.is_symlink
    assert entry.bytes == 0 and entry.status == "invalid" and entry.symlink_target == real
    assert "not followed" in entry.explanation


def test_foreign_children_and_leftovers_are_listed(tmp_path):
    root = tmp_path / "cache"
    key = os.path.basename(write_cache_entry(root))
    (root / "notes.txt").write_text("operator notes")
    (root / "ABCDEF0123456789").mkdir()  # uppercase: not a key
    (root / "0123456789abcdef0").mkdir()  # 17 chars
    (root / make_key("a file")).write_text("a file with a key-like name")
    leftover = root / f".evicting-{make_key('old')}-4194999"
    leftover.mkdir()
    (leftover / "shard0-of-1.safetensors").write_bytes(b"z" * 10)
    scan = scan_cache(root)
    assert [e.key for e in scan.entries] == [key]
    assert scan.foreign == tuple(sorted(["notes.txt", "ABCDEF0123456789", "0123456789abcdef0", make_key("a file")]))
    assert len(scan.leftovers) == 1
    assert scan.leftovers[0].key == make_key("old") and scan.leftovers[0].pid == 4194999
    assert scan.leftovers[0].bytes == 10


def test_scan_changes_no_mtime_or_atime(tmp_path):
    root = tmp_path / "cache"
    for seed, status in enumerate(["complete", "partial", "invalid-shard", "incomplete"]):
        write_cache_entry(root, status=status, seed=seed, last_used=NOW - 2 * HOUR)

    paths = [str(root)]
    for dirpath, dirnames, filenames in os.walk(root):
        paths += [os.path.join(dirpath, n) for n in dirnames + filenames]
    old = NOW - 3 * HOUR
    for path in paths:  # atime == mtime: under relatime any plain read would bump atime now
        os.utime(path, (old, old), follow_symlinks=False)

    def times():
        return {p: (os.lstat(p).st_mtime_ns, os.lstat(p).st_atime_ns) for p in paths}

    before = times()
    scan = scan_cache(root)
    assert len(scan.entries) == 4
    assert times() == before


def test_writing_flag_respects_the_grace_period(tmp_path):
    root = tmp_path / "cache"
    path = write_cache_entry(root, status="writing")
    assert scan_cache(root).entries[0].writing
    old = NOW - 20 * 60
    for name in os.listdir(path):
        os.utime(os.path.join(path, name), (old, old))
    assert not scan_cache(root).entries[0].writing  # 20 min > 10 min default grace
    assert scan_cache(root, grace_seconds=3600).entries[0].writing


def test_entry_vanishing_mid_scan_is_reported_not_raised(tmp_path):
    import shutil

    root = tmp_path / "cache"
    path = write_cache_entry(root)
    child = Child(os.path.basename(path), path, os.lstat(path))  # listed, then removed
    shutil.rmtree(path)
    errors: list[str] = []
    assert scan_entry(child, NOW, 600, True, errors) is None
    assert errors and "vanished" in errors[0]


def test_missing_root_and_file_root_are_clear_errors(tmp_path):
    with pytest.raises(FvError, match="does not exist"):
        scan_cache(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(FvError, match="not a directory"):
        scan_cache(tmp_path / "file")


def test_header_reader_rejects_truncated_and_absurd_headers(tmp_path):
    root = tmp_path / "cache"
    path = write_cache_entry(root, num_shards=1)
    shard = os.path.join(path, "shard0-of-1.safetensors")
    header = read_safetensors_header(shard)
    assert {"dtype", "shape", "data_offsets"} <= set(header["blocks.0.attn.to_qkv.weight"])

    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(Path(shard).read_bytes()[:-10])
    with pytest.raises(CacheFileError, match="truncated"):
        read_safetensors_header(str(truncated))

    absurd = tmp_path / "absurd.safetensors"
    absurd.write_bytes((200 * 2**20).to_bytes(8, "little") + b"{}")
    with pytest.raises(CacheFileError, match="exceeds"):
        read_safetensors_header(str(absurd))

    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x02")
    with pytest.raises(CacheFileError, match="shorter"):
        read_safetensors_header(str(short))


def test_truncated_shard_makes_the_entry_invalid(tmp_path):
    root = tmp_path / "cache"
    path = write_cache_entry(root, num_shards=2)
    shard = os.path.join(path, "shard1-of-2.safetensors")
    os.truncate(shard, os.path.getsize(shard) - 1)
    entry = scan_cache(root).entries[0]
    assert entry.status == "invalid" and "shard1-of-2.safetensors" in entry.explanation


def test_manifest_without_params_is_invalid(tmp_path):
    root = tmp_path / "cache"
    path = write_cache_entry(root, num_shards=1)
    key = os.path.basename(path)
    with open(os.path.join(path, "manifest.json"), "w") as handle:
        json.dump({"format_version": 1, "key": key, "num_shards": 1}, handle)
    assert "'params'" in scan_cache(root).entries[0].explanation


def test_scan_json_has_the_required_fields(tmp_path):
    root = tmp_path / "cache"
    write_cache_entry(root, status="partial", num_shards=4)
    payload = json.loads(json.dumps(scan_cache(root).to_json()))
    entry = payload["entries"][0]
    for field in ("key", "path", "bytes", "last_used", "num_shards", "shards_present", "status", "writing"):
        assert field in entry
    assert isinstance(entry["bytes"], int) and isinstance(entry["last_used"], float)
    assert entry["shards_present"] == [0, 1]


def test_format_duration_and_compact_indices():
    assert format_duration(600) == "10m" and format_duration(129600) == "1d12h"
    assert compact_indices((0, 1, 2, 3, 6, 8, 9)) == "0-3,6,8-9"
    assert compact_indices(()) == "none"


def test_entry_replaced_by_a_file_mid_scan_is_invalid_not_a_crash(tmp_path):
    import shutil

    root = tmp_path / "cache"
    path = write_cache_entry(root)
    child = Child(os.path.basename(path), path, os.lstat(path))  # listed as a directory ...
    shutil.rmtree(path)
    with open(path, "w") as handle:  # ... then swapped for a file before we open it
        handle.write("not a dir")
    entry = scan_entry(child, NOW, 600, True, [])
    assert entry is not None and entry.status == "invalid" and "unreadable" in entry.explanation



@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, '{"format_version": ' + "1" * 5000 + "}"])
def test_hostile_manifest_makes_one_entry_invalid_not_the_scan_fail(tmp_path, content):
    # Regression: RecursionError / ValueError (digit limit) escaped and aborted the whole scan.
    root = tmp_path / "cache"
    bad = write_cache_entry(root, num_shards=1, seed=1)
    good = write_cache_entry(root, num_shards=1, seed=2)
    with open(os.path.join(bad, "manifest.json"), "w") as handle:
        handle.write(content)
    entries = {e.path: e for e in scan_cache(root).entries}
    assert entries[bad].status == "invalid" and "not usable JSON" in entries[bad].explanation
    assert entries[good].status == "complete"
