"""In use from process state (issue 19 item 7, D36): real child processes that open or mmap a
shard of a real safetensors entry, then scan, plan, evict, `cache ls` and the fleet summary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from reliability.harness import run_inproc

from fvconsole.core.cache import EvictionSelectors, execute_eviction, plan_eviction, scan_cache
from fvconsole.core.cache.evict import PROCESS_PASS_MAX_AGE
from fvconsole.core.shared.process_use import scan_processes
from fvconsole.demo.cache_builders import write_cache_entry

DAY = 86400.0

#: The child names itself (``/proc/self/comm``) so the expected command does not come from the code under test.
CHILD = textwrap.dedent("""
    import ctypes, os, sys
    with open("/proc/self/comm", "w") as fh:
        fh.write(sys.argv[3])
    fd = os.open(sys.argv[1], os.O_RDONLY)
    if sys.argv[2] == "mapped":  # libc's mmap, then close: only the mapping holds the file (Python's mmap keeps a dup)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        addr = libc.mmap(None, os.fstat(fd).st_size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        assert addr not in (None, ctypes.c_void_p(-1).value)
        os.close(fd)
        assert ctypes.string_at(addr, 8)
    print("ready", flush=True)
    sys.stdin.read()
""")


@contextmanager
def holding(path: str | Path, how: str, name: str = "fv-loader") -> Iterator[int]:
    """A live child process holding ``path`` open (``how="open"``) or only mapped (``"mapped"``)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), how, name], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        yield child.pid
    finally:
        child.kill()
        child.wait()


def _old_entry(root: Path, seed: int = 0) -> str:
    return os.path.basename(write_cache_entry(root, seed=seed, last_used=time.time() - 3 * DAY))


def _shard(root: Path, key: str) -> Path:
    return next(p for p in sorted((root / key).iterdir()) if p.name.endswith(".safetensors"))


@pytest.mark.parametrize("how", ["mapped", "open"])
def test_an_entry_a_live_process_holds_is_in_use_and_skipped_unless_forced(tmp_path: Path, how: str) -> None:
    root = tmp_path / "wcache"
    key, other = _old_entry(root, 0), _old_entry(root, 1)
    with holding(_shard(root, key), how) as pid:
        scan = scan_cache(root)
        entry, free = scan.get(key), scan.get(other)
        assert entry is not None and free is not None
        assert [h.to_json() for h in entry.in_use_by] == [{"pid": pid, "command": "fv-loader", "how": how}]
        assert free.in_use_by == ()  # three days old: the mtime signal alone would have evicted both
        plan = plan_eviction(scan, EvictionSelectors(keys=(key, other)))
        assert [p.key for p in plan.evict] == [other]
        [skip] = plan.skipped
        assert skip.key == key and skip.code == "skip.in_use_process"
        assert skip.reason == f"in use: {how} by pid {pid} (fv-loader); --force to evict anyway"
        forced = plan_eviction(scan, EvictionSelectors(keys=(key,)), force=True)
        assert [p.key for p in forced.evict] == [key]


def _age(entry: Path, like=None) -> None:
    """Every file of the entry and the entry three days old again (a rewrite made them new), or as
    the plan saw them: what the eviction re-checks is then only who holds the entry."""
    when = time.time() - 3 * DAY
    for path in [*entry.iterdir(), entry]:
        os.utime(path, (when, when))
    if like is not None:
        (item,) = like.evict
        manifest = entry / "manifest.json"
        os.utime(manifest, ns=(item.manifest_mtime_ns, item.manifest_mtime_ns))


@pytest.mark.parametrize("how", ["mapped", "open"])
def test_a_shard_renamed_over_while_held_still_holds_its_entry(tmp_path: Path, how: str) -> None:
    """Issue 29 item 6: a rewrite renames a new shard over the one a process reads; the process
    still reads that entry (its fd or mapping names the old inode, ``... (deleted)``), so the
    entry stays in use by either, through the scan, the plan and the eviction's own re-check."""
    root = tmp_path / "wcache"
    key, other = _old_entry(root, 0), _old_entry(root, 1)
    shard = _shard(root, key)
    with holding(shard, how) as pid:
        replacement = shard.with_name(shard.name + ".tmp")
        replacement.write_bytes(shard.read_bytes())
        os.replace(replacement, shard)
        _age(root / key)
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        maps = Path(f"/proc/{pid}/maps").read_text()
        held = links if how == "open" else maps.splitlines()
        assert any(line.endswith(f"{shard} (deleted)") for line in held)  # the kernel's own words
        scan = scan_cache(root)
        entry = scan.get(key)
        assert entry is not None and [h.to_json() for h in entry.in_use_by] == [
            {"pid": pid, "command": "fv-loader", "how": how}]
        assert scan.get(other).in_use_by == ()
        plan = plan_eviction(scan, EvictionSelectors(keys=(key, other)))
        assert [p.key for p in plan.evict] == [other] and [s.key for s in plan.skipped] == [key]
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)))
    assert [p.key for p in plan.evict] == [key], plan.skipped  # the holder gone: evictable again
    with holding(shard, how) as pid:
        replacement = shard.with_name(shard.name + ".tmp")
        replacement.write_bytes(shard.read_bytes())
        os.replace(replacement, shard)
        _age(root / key, like=plan)
        result = execute_eviction(plan)  # the held shard replaced after the plan: the re-check sees it
        assert result.evicted == () and [s.key for s in result.skipped] == [key]
        assert f"pid {pid}" in result.skipped[0].reason


