"""core.shared.locks / core.shared.host: lock files that say whose they are (real files, real processes)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.host import current_identity, pid_alive, process_start_time
from fvconsole.core.shared.locks import FileLock, Holder, LockBusy, wait_for


def _lock(path: Path) -> FileLock:
    return FileLock(str(path), subject="/data/out", what="another run holds the lock")


def _stat_start(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def test_lock_file_records_the_holder_and_is_removed_on_release(tmp_path: Path) -> None:
    path = tmp_path / ".out.fvconsole-lock"
    with _lock(path) as lock:
        record = json.loads(path.read_text())
        assert record["host"] == socket.gethostname() and record["pid"] == os.getpid()
        assert record["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        assert record["pidns"] == os.stat("/proc/self/ns/pid").st_ino
        assert record["start_time"] == _stat_start(os.getpid())
        assert record["token"] == lock.held.token
        assert sorted(os.listdir(tmp_path)) == [".out.fvconsole-lock"]  # no temp file left beside it
    assert os.listdir(tmp_path) == []


def test_second_acquirer_is_refused_naming_the_holder_and_can_wait(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first = _lock(path)
    first.acquire()
    with pytest.raises(LockBusy) as info:
        _lock(path).acquire(break_stale=True)
    message = str(info.value)
    assert message.startswith(f"/data/out: another run holds the lock (pid {os.getpid()} on host {socket.gethostname()} since ")
    assert f"; lock file {path})" in message and "still running" in message
    assert info.value.details["lock"]["holder"]["pid"] == os.getpid()
    started = time.monotonic()
    with pytest.raises(LockBusy):
        _lock(path).acquire(wait=0.3)
    assert time.monotonic() - started >= 0.3
    threading.Timer(0.3, first.release).start()
    second = _lock(path)
    second.acquire(wait=30)
    assert json.loads(path.read_text())["token"] == second.held.token
    assert second.release() is None and not path.exists()


def test_killed_holder_is_dead_only_for_its_own_identity(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    code = ("import sys; from fvconsole.core.shared.locks import FileLock; "
            "FileLock(sys.argv[1], subject='s').acquire(); print('held', flush=True); sys.stdin.read()")
    with subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout.readline() == "held\n"
        assert FileLock(str(path), subject="s", what="w").probe(break_stale=True).refusal  # alive: kept
        proc.kill()
    holder = Holder.from_json(json.loads(path.read_text()))
    assert holder.pid == proc.pid and not pid_alive(proc.pid)
    assert holder.judge().state.value == "dead"
    # The same record from another host is never judged dead, nor from a container of this host.
    me = current_identity()
    other_ns = type(me)(me.hostname, me.boot_id, me.pidns + 1)
    other_host = type(me)("login2", "another-boot", me.pidns)
    assert holder.judge(other_ns).state.value == "unknown" and "PID namespace" in holder.judge(other_ns).reason
    assert holder.judge(other_host).state.value == "unknown"
    # Provably dead: a plain acquire takes it over, with a note naming the dead holder (issue 19.5).
    probe = FileLock(str(path), subject="s", what="w").probe()
    assert probe.refusal is None and f"stale lock of pid {proc.pid} " in probe.note and "taken over" in probe.note
    notes = [n.cli for n in FileLock(str(path), subject="s").acquire().notes]
    assert len(notes) == 1 and f"took over the stale lock of pid {proc.pid} " in notes[0], notes
    assert "no longer running on this host" in notes[0]
    assert json.loads(path.read_text())["pid"] == os.getpid()


@pytest.mark.parametrize("other", ["another PID namespace", "another host"])
def test_lock_that_cannot_be_judged_is_broken_only_on_the_operators_word(tmp_path: Path, other: str) -> None:
    path = tmp_path / "lock"
    record = Holder.current("fvconsole migrate --yes").to_json()
    if other == "another host":
        record.update(host="fv-login2", boot_id="another-boot")
    else:
        record["pidns"] += 1
    path.write_text(json.dumps(record))
    with pytest.raises(LockBusy) as info:
        _lock(path).acquire()
    assert info.value.reason.code == "lock.unknown" and "not taken over" in str(info.value)
    assert "--break-lock" in str(info.value) and json.loads(path.read_text()) == record  # never silently
    probe = FileLock(str(path), subject="s", what="w").probe(break_stale=True)
    assert probe.refusal is None and "will be broken (--break-lock)" in probe.note
    notes = [n.cli for n in _lock(path).acquire(break_stale=True).notes]
    assert len(notes) == 1 and f"broke the lock of pid {record['pid']} " in notes[0], notes
    assert json.loads(path.read_text())["pid"] == os.getpid()


def test_process_start_time_tells_a_reused_pid(tmp_path: Path) -> None:
    with subprocess.Popen(["sleep", "60"]) as proc:
        try:
            start = _stat_start(proc.pid)
            assert process_start_time(proc.pid) == start
            assert pid_alive(proc.pid, start) and not pid_alive(proc.pid, start - 1)
        finally:
            proc.kill()
            proc.wait()
    assert process_start_time(proc.pid) is None and not pid_alive(proc.pid)


@pytest.mark.parametrize("kind", ["empty", "garbage", "symlink to /dev/zero", "fifo", "huge"])
def test_damaged_lock_file_refuses_without_hanging_and_is_never_broken(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "lock"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(b"\x00\xffnot json")
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(json.dumps({"pad": "x" * (1 << 17)}))
    for break_stale in (False, True):
        with pytest.raises(FvError) as info:
            _lock(path).acquire(break_stale=break_stale)
        assert f"lock file {path} is unreadable" in str(info.value) and f"rm {path}" in str(info.value)
    assert os.path.lexists(path)
    assert sorted(os.listdir(tmp_path)) == ["lock"]


def test_release_leaves_a_lock_that_is_no_longer_ours(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    lock = _lock(path)
    lock.acquire()
    record = json.loads(path.read_text())
    path.write_text(json.dumps(dict(record, token="someone-else")))
    problem = lock.release()
    assert problem and "now belongs to" in problem.cli and path.exists()


def test_wait_for_polls_until_success_or_timeout() -> None:
    calls = []
    assert wait_for(lambda: calls.append(1) or (True if len(calls) == 3 else None), 30) is True
    assert len(calls) == 3
    started = time.monotonic()
    assert wait_for(lambda: None, 0.2) is None and time.monotonic() - started >= 0.2
    assert wait_for(lambda: "now", 0) == "now"
