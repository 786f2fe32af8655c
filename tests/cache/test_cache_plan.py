"""Eviction plans: FastVideo's GC order, selectors, --keep, in-use protection, dangerous roots."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from cache_roots import dangerous_root_reason
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fvconsole.core.cache import EvictionSelectors, plan_eviction, scan_cache
from fvconsole.core.cache.gc_order import lru_walk
from fvconsole.core.shared.errors import FvError, UsageError
from fvconsole.demo.cache_builders import make_key, write_cache_entry

NOW = time.time()
HOUR = 3600.0
DAY = 86400.0
KIB = 1024


def upstream_gc_victims(root: Path, keep: str, max_gb: float) -> list[str]:
    """FastVideo's ``_gc_cache_root`` (seed 004, verbatim) with rmtree replaced by recording."""
    victims = []
    max_bytes = float(max_gb) * 2**30
    entries = []
    for child in root.iterdir():
        if not child.is_dir():
            continue
        manifest = child / "manifest.json"
        size = sum(f.stat().st_size for f in child.glob("*") if f.is_file())
        mtime = manifest.stat().st_mtime if manifest.is_file() else 0.0
        entries.append((mtime, size, child))
    total = sum(size for _, size, _ in entries)
    for mtime, size, child in sorted(entries):  # noqa: B007 - verbatim upstream
        if total <= max_bytes:
            break
        if child.name == keep:
            continue
        victims.append(child.name)  # upstream: shutil.rmtree(child, ignore_errors=True)
        total -= size
    return victims


def _pad(path: str, size: int) -> None:
    """Make an entry exactly ``size`` bytes by padding one extra regular file (mtime kept)."""
    current = sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))
    assert current <= size
    when = os.stat(os.path.join(path, "shard0-of-2.safetensors")).st_mtime
    pad = os.path.join(path, "pad.bin")
    with open(pad, "wb") as handle:
        handle.write(b"\0" * (size - current))
    os.utime(pad, (when, when))


def _tie_cache(root: Path) -> dict[str, str]:
    """Entries with equal mtimes, equal sizes and missing manifests, to pin the tie-breaks."""
    t1, t2 = NOW - 3 * DAY, NOW - 2 * DAY
    spec = {
        "a": ("complete", t1, 600 * KIB), "b": ("complete", t1, 600 * KIB), "c": ("complete", t1, 500 * KIB),
        "d": ("partial", t2, 700 * KIB), "e": ("incomplete", t2, 650 * KIB), "f": ("incomplete", t1, 300 * KIB),
        "g": ("invalid-manifest", NOW - 4 * DAY, 400 * KIB), "h": ("complete", NOW - DAY, 800 * KIB),
        "i": ("key-mismatch", t2, 600 * KIB), "j": ("complete", NOW - 5 * HOUR, 450 * KIB),
    }
    keys = {}
    for seed, (name, (status, when, size)) in enumerate(sorted(spec.items())):
        path = write_cache_entry(root, status=status, last_used=when, seed=seed, num_shards=2, tensor_bytes=1024)
        _pad(path, size)
        os.utime(path, (when, when))
        keys[name] = os.path.basename(path)
    return keys


@pytest.mark.parametrize("max_gb", [0.0, 0.001, 0.002, 0.004, 0.005, 1.0])
@pytest.mark.parametrize("keep", ["", "a", "e"])
def test_max_gb_reproduces_upstream_gc_victims_in_order(tmp_path, max_gb, keep):
    root = tmp_path / "cache"
    keys = _tie_cache(root)
    keep_key = keys[keep] if keep else ""
    expected = upstream_gc_victims(root, keep_key, max_gb)
    plan = plan_eviction(scan_cache(root, now=NOW), EvictionSelectors(max_gb=max_gb, keep=(keep_key,) if keep else ()))
    assert [p.key for p in plan.evict] == expected
    if max_gb == 0.0:
        assert len(expected) == len(keys) - (1 if keep else 0)


def test_upstream_order_has_missing_manifests_first_then_ties_by_size_then_path(tmp_path):
    root = tmp_path / "cache"
    keys = _tie_cache(root)
    scan = scan_cache(root, now=NOW)
    order = [e.key for e in lru_walk(scan.entries, cap=0)[0]]
    # e and f have no manifest (mtime 0): smaller f first; then g (oldest manifest);
    # then the t1 group by size (c < a == b, a/b by path), then t2 (d vs i by size), h, j.
    ab = sorted([keys["a"], keys["b"]])
    expected = [keys["f"], keys["e"], keys["g"], keys["c"], *ab, keys["i"], keys["d"], keys["h"], keys["j"]]
    assert order == expected
    assert order == upstream_gc_victims(root, "", 0.0)


def test_fractional_cap_stops_as_soon_as_total_fits(tmp_path):
    root = tmp_path / "cache"
    _tie_cache(root)
    scan = scan_cache(root, now=NOW)
    cap_gb = 0.0035  # about 3.6 MiB
    plan = plan_eviction(scan, EvictionSelectors(max_gb=cap_gb))
    remaining = scan.total_bytes - plan.freed_bytes
    assert remaining <= cap_gb * 2**30
    assert remaining + plan.evict[-1].bytes > cap_gb * 2**30  # one fewer would not have fitted
    assert plan.cap_bytes == int(cap_gb * 2**30)


