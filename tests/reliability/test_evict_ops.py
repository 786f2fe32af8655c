"""Issue 15: one evictor per root, a journal line for every executed action, hostile journals.

Real processes throughout. A first evictor is frozen *inside its execution* by strace
(SIGSTOP injected on its second ``rename``: the first is the lock's holder record, the
second hides its first entry), so what a second evictor does meanwhile is observed, not
timed. Partial failures are real: an immutable file (``chattr +i``) on a tmpfs, and a
migration into a tmpfs too small for its sidecars.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mounts import tmpfs

from .harness import (
    CliResult,
    assert_clean_error,
    cli_env,
    run_cli,
    run_inproc,
    strace_available,
    tree_digest,
)
from .workspace import build_migration_workspace, cheap_entries

ENTRIES = 6


def _journal(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_until(check, seconds: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (the evictor opens its root right before polling the lock)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            return next(line.split(None, 1)[1].strip() for line in handle if line.startswith("State:"))
    except (OSError, StopIteration):
        return "gone"


@pytest.fixture
def frozen_evictor(tmp_path: Path) -> Iterator[dict]:
    """A `cache evict --max-gb 0 --yes` stopped (SIGSTOP) right after hiding its first entry; resumed at teardown."""
    reason = strace_available()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "cache"
    keys = cheap_entries(root, ENTRIES)
    journal = tmp_path / "journal.jsonl"
    env = cli_env({"FVCONSOLE_JOURNAL": str(journal)})
    strace = subprocess.Popen(
        ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename", "-e", "inject=rename:signal=SIGSTOP:when=2",
         sys.executable, "-m", "fvconsole", "cache", "evict", str(root), "--max-gb", "0", "--yes", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = tmp_path / ".cache.fvconsole-evictor"
    info = {"root": root, "keys": keys, "journal": journal, "env": env, "strace": strace, "record": record}
    try:
        _wait_until(record.exists, what="the first evictor's holder record")
        pid = json.loads(record.read_text())["pid"]
        # SIGSTOP is delivered as that rename returns, before any more of its code runs: once the
        # hidden entry exists the evictor does nothing else (ptrace stops alone are only momentary).
        _wait_until(lambda: any(p.name.startswith(".evicting-") for p in root.iterdir())
                    and _state(pid).startswith(("t", "T")), what="the first evictor to stop")
        info["pid"] = pid
        yield info
    finally:
        if strace.poll() is None and "pid" in info:
            os.kill(info["pid"], signal.SIGCONT)
        try:
            strace.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            strace.kill()
            strace.communicate()


def _evict(info: dict, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fvconsole", "cache", "evict", str(info["root"]), "--max-gb", "0",
                           *extra], env=info["env"], capture_output=True, text=True, timeout=120)


@pytest.mark.fault("races", "a second `cache evict --yes` while another is inside its execution (refused; dry run allowed)")
def test_second_evictor_is_refused_naming_the_holder(frozen_evictor: dict, trials) -> None:
    info = frozen_evictor
    root, pid = info["root"], info["pid"]
    hidden = [p.name for p in root.iterdir() if p.name.startswith(".evicting-")]
    assert len(hidden) == 1, "the first evictor is not where the test froze it"
    before = tree_digest(root)
    second = _evict(info, "--yes")
    assert second.returncode == 1, second.stderr
    [line] = second.stderr.splitlines()
    assert re.fullmatch(
        rf"error: {re.escape(str(root))}: another eviction is running \(pid {pid} on host "
        rf"{re.escape(socket.gethostname())} since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\); "
        r"re-run with --wait SECONDS to wait for it", line), line
    assert second.stdout == "" and tree_digest(root) == before, "the refused evictor changed the cache"
    trials.add("refused at once")
    waited = _evict(info, "--yes", "--wait", "0.5", "--json")
    assert waited.returncode == 1 and "did not finish within --wait 0.5s" in waited.stderr
    assert json.loads(waited.stdout)["lock"]["holder"]["pid"] == pid and tree_digest(root) == before
    trials.add("refused after --wait")
    dry = _evict(info, "--json")  # a dry run never takes the lock: it answers while the lock is held
    assert dry.returncode == 0 and json.loads(dry.stdout)["running_eviction"]["pid"] == pid
    assert "an eviction of this root is running now" in _evict(info).stderr
    trials.add("dry run answered")
    os.kill(pid, signal.SIGCONT)
    out, err = info["strace"].communicate(timeout=120)
    first = json.loads(out)
    assert info["strace"].returncode == 0, err
    assert sorted(e["key"] for e in first["evict"]) == sorted(info["keys"]) and list(root.iterdir()) == []
    [line] = _journal(info["journal"])  # the refusals are not actions: only the first evictor's line
    assert line["pid"] == pid and line["result"] == "ok" and sorted(line["items"]) == sorted(info["keys"])
    assert not info["record"].exists(), "the holder record outlived its eviction"


@pytest.mark.fault("races", "a second `cache evict --yes --wait 120` while another is inside its execution (waits, then plans anew)")
def test_waiting_evictor_runs_only_after_the_first(frozen_evictor: dict, trials) -> None:
    info = frozen_evictor
    root, pid = info["root"], info["pid"]
    waiting = subprocess.Popen([sys.executable, "-m", "fvconsole", "cache", "evict", str(root), "--max-gb", "0",
                                "--yes", "--wait", "120", "--json"], env=info["env"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    before = tree_digest(root)
    _wait_until(lambda: _holds_open(waiting.pid, root), what="the second evictor to reach the root's lock")
    time.sleep(0.5)  # it polls the lock meanwhile; had it taken it, it would be planning and removing now
    assert waiting.poll() is None, "the second evictor did not wait"
    assert tree_digest(root) == before, "the waiting evictor changed the cache while the first held the lock"
    os.kill(pid, signal.SIGCONT)
    first_out, _ = info["strace"].communicate(timeout=120)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    second = json.loads(out)
    first = json.loads(first_out)
    assert sorted(e["key"] for e in first["evict"]) == sorted(info["keys"])
    # It planned after the first had finished: an empty root, so nothing planned and nothing skipped
    # (a plan made before would list every entry, each skipped as "already evicted").
    assert second["evict"] == [] and second["skipped"] == []
    assert second["lock"]["held"] is True and second["lock"]["waited_seconds"] > 0.5
    assert [line["pid"] for line in _journal(info["journal"])] == [pid]  # the second had nothing to do
    trials.add("waited, then found nothing left")


@pytest.mark.fault("races", "the root's lock is held by a process that left no holder record, or a dead holder's record remains")
def test_holder_without_a_record_is_found_in_proc(tmp_path: Path, trials) -> None:
    root = tmp_path / "cache"
    cheap_entries(root, 2)
    record = tmp_path / ".cache.fvconsole-evictor"
    record.write_text(json.dumps({"format": "fvconsole-lock/v1", "host": socket.gethostname(), "pid": 4194301,
                                  "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                                  "pidns": os.stat("/proc/self/ns/pid").st_ino, "start_time": 1, "user": "ghost",
                                  "since_epoch": 1.0, "command": "killed long ago", "token": "t"}))
    # An OFD write lock on the root's lock file, no record (as an evictor killed before writing one).
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, struct, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
                               "fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack('hhxxxxqqixxxx', fcntl.F_WRLCK, 0, 0, 0, 0))\n"
                               "print('locked', flush=True)\ntime.sleep(120)", str(root / ".fvconsole-evictor.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = run_cli(["cache", "evict", str(root), "--max-gb", "0", "--yes"])
        line = assert_clean_error(result, names=[str(root)])
        assert f"(pid {holder.pid} on host " in line and "it left no holder record" in line
        assert "4194301" not in line, "a dead holder's stale record was believed"
        trials.add("named from /proc/<pid>/fdinfo")
    finally:
        holder.kill()
        holder.wait()
    journal = tmp_path / "journal.jsonl"
    done = run_cli(["cache", "evict", str(root), "--max-gb", "0", "--yes", "--journal", str(journal)])
    assert done.returncode == 0 and list(root.iterdir()) == [] and not record.exists()
    assert f"warning: {record}: took over from pid 4194301 on host " in done.stderr, done.stderr
    assert "no longer running on this host" in done.stderr, done.stderr
    [note] = _journal(journal)
    assert "took over from pid 4194301 " in note["details"]["lock_taken_over"], note
    trials.add("the next evictor took over and removed the stale record, with a warning and a journal note")


@pytest.fixture
def immutable_tmpfs(tmp_path: Path) -> Iterator[Path]:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    with tmpfs(tmp_path / "shm", 8 << 20) as mount:
        yield mount
        subprocess.run(["chattr", "-R", "-i", str(mount)], capture_output=True, check=False)


@pytest.mark.fault("permissions", "an undeletable file (chattr +i) inside one entry: exit 3, and the journal says so")
def test_partial_eviction_is_journaled(immutable_tmpfs: Path, tmp_path: Path, trials, capsys,
                                      pin_after_check) -> None:
    root = immutable_tmpfs / "wcache"
    keys = cheap_entries(root, 3)
    # Immutable after the removability check passed (it would have skipped the entry): in this process.
    pin_after_check(root / keys[1], "shard0-of-1.safetensors")
    journal = tmp_path / "journal.jsonl"
    result = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--yes", "--journal", str(journal)], capsys)
    line = assert_clean_error(result, codes=(3,), names=[keys[1]])
    assert "could not be evicted" in line
    [entry] = _journal(journal)
    assert entry["result"] == "partial" and entry["exit_code"] == 3
    assert sorted(entry["items"]) == sorted([keys[0], keys[2]])
    assert entry["errors_total"] == 1 and keys[1] in entry["errors"][0] and "Operation not permitted" in entry["errors"][0]
    assert entry["bytes"] > 0 and entry["details"]["partial_bytes"] > 0  # the manifest went before the shard refused
    trials.add("exit 3, journaled as partial")


@pytest.mark.fault("disk full", "the tmpfs fills up after the room check, before the sidecars: exit 3, and the journal says so")
def test_partial_migration_is_journaled(tmp_path: Path, trials) -> None:
    """A full filesystem is refused up front (docs/cli.md); one that another writer fills between
    that check and the writes fails part-way, and is journaled as partial."""
    ws = build_migration_workspace(tmp_path / "ws")
    journal = tmp_path / "journal.jsonl"
    flag = tmp_path / "paused"
    with tmpfs(tmp_path / "mnt", 256 << 10) as mount:
        out = mount / "state"
        env = cli_env({"FVCONSOLE_FAULT_PAUSE_AT": "^mkdir .*fvconsole-staging", "FVCONSOLE_FAULT_PAUSE_FILE": str(flag)})
        argv = [sys.executable, "-m", "fvconsole", *map(str, ws.migrate_args(out)), "--journal", str(journal)]
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            deadline = time.monotonic() + 120
            while not flag.exists():
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.02)
            with contextlib.suppress(OSError), open(mount / "filler", "wb") as filler:
                while filler.write(b"\0" * 4096):  # another writer takes what is left
                    filler.flush()
            flag.unlink()
            stdout, stderr = proc.communicate(timeout=120)
        result = CliResult(tuple(argv), proc.returncode, stdout, stderr)
        line = assert_clean_error(result, codes=(3,), names=[str(out)], progress_ok=True)
    [entry] = _journal(journal)
    assert entry["action"] == "migrate" and entry["result"] == "partial" and entry["exit_code"] == 3
    assert entry["target"] == str(out) and entry["errors"] == [line.removeprefix("error: ")]
    assert entry["details"]["output_dir_changed"] is False and entry["details"]["stage"]
    trials.add("exit 3, journaled as partial")


@pytest.mark.fault("disk full", "the journal's filesystem is full: the eviction stands, a warning says the line is missing")
def test_full_journal_filesystem_never_undoes_an_eviction(tmp_path: Path, trials) -> None:
    root = tmp_path / "cache"
    keys = cheap_entries(root, 2)
    with tmpfs(tmp_path / "full", 16 << 10) as mount:
        journal = mount / "journal.jsonl"
        fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass  # full, as intended
        finally:
            os.close(fd)
        result = run_cli(["cache", "evict", str(root), "--key", keys[0], "--yes", "--json", "--journal", str(journal)])
        assert result.returncode == 0, result.describe()
        assert not (root / keys[0]).exists() and (root / keys[1]).exists()
        doc = json.loads(result.stdout)
        assert doc["journal"]["written"] is False and "No space left on device" in doc["journal"]["error"]
        assert result.stderr.startswith(f"warning: journal {journal}: No space left")
        assert not journal.exists() or b"\n" not in journal.read_bytes()[:-1]  # never half a line among lines
    trials.add("evicted; journal failure reported")


APPENDER = """
import sys
from fvconsole.core.journal.log import JournalRecord, append_record
me = int(sys.argv[2])
for i in range(int(sys.argv[3])):
    items = tuple(f"{me:04d}{i:04d}{n:08d}" for n in range(200))  # shortened to fit: lines near 4 KiB
    rec = JournalRecord.now(action="cache evict", target=f"/w{me}", result="ok", exit_code=0, bytes=i, items=items)
    assert append_record(rec, sys.argv[1]).written
