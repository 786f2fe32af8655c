"""The tree remover: iterative, descriptor-bounded, never through a symlink; mountinfo parsing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fvconsole.core.cache.scan import scan_cache
from fvconsole.core.shared.mounts import mount_points, mounts_by_child
from fvconsole.core.shared.removal import PartialRemoval, remove_tree
from fvconsole.demo.cache_builders import write_cache_entry


def _chain(top: Path, depth: int, name: str = "d") -> None:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
            if level % 100 == 0:  # files along the way, counted in the freed bytes
                with open(os.open("f.bin", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as fh:
                    fh.write(b"x" * 7)
    finally:
        os.close(fd)


def test_deep_and_wide_tree_is_removed_with_exact_bytes(tmp_path):
    top = tmp_path / "tree"
    top.mkdir()
    _chain(top, 1200)  # files at levels 0, 100, ..., 1100: 12 x 7 bytes
    for i in range(50):
        sub = top / f"w{i}"
        sub.mkdir()
        (sub / "a.bin").write_bytes(b"y" * i)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    os.symlink(outside, top / "w3" / "link-dir")
    os.symlink(outside / "keep.txt", top / "link-file")
    assert remove_tree(str(top)) == 12 * 7 + sum(range(50))
    assert not top.exists() and (outside / "keep.txt").read_text() == "keep"


def test_removal_needs_no_descriptor_per_level(tmp_path):
    # In a child with RLIMIT_NOFILE=48 a 600-deep chain needs the ".." re-open path:
    # holding one fd per level (the old remover) fails with EMFILE.
    top = tmp_path / "tree"
    top.mkdir()
    _chain(top, 600)
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        from fvconsole.core.shared.removal import remove_tree
        print(remove_tree({str(top)!r}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(6 * 7) and not top.exists()


def test_unremovable_file_deep_down_is_reported_relative_to_the_tree(tmp_path):
    top = tmp_path / "tree"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "gone.bin").write_bytes(b"12345")
    locked = top / "a" / "locked"
    locked.mkdir()
    (locked / "stays.bin").write_bytes(b"1")
    if subprocess.run(["chattr", "+i", str(locked / "stays.bin")], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        with pytest.raises(PartialRemoval) as info:
            remove_tree(str(top))
        assert info.value.filename == "a/locked/stays.bin" and info.value.failures == 1
        assert info.value.freed == 5 and not (top / "a" / "b").exists()
    finally:
        subprocess.run(["chattr", "-i", str(locked / "stays.bin")], capture_output=True)


def test_mountinfo_parsing_unescapes_and_groups_by_child(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_bytes(
        b"22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
        b"90 22 253:1 /data /cache/0123456789abcdef/mnt rw - ext4 /dev/vda rw\n"
        b"91 22 253:1 /x /cache/0123456789abcdef/a\\040b/deep rw - ext4 /dev/vda rw\n"
        b"92 22 0:50 / /cache/fedcba9876543210 rw - tmpfs tmpfs rw\n"
        b"93 22 0:50 / /cache-other/0000000000000000/mnt rw - tmpfs tmpfs rw\n"
    )
    points = mount_points(str(info))
    assert "/cache/0123456789abcdef/a b/deep" in points
    assert mounts_by_child(points, "/cache") == {
        "0123456789abcdef": ("a b/deep", "mnt"),
        "fedcba9876543210": (".",),
    }


def test_scan_notes_subdirectories_and_reports_no_mounts_for_plain_entries(tmp_path):
    root = tmp_path / "cache"
    entry = Path(write_cache_entry(root, seed=1, num_shards=2))
    (entry / "junk").mkdir()
    (entry / "junk" / "big.bin").write_bytes(b"z" * 1000)  # foreign: not counted
    scanned = scan_cache(root).get(entry.name)
    assert scanned.mounts == () and scanned.to_json()["mounts"] == []
    assert any("subdirectory junk/" in p for p in scanned.problems)
    assert scanned.bytes == sum(p.stat().st_size for p in entry.iterdir() if p.is_file())


# ---------------------------------------------------------------- removability before the first rename (D29)


def _immutable(path: Path) -> None:
    import shutil

    if shutil.which("chattr") is None:
        pytest.skip("no chattr(1)")
    proc = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot set the immutable flag here: {proc.stderr.strip()}")


def test_a_size_cap_passes_over_an_unremovable_entry_to_the_next_oldest(tmp_path: Path) -> None:
    import time

    from fvconsole.core.cache import EvictionSelectors, plan_eviction

    root = tmp_path / "cache"
    now = time.time()
    oldest, middle, newest = (Path(write_cache_entry(str(root), seed=s, num_shards=2, tensor_bytes=1024,
                                                     last_used=now - days * 86400))
                              for s, days in ((1, 9), (2, 5), (3, 2)))
    frozen = next(p for p in sorted(oldest.iterdir()) if p.is_file())
    _immutable(frozen)
    try:
        scan = scan_cache(str(root))
        one_entry = max(e.bytes for e in scan.entries)
        plan = plan_eviction(scan, EvictionSelectors(max_gb=(scan.total_bytes - one_entry) / 2**30))
        assert [p.key for p in plan.evict] == [middle.name]  # not the oldest: it cannot go
        skip = {s.key: s for s in plan.skipped}[oldest.name]
        assert skip.code == "skip.not_removable"
        assert skip.reason.endswith(f": {frozen} (immutable (chattr +i))")
        assert newest.exists() and oldest.exists()  # planning touches nothing
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], capture_output=True, check=False)


def test_mount_ids_come_from_statx_and_agree_with_proc(tmp_path: Path) -> None:
    """statx(STATX_MNT_ID) is the first source (no /proc needed); it names the mount /proc names."""
    import re

    from fvconsole.core.shared.mounts import STATX_MNT_ID, mount_id, statx_raw

    for path in (tmp_path, Path("/proc"), Path("/")):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if statx_raw(fd, "", STATX_MNT_ID) is None:
                pytest.skip("no statx here")
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as fh:
                expected = int(re.search(r"^mnt_id:\s*(\d+)", fh.read(), re.M).group(1))
            assert mount_id(fd) == expected, path
        finally:
            os.close(fd)


@pytest.mark.parametrize(("failures", "freed", "said"), [
    (1, 1, "1 file left in .evicting-k-1, 1 byte freed"),
    (2, 4096, "2 files left in .evicting-k-1, 4096 bytes freed"),
])
def test_a_partial_removal_says_its_files_and_bytes_with_their_noun(failures: int, freed: int, said: str) -> None:
    """What `cache evict --yes` and `checkpoints prune --yes` report of a tree they could not finish (issue 28 item 3)."""
    import errno

    partial = PartialRemoval(OSError(errno.EPERM, "Operation not permitted", "x"), freed, failures)
    assert partial.left_in(".evicting-k-1") == said