def test_selectors_combine_as_a_union_and_keep_wins(tmp_path):
    root = tmp_path / "cache"
    old = write_cache_entry(root, last_used=NOW - 10 * DAY, seed=1)
    mid = write_cache_entry(root, last_used=NOW - 2 * DAY, seed=2)
    new = write_cache_entry(root, last_used=NOW - 2 * HOUR, seed=3)
    bad = write_cache_entry(root, status="invalid-shard", last_used=NOW - 3 * HOUR, seed=4)
    crashed = write_cache_entry(root, status="incomplete", last_used=NOW - 3 * HOUR, seed=5)
    part = write_cache_entry(root, status="partial", last_used=NOW - 3 * HOUR, seed=6)
    k = {n: os.path.basename(p) for n, p in
         dict(old=old, mid=mid, new=new, bad=bad, crashed=crashed, part=part).items()}
    scan = scan_cache(root, now=NOW)

    only_invalid = plan_eviction(scan, EvictionSelectors(invalid=True))
    assert {p.key for p in only_invalid.evict} == {k["bad"], k["crashed"]}  # partial is normal, not invalid

    older = plan_eviction(scan, EvictionSelectors(older_than=DAY))
    assert {p.key for p in older.evict} == {k["old"], k["mid"], k["crashed"]}  # no manifest = oldest

    by_key = plan_eviction(scan, EvictionSelectors(keys=(k["new"], make_key("absent"))))
    assert [p.key for p in by_key.evict] == [k["new"]]
    assert [(s.key, s.reason) for s in by_key.skipped] == [(make_key("absent"), "no such entry in the cache")]

    union = plan_eviction(scan, EvictionSelectors(invalid=True, older_than=7 * DAY, keys=(k["new"],), keep=(k["bad"],)))
    assert {p.key for p in union.evict} == {k["old"], k["new"], k["crashed"]}
    assert ("kept (--keep)" in {s.reason for s in union.skipped if s.key == k["bad"]})
    reasons = {p.key: p.reason for p in union.evict}
    assert "older than 7d" in reasons[k["old"]] and "--key" in reasons[k["new"]]
    assert "incomplete" in reasons[k["crashed"]] and "never used" in reasons[k["crashed"]]
    assert union.freed_bytes == sum(scan.get(x).bytes for x in (k["old"], k["new"], k["crashed"]))


def test_in_use_and_being_written_entries_are_skipped_unless_forced(tmp_path):
    root = tmp_path / "cache"
    busy = os.path.basename(write_cache_entry(root, status="writing", seed=1))
    hot = os.path.basename(write_cache_entry(root, last_used=NOW - 60, seed=2))
    young_crash = os.path.basename(write_cache_entry(root, status="incomplete", last_used=NOW - 120, seed=3))
    cold = os.path.basename(write_cache_entry(root, last_used=NOW - 5 * DAY, seed=4))
    scan = scan_cache(root, now=NOW)

    plan = plan_eviction(scan, EvictionSelectors(max_gb=0, invalid=True))
    assert [p.key for p in plan.evict] == [cold]
    skipped = {s.key: s.reason for s in plan.skipped}
    assert "being written" in skipped[busy]
    assert "used 1m 0s ago" in skipped[hot]
    assert "modified 2m 0s ago" in skipped[young_crash]

    forced = plan_eviction(scan, EvictionSelectors(max_gb=0, invalid=True), force=True)
    assert {p.key for p in forced.evict} == {busy, hot, young_crash, cold}
    assert forced.skipped == ()

    wide = plan_eviction(scan, EvictionSelectors(max_gb=0, invalid=True), grace_seconds=10)
    assert {p.key for p in wide.evict} == {busy, hot, young_crash, cold} - {busy}  # .tmp is 0s old


def test_protected_entries_do_not_count_as_freed_in_the_lru_walk(tmp_path):
    root = tmp_path / "cache"
    oldest_but_busy = os.path.basename(write_cache_entry(root, status="writing", seed=1))
    a = os.path.basename(write_cache_entry(root, last_used=NOW - 3 * DAY, seed=2))
    b = os.path.basename(write_cache_entry(root, last_used=NOW - 2 * DAY, seed=3))
    scan = scan_cache(root, now=NOW)
    cap_gb = (scan.total_bytes - 1) / 2**30  # must free at least one byte
    plan = plan_eviction(scan, EvictionSelectors(max_gb=cap_gb))
    # upstream would delete the busy (no manifest) entry; we pass over it and take the next
    assert [p.key for p in plan.evict] == [a]
    assert {s.key for s in plan.skipped} == {oldest_but_busy}
    assert b not in {p.key for p in plan.evict}