"""


@pytest.mark.fault("races", "8 processes append near-4 KiB journal lines at once (O_APPEND, one write each)")
def test_concurrent_appends_never_interleave(tmp_path: Path, trials) -> None:
    journal = tmp_path / "journal.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(journal), str(me), "60"], env=cli_env())
             for me in range(8)]
    assert all(p.wait(timeout=240) == 0 for p in procs)
    lines = journal.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 8 * 60 + 1
    seen: dict[str, list[int]] = {}
    for raw in lines[:-1]:
        assert 3000 < len(raw) < 4096, len(raw)
        doc = json.loads(raw)  # an interleaved line would not parse
        seen.setdefault(doc["target"], []).append(doc["bytes"])
    assert all(v == list(range(60)) for v in seen.values()) and len(seen) == 8
    trials.add("480 whole lines")


@pytest.mark.fault("hostile input", "`history` on hostile journals: escapes, garbage, a 10 GiB sparse file, a FIFO, /dev/zero")
def test_history_on_hostile_journals(tmp_path: Path, trials) -> None:
    good = {"format": "fvconsole-journal/v1", "time": "2025-01-01T00:00:00Z", "epoch": time.time(), "user": "u\x1b[31m",
            "host": "h\u202e", "pid": 1, "command": "rm -rf /\x07", "action": "cache evict",
            "target": "/t\x1b]0;owned\x07", "result": "ok", "exit_code": 0, "bytes": 1, "items": ["\x1b[2J"]}
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_bytes(b"\xff\xfe\x00garbage\n" + b"[" * 100000 + b"\n" + b'{"format": 1}\n'
                        + json.dumps(good).encode() + b"\n" + b'{"epoch": 1e999}\n')
    result = run_cli(["history", "--journal", hostile])
    assert result.returncode == 0, result.describe()
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout and "\u202e" not in result.stdout
    assert "\\x1b" in result.stdout and "4 malformed lines skipped" in result.stderr  # a warning: stderr
    as_json = json.loads(run_cli(["history", "--journal", hostile, "--json"]).stdout)
    assert as_json["records"][0]["target"] == good["target"] and as_json["malformed_lines"] == 4
    trials.add("escaped; malformed lines counted")
    sparse = tmp_path / "sparse.jsonl"
    with open(sparse, "wb") as handle:
        handle.truncate(10 << 30)
        handle.seek(10 << 30)
        handle.write(b"\n" + json.dumps(good).encode() + b"\n")
    started = time.monotonic()
    result = run_cli(["history", "--journal", sparse, "--json"])
    doc = json.loads(result.stdout)
    assert doc["count"] == 1 and doc["skipped_bytes"] >= (10 << 30) - (64 << 20)
    assert time.monotonic() - started < 60
    trials.add("10 GiB: only the tail read")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for special in (fifo, Path("/dev/zero")):
        assert_clean_error(run_cli(["history", "--journal", special], timeout=60), names=[str(special)])
        trials.add(f"{special.name}: refused at once")
