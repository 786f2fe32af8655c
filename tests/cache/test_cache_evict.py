"""Executing eviction plans on real cache roots: re-checks, races, symlinks, leftovers, failures."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from fvconsole.core.cache import EvictionSelectors, execute_eviction, plan_eviction, scan_cache
from fvconsole.core.shared.removal import remove_tree
from fvconsole.demo.cache_builders import make_key, write_cache_entry

DAY = 86400.0


def _old_entries(root, count, **kwargs):
    now = time.time()
    return [os.path.basename(write_cache_entry(root, seed=i, last_used=now - (i + 2) * DAY, **kwargs))
            for i in range(count)]


def _tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def test_execute_removes_exactly_the_plan_and_measures_freed_bytes(tmp_path):
    root = tmp_path / "cache"
    keys = _old_entries(root, 4)
    sizes = {k: _tree_bytes(root / k) for k in keys}
    (root / "operator-notes.txt").write_text("foreign: never touched")
    scan = scan_cache(root)
    plan = plan_eviction(scan, EvictionSelectors(keys=tuple(keys[:2])))
    seen = []
    result = execute_eviction(plan, progress=lambda done, total, msg: seen.append((done, total)))
    assert result.ok and result.errors == ()
    assert sorted(e.key for e in result.evicted) == sorted(keys[:2])
    assert result.freed_bytes == sizes[keys[0]] + sizes[keys[1]] == plan.freed_bytes
    assert sorted(os.listdir(root)) == sorted([*keys[2:], "operator-notes.txt"])
    assert (root / "operator-notes.txt").read_text() == "foreign: never touched"
    assert seen[0] == (0, 2) and seen[-1] == (2, 2)
    assert result.fs_free_before is not None and result.fs_free_after is not None
    payload = result.to_json()
    assert payload["executed"] is True and payload["freed_bytes"] == result.freed_bytes
    assert {"key", "bytes", "reason"} <= set(payload["evict"][0])


def test_symlinked_entry_target_outside_root_survives(tmp_path):
    root = tmp_path / "cache"
    _old_entries(root, 1)
    target = write_cache_entry(tmp_path / "elsewhere", seed=7)
    before = sorted(os.listdir(target))
    link = make_key("link")
    os.symlink(target, root / link)
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(link,)))
    result = execute_eviction(plan)
    assert [e.key for e in result.evicted] == [link] and result.evicted[0].bytes == 0
    assert not os.path.lexists(root / link)
    assert sorted(os.listdir(target)) == before


def test_symlinks_inside_an_entry_are_unlinked_not_followed(tmp_path):
    root = tmp_path / "cache"
    (key,) = _old_entries(root, 1)
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "precious.bin").write_bytes(b"p" * 1000)
    os.symlink(outside, root / key / "dir-link")
    os.symlink(outside / "deep" / "precious.bin", root / key / "file-link")
    nested = root / key / "nested"
    nested.mkdir()
    os.symlink(outside / "deep", nested / "link")
    (nested / "x.bin").write_bytes(b"x" * 10)
    planned = scan_cache(root).get(key).bytes
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)), force=True)  # just modified: force past the grace
    result = execute_eviction(plan)
    assert result.ok and not os.path.lexists(root / key)
    assert (outside / "deep" / "precious.bin").read_bytes() == b"p" * 1000
    assert result.freed_bytes == planned + 10  # the nested file counts as unlinked, links do not


def test_stale_plan_is_skipped_entry_by_entry(tmp_path):
    root = tmp_path / "cache"
    touched, grown, fine = _old_entries(root, 3)
    plan = plan_eviction(scan_cache(root), EvictionSelectors(max_gb=0))
    os.utime(root / touched / "manifest.json")  # a launch hit it after planning
    (root / grown / "extra.bin").write_bytes(b"e")
    result = execute_eviction(plan)
    assert [e.key for e in result.evicted] == [fine]
    reasons = {s.key: s.reason for s in result.skipped}
    assert "changed since plan" in reasons[touched] and "manifest mtime" in reasons[touched]
    assert "changed since plan" in reasons[grown]
    assert os.path.isdir(root / touched) and os.path.isdir(root / grown) and result.ok


def test_rename_hides_entry_and_a_second_evictor_sees_already_evicted(tmp_path):
    root = tmp_path / "cache"
    keys = _old_entries(root, 5)
    plan = plan_eviction(scan_cache(root), EvictionSelectors(max_gb=0))
    inner = []

    def run_the_other_evictor_first(done, total, message):
        if done == 0:  # another evictor, with the same plan, runs to completion right now
            inner.append(execute_eviction(plan))

    outer = execute_eviction(plan, progress=run_the_other_evictor_first)
    assert sorted(e.key for e in inner[0].evicted) == sorted(keys) and inner[0].ok
    assert outer.evicted == () and outer.ok
    assert {s.reason for s in outer.skipped} == {"already evicted (by another evictor)"}
    assert os.listdir(root) == []


_RACER = """
import json, sys
from fvconsole.core.cache import EvictionSelectors, scan_cache, plan_eviction, execute_eviction
plan = plan_eviction(scan_cache(sys.argv[1]), EvictionSelectors(max_gb=0))
sys.stdin.readline()  # start together
result = execute_eviction(plan)
print(json.dumps(result.to_json()))
"""


def test_two_evictor_processes_racing_remove_each_entry_once(tmp_path):
    root = tmp_path / "cache"
    keys = _old_entries(root, 24, num_shards=2, tensor_bytes=512)
    sizes = {k: _tree_bytes(root / k) for k in keys}
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    import json

    results = [json.loads(p.communicate()[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    evicted = [[e["key"] for e in r["evict"]] for r in results]
    assert set(evicted[0]).isdisjoint(evicted[1])
    assert sorted(evicted[0] + evicted[1]) == sorted(keys)
    assert results[0]["errors"] == [] and results[1]["errors"] == []
    for r, other in zip(results, reversed(procs), strict=True):
        # Every other entry was skipped by this evictor, with a benign reason: the other took it
        # first, or the other had its files open while re-checking it (seen as a live holder).
        assert all("already evicted" in s["reason"] or "changed since plan" in s["reason"]
                   or f"open by pid {other.pid} " in s["reason"] for s in r["skipped"]), r["skipped"]
    assert results[0]["freed_bytes"] + results[1]["freed_bytes"] <= sum(sizes.values())
    assert os.listdir(root) == []


def test_leftovers_are_listed_and_cleaned_by_the_next_eviction(tmp_path):
    root = tmp_path / "cache"
    keep, gone = _old_entries(root, 2)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    leftover = root / f".evicting-{make_key('crashed')}-{int(dead.stdout)}"
    leftover.mkdir()
    (leftover / "shard0-of-2.safetensors").write_bytes(b"s" * 100)
    os.symlink(tmp_path, leftover / "escape")  # never followed while cleaning
    scan = scan_cache(root)
    assert [x.name for x in scan.leftovers] == [leftover.name] and scan.leftovers[0].bytes == 100
    result = execute_eviction(plan_eviction(scan, EvictionSelectors(keys=(gone,))))
    assert sorted(e.key for e in result.evicted) == sorted([make_key("crashed"), gone])
    assert sorted(os.listdir(root)) == [keep]
    assert result.freed_bytes == 100 + scan.get(gone).bytes
    assert (tmp_path / "cache").is_dir()


def test_leftover_of_a_live_recent_evictor_is_left_alone(tmp_path):
    root = tmp_path / "cache"
    (key,) = _old_entries(root, 1)
    busy = root / f".evicting-{make_key('live')}-{os.getpid()}"
    busy.mkdir()
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)))
    assert [p.key for p in plan.evict] == [key]
    assert "may still be running" in plan.skipped[0].reason
    forced = plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)), force=True)
    assert {p.key for p in forced.evict} == {key, make_key("live")}


def test_per_entry_failure_is_reported_and_the_rest_still_evicted(tmp_path, pin_after_check):
    # A file made immutable after the removability check (which would have skipped it).
    root = tmp_path / "cache"
    stuck, ok1, ok2 = _old_entries(root, 3)
    pin_after_check(root / stuck, "manifest.json")
    result = execute_eviction(plan_eviction(scan_cache(root), EvictionSelectors(keys=(stuck, ok1, ok2))))
    assert sorted(e.key for e in result.evicted) == sorted([ok1, ok2])
    assert len(result.errors) == 1 and stuck in result.errors[0] and not result.ok
    hidden = root / f".evicting-{stuck}-{os.getpid()}"
    assert (hidden / "manifest.json").is_file()  # hidden from launches; ls shows it as a leftover
    assert [x.key for x in scan_cache(root).leftovers] == [stuck]


def test_remove_tree_handles_a_vanished_path_and_a_plain_file(tmp_path):
    assert remove_tree(str(tmp_path / "nothing")) == 0
    f = tmp_path / "f.bin"
    f.write_bytes(b"abc")
    assert remove_tree(str(f)) == 3 and not f.exists()


def test_item_outside_the_root_is_never_touched(tmp_path):
    import dataclasses

    root = tmp_path / "cache"
    (key,) = _old_entries(root, 1)
    victim = tmp_path / "victim"
    victim.mkdir()
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)))
    forged = dataclasses.replace(plan, evict=(dataclasses.replace(plan.evict[0], path=str(victim)),))
    result = execute_eviction(forged)
    assert result.evicted == () and victim.is_dir() and (root / key).is_dir()
    assert "never touched" in result.skipped[-1].reason


def test_one_unremovable_file_does_not_stop_the_rest_of_the_entry(tmp_path, pin_after_check):
    # Regression: the first failing unlink aborted the entry, leaving every later shard on
    # tmpfs and reporting 0 bytes freed for the bytes that had been unlinked. (The file turns
    # immutable after the removability check, which would have skipped the entry.)
    root = tmp_path / "cache"
    (stuck,) = _old_entries(root, 1)
    shard_bytes = sum(p.stat().st_size for p in (root / stuck).iterdir() if p.name != "manifest.json")
    pin_after_check(root / stuck, "manifest.json")
    hidden = root / f".evicting-{stuck}-{os.getpid()}"
    result = execute_eviction(plan_eviction(scan_cache(root), EvictionSelectors(keys=(stuck,))))
    assert not result.ok and result.evicted == ()
    assert sorted(p.name for p in hidden.iterdir()) == ["manifest.json"]  # every shard went
    assert result.partial_bytes == shard_bytes and result.freed_bytes == shard_bytes
    assert "1 file left in" in result.errors[0] and hidden.name in result.errors[0]
    assert result.to_json()["freed_bytes"] == shard_bytes


def test_entry_taken_by_another_evictor_during_the_recheck_is_already_evicted(tmp_path, monkeypatch):
    # Regression (reliability D4): the other evictor renames the entry and empties it while our
    # re-check lists it; that was reported "changed since plan (manifest mtime differs: used ...)".
    from fvconsole.core.cache import evict

    root = tmp_path / "cache"
    (key,) = _old_entries(root, 1)
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)))
    real_list = evict.list_dir
    hidden = root / f".evicting-{key}-4194301"

    def listing_while_another_evictor_acts(path):
        os.rename(path, hidden)  # the other evictor: rename first, then unlink
        os.unlink(hidden / "manifest.json")
        return real_list(str(hidden))

    monkeypatch.setattr(evict, "list_dir", listing_while_another_evictor_acts)
    result = execute_eviction(plan)
    assert result.evicted == () and result.ok
    assert [(s.key, s.reason) for s in result.skipped] == [(key, "already evicted (by another evictor)")]
    assert hidden.is_dir()  # the other evictor's directory is left to it


def test_the_dry_run_leaves_the_atimes_of_the_entries_it_checked_alone(tmp_path, cli) -> None:
    """The removability check walks each planned entry; a dry run must not move its atimes."""
    root = tmp_path / "cache"
    entry = write_cache_entry(root, num_shards=2, status="incomplete", seed=4)
    paths = [entry, *(os.path.join(entry, n) for n in os.listdir(entry))]
    for p in paths:  # relatime moves an atime older than the mtime on the first read
        mtime = os.lstat(p).st_mtime_ns
        os.utime(p, ns=(mtime - 10**10, mtime), follow_symlinks=False)
    before = {p: os.lstat(p).st_atime_ns for p in paths}
    code, out, _ = cli(["cache", "evict", str(root), "--invalid"])
    assert code == 0 and os.path.basename(entry) in out
    assert {p: os.lstat(p).st_atime_ns for p in paths} == before