def test_symlinked_entry_only_by_explicit_selection(tmp_path):
    root = tmp_path / "cache"
    write_cache_entry(root, last_used=NOW - 3 * DAY, seed=1)
    target = write_cache_entry(tmp_path / "elsewhere", seed=2)
    link = make_key("link")
    os.symlink(target, root / link)
    scan = scan_cache(root, now=NOW)
    size_plan = plan_eviction(scan, EvictionSelectors(max_gb=0))
    assert link not in {p.key for p in size_plan.evict}
    assert "never evicted by --max-gb" in {s.key: s.reason for s in size_plan.skipped}[link]
    key_plan = plan_eviction(scan, EvictionSelectors(keys=(link,)))
    assert [p.key for p in key_plan.evict] == [link] and key_plan.evict[0].is_symlink
    assert "only the link is removed" in key_plan.evict[0].reason


def test_nothing_selected_is_a_usage_error(tmp_path):
    root = tmp_path / "cache"
    write_cache_entry(root)
    with pytest.raises(UsageError, match="nothing selected"):
        plan_eviction(scan_cache(root), EvictionSelectors())


def test_dangerous_roots_are_refused(tmp_path, monkeypatch):
    assert "filesystem root" in dangerous_root_reason("/", True, force=True)
    home = tmp_path / "home"
    home.mkdir()
    write_cache_entry(home)
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(FvError, match="home directory"):
        plan_eviction(scan_cache(home), EvictionSelectors(max_gb=0), force=True)
    link_to_home = tmp_path / "via-link"
    os.symlink(home, link_to_home)  # symlinks are resolved before comparing
    with pytest.raises(FvError, match="home directory"):
        plan_eviction(scan_cache(link_to_home), EvictionSelectors(max_gb=0), force=True)

    empty = tmp_path / "not-a-cache"
    empty.mkdir()
    (empty / "precious.txt").write_text("keep me")
    with pytest.raises(FvError, match="no cache-looking entries"):
        plan_eviction(scan_cache(empty), EvictionSelectors(max_gb=0))
    assert plan_eviction(scan_cache(empty), EvictionSelectors(max_gb=0), force=True).evict == ()
    assert (empty / "precious.txt").read_text() == "keep me"

    fresh = tmp_path / "fresh-node-cache"  # exists, holds nothing at all: nothing to evict, no refusal
    fresh.mkdir()
    assert plan_eviction(scan_cache(fresh), EvictionSelectors(max_gb=0)).evict == ()


@pytest.mark.skipif(not os.path.ismount("/dev/shm"), reason="/dev/shm is not a mount point here")
def test_mount_point_root_needs_force():
    assert "mounted filesystem" in dangerous_root_reason("/dev/shm", True, force=False)
    assert dangerous_root_reason("/dev/shm", True, force=True) is None


def test_plan_json_shape(tmp_path):
    root = tmp_path / "cache"
    busy = os.path.basename(write_cache_entry(root, status="writing", seed=1))
    cold = os.path.basename(write_cache_entry(root, last_used=NOW - 5 * DAY, seed=2))
    payload = plan_eviction(scan_cache(root, now=NOW), EvictionSelectors(max_gb=0)).to_json()
    assert payload["executed"] is False and payload["root"] == str(root)
    assert [(e["key"], e["bytes"]) for e in payload["evict"]] == [(cold, os.path.getsize(root / cold / "manifest.json")
                                                                   + sum(os.path.getsize(root / cold / n)
                                                                         for n in os.listdir(root / cold)
                                                                         if n != "manifest.json"))]
    assert {"key", "bytes", "reason"} <= set(payload["evict"][0])
    assert payload["skipped"][0]["key"] == busy and "reason" in payload["skipped"][0]
    assert payload["freed_bytes"] == payload["evict"][0]["bytes"] and payload["errors"] == []
    shutil.rmtree(root)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(
        st.tuples(st.sampled_from([None, 1.0e9, 1.0e9 + 1, 1.5e9]), st.sampled_from([0, 10, 20, 35])),
        min_size=1, max_size=8,
    ),
    cap=st.sampled_from([0, 15, 40, 70, 10**6]),
    keep_index=st.integers(min_value=-1, max_value=7),
)
def test_lru_order_matches_upstream_for_random_ties(tmp_path, entries, cap, keep_index):
    """Random mtimes (with ties and missing manifests) and sizes: same victims, same order."""
    root = tmp_path / f"case{len(os.listdir(tmp_path))}"
    root.mkdir()
    for i, (mtime, size) in enumerate(entries):
        entry = root / make_key(f"h{i}")
        entry.mkdir()
        (entry / "shard0-of-1.safetensors").write_bytes(b"\0" * size)
        if mtime is not None:
            (entry / "manifest.json").write_text("{}")
            os.utime(entry / "manifest.json", (mtime, mtime))
    keep = make_key(f"h{keep_index}") if 0 <= keep_index < len(entries) else ""
    scan = scan_cache(root, check_headers=False)
    ours = [e.key for e in lru_walk(scan.entries, cap / 2**30 * 2**30, skip=[keep] if keep else [])[0]]
    assert ours == upstream_gc_victims(root, keep, cap / 2**30)
    shutil.rmtree(root)