def test_a_process_that_maps_the_entry_after_the_plan_stops_its_eviction(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    key = _old_entry(root)
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)))
    assert [p.key for p in plan.evict] == [key]  # nobody held it when planned
    with holding(_shard(root, key), "mapped") as pid:  # a cold load starts before the deletion
        result = execute_eviction(plan)
        assert result.ok and result.evicted == ()
        [skip] = result.skipped
        assert skip.reason == f"in use: mapped by pid {pid} (fv-loader); --force to evict anyway"
        assert sorted(os.listdir(root)) == [key] and len(os.listdir(root / key)) == 5  # untouched


def test_forced_eviction_removes_a_held_entry(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    key = _old_entry(root)
    with holding(_shard(root, key), "mapped"):
        result = execute_eviction(plan_eviction(scan_cache(root), EvictionSelectors(keys=(key,)), force=True))
        assert [e.key for e in result.evicted] == [key] and os.listdir(root) == []


def test_cache_ls_shows_the_holders_in_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB", raising=False)
    root = tmp_path / "wcache"
    key, other = _old_entry(root, 0), _old_entry(root, 1)
    with holding(_shard(root, key), "mapped", "loader\x1b[31m") as pid:
        code, out, _ = run_inproc(["cache", "ls", str(root), "--json"], capsys)
        assert code == 0
        doc = json.loads(out)
        by_key = {e["key"]: e for e in doc["entries"]}
        assert by_key[key]["in_use_by"] == [{"pid": pid, "command": "loader\x1b[31m", "how": "mapped"}]
        assert by_key[other]["in_use_by"] == [] and isinstance(doc["warnings"], list)
        code, out, _ = run_inproc(["cache", "ls", str(root)], capsys)
    assert code == 0 and "\x1b" not in out  # the command is untrusted text: escaped
    assert "in use by live processes on this node (not evicted without --force):" in out
    assert f"  {key}: mapped by pid {pid} (loader\\x1b[31m)" in out


def _fake_proc(tmp_path: Path) -> Path:
    """A /proc stand-in: pid 10 readable (holds nothing), pid 11 whose fd table cannot be listed."""
    proc = tmp_path / "proc"
    for pid in ("10", "11"):
        (proc / pid).mkdir(parents=True)
        (proc / pid / "comm").write_text("worker\n")
        (proc / pid / "maps").write_text("")
    (proc / "10" / "fd").mkdir()
    (proc / "11" / "fd").write_text("not a directory: listing it fails like EACCES does")
    return proc


def test_unreadable_processes_make_the_check_partial_and_ls_says_so(tmp_path: Path) -> None:
    use = scan_processes(proc=str(_fake_proc(tmp_path)))
    assert (use.processes, use.unreadable) == (2, 1)
    # One line naming what was not seen: which process, which part of it (as root: no "other users'").
    who = "" if os.geteuid() == 0 else " (other users' processes are seen only by root)"
    assert use.partial == (f"process check partial: the open files of pid 11 (worker) could not be read{who}; "
                           "files held there are not seen")
    root = tmp_path / "wcache"
    _old_entry(root)
    scan = scan_cache(root, processes=use)
    assert scan.warnings == (use.partial,) and scan.to_json()["warnings"] == [use.partial]
    assert scan.errors == ()


def test_several_unreadable_processes_are_named_on_one_line(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path)
    for pid in ("12", "13", "14"):
        shutil.copytree(proc / "11", proc / pid)
    (proc / "14" / "maps").unlink()
    (proc / "14" / "maps").mkdir()  # reading it fails as an unreadable one does
    use = scan_processes(proc=str(proc))
    assert use.unreadable == 4 and "\n" not in (use.partial or "")
    assert use.partial is not None and use.partial.startswith(
        "process check partial: 4 processes could not be read: pids 11 (worker), 12 (worker), 13 (worker) and 1 more")


def test_the_pass_over_proc_is_bounded(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    key = _old_entry(root)
    with holding(_shard(root, key), "open"):
        use = scan_processes(max_processes=1)
        assert use.processes == 1 and use.partial is not None and "stopped after 1 processes" in use.partial
        fds = scan_processes(max_fds=1)
        assert fds.partial is not None and "stopped after 1 file descriptors" in fds.partial


def test_a_process_that_opens_a_later_entry_mid_eviction_still_stops_it(tmp_path: Path) -> None:
    """The pass over /proc is shared between entries only while it is recent (PROCESS_PASS_MAX_AGE):
    a load that starts after the first entry went, and longer ago than that, is seen."""
    root = tmp_path / "wcache"
    first, second = _old_entry(root, 0), _old_entry(root, 1)
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=(first, second)))
    assert sorted(p.key for p in plan.evict) == sorted([first, second])
    later = plan.evict[1].key
    with ExitStack() as stack:
        pids: list[int] = []

        def progress(done: int, total: int, message: str) -> None:
            if done == 1:  # the first entry is gone; a cold load of the second starts now
                pids.append(stack.enter_context(holding(_shard(root, later), "open")))
                time.sleep(PROCESS_PASS_MAX_AGE + 0.2)

        result = execute_eviction(plan, progress)
        assert [e.key for e in result.evicted] == [plan.evict[0].key]
        [skip] = result.skipped
        assert skip.key == later and skip.reason == f"in use: open by pid {pids[0]} (fv-loader); --force to evict anyway"
    assert os.listdir(root) == [later]
