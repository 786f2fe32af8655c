"""The root lock and the locked eviction as a front end (the console, from a thread) calls them.

Cross-process behaviour (a frozen evictor, /proc/locks) is in tests/reliability/test_evict_ops.py;
here two lock objects in one process are enough: OFD locks belong to open file
descriptions, so they exclude each other as two processes would.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from sized_cache import sized_entry

from fvconsole.core.cache import EvictionSelectors, plan_eviction, scan_cache
from fvconsole.core.cache.locked import EvictionOperation, LockedEviction
from fvconsole.core.cache.roots import EVICTOR, evictor_lock, probe_evictor
from fvconsole.core.journal import appender
from fvconsole.core.shared import run_locked
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.locks import LockBusy


def evict_under_lock(root, make_plan, *, command, wait=0.0, journal_path=None):
    """The console's way through the one runner: the confirmed plan under the root's lock, journaled."""
    run = run_locked(EvictionOperation(root, make_plan, command=command), wait=wait, journal=appender(journal_path))
    return LockedEviction.of(run)


DAY = 86400.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for i, name in enumerate("abc"):
        sized_entry(tmp_path / "wcache", name, 1, (3 - i) * DAY)
    return tmp_path / "wcache"


def test_record_lives_beside_the_root_and_only_while_held(root: Path) -> None:
    lock = evictor_lock(str(root), command="fvconsole cache evict --yes")
    assert EVICTOR.record(str(root)) == str(root.parent / ".wcache.fvconsole-evictor")
    assert probe_evictor(str(root)) is None
    state = lock.acquire()
    try:
        assert state.held and state.problem is None and state.record_problem is None
        record = json.loads(Path(lock.record).read_text())
        assert record["pid"] == os.getpid() and record["command"] == "fvconsole cache evict --yes"
        # The lock itself: one regular file in the root (never a directory, which FastVideo's GC would count).
        assert sorted(p.name for p in root.iterdir() if len(p.name) != 16) == [".fvconsole-evictor.lock"]
        assert (root / ".fvconsole-evictor.lock").is_file()
        assert scan_cache(root).foreign == (), "cache ls lists the lock file"
        assert probe_evictor(str(root)).pid == os.getpid()
        with pytest.raises(LockBusy) as busy:
            evictor_lock(str(root)).acquire()
        assert str(busy.value).startswith(f"{root}: another eviction is running (pid {os.getpid()} on host ")
        assert busy.value.holder.command == "fvconsole cache evict --yes"
    finally:
        assert lock.release() is None
    assert not Path(lock.record).exists() and probe_evictor(str(root)) is None
    assert all(len(p.name) == 16 for p in root.iterdir()), "the lock file outlived the lock"


def test_a_symlink_to_the_root_is_the_same_lock(root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    with evictor_lock(str(root)), pytest.raises(LockBusy):
        evictor_lock(str(alias)).acquire()


def test_locked_eviction_refuses_waits_then_runs_the_confirmed_plan(root: Path, tmp_path: Path) -> None:
    """The console's way: preview (no lock), the operator confirms, execute exactly that plan under the lock."""
    journal = tmp_path / "journal.jsonl"
    plan = plan_eviction(scan_cache(root), EvictionSelectors(older_than=2 * DAY - 60))
    keys = [p.key for p in plan.evict]
    assert len(keys) == 2
    other = evictor_lock(str(root))
    other.acquire()
    with pytest.raises(LockBusy):
        evict_under_lock(str(root), lambda: plan, command="fvconsole console: evict", journal_path=str(journal))
    assert not journal.exists() and len([p for p in root.iterdir() if len(p.name) == 16]) == 3  # refused: nothing done, nothing journaled
    threading.Timer(0.3, other.release).start()
    done = evict_under_lock(str(root), lambda: plan, command="fvconsole console: evict", wait=30,
                            journal_path=str(journal))
    assert done.exit_code == 0 and done.lock.waited >= 0.2 and done.plan is plan
    assert [e.key for e in done.result.evicted] == keys
    [line] = [json.loads(x) for x in journal.read_text().splitlines()]
    assert line["command"] == "fvconsole console: evict" and line["items"] == keys
    assert done.journal.written and done.release_problem is None
    assert not Path(EVICTOR.record(str(root))).exists()
    nothing = evict_under_lock(str(root), lambda: plan_eviction(scan_cache(root), EvictionSelectors(older_than=2 * DAY - 60)),
                               command="x", journal_path=str(journal))
    assert nothing.result.evicted == () and nothing.journal is None  # nothing changed: no line


def test_refused_roots_get_nothing_written_beside_them(tmp_path: Path) -> None:
    with pytest.raises(FvError, match="system directory"):
        evict_under_lock("/etc", lambda: pytest.fail("planned a refused root"), command="x")
    assert not os.path.exists("/.etc.fvconsole-evictor")
    with pytest.raises(FvError, match="does not exist"):
        evictor_lock(str(tmp_path / "missing")).acquire()


def test_wait_gives_up_with_the_holder_named(root: Path) -> None:
    with evictor_lock(str(root), command="holder"):
        started = time.monotonic()
        with pytest.raises(LockBusy) as busy:
            evictor_lock(str(root)).acquire(wait=0.3)
        assert time.monotonic() - started >= 0.3
        assert "did not finish within --wait 0.3s" in str(busy.value) and busy.value.holder.command == "holder"
