"""Shared holding (issue 35 item 2, issue 37 item 3): a reader's record beside the run it reads.

Real processes: a child writes a reader's record of ``OUT/checkpoint-100`` and holds it; this
process lists the run's live readers (through the run's real path and through a symlink), then
the child withdraws it, or is killed (its record stale: same host, dead pid). A record of another
host cannot be judged from here and counts as live. Expected values are written here.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fvconsole.core.shared.locks import (
    READER_TAG,
    Holder,
    Lock,
    LockMode,
    ReaderRecord,
    live_readers,
)

READ = ("import sys\nfrom fvconsole.core.shared.locks import ReaderRecord\n"
        "r = ReaderRecord.of_checkpoint(sys.argv[1], operation='migrate', command='fvconsole migrate --yes')\n"
        "state = r.acquire()\nprint('reading' if state.held else 'unheld', flush=True)\nsys.stdin.read()\n"
        "print(r.release(), flush=True)\n")


def _run(tmp_path: Path) -> Path:
    out = tmp_path / "runs" / "out"
    for step in (100, 200):
        (out / f"checkpoint-{step}").mkdir(parents=True)
    return out


def _reader(checkpoint: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", READ, str(checkpoint)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "reading"
    return proc


def _records(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".out{READER_TAG}."))


def test_a_reader_is_listed_while_it_runs_and_gone_when_it_withdraws(tmp_path: Path) -> None:
    out = _run(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(out)
    assert live_readers(str(out)).readers == ()
    proc = _reader(alias / "checkpoint-100")  # reached through a symlink: the record is beside the real run
    try:
        [name] = _records(out)
        assert name.startswith(f".out{READER_TAG}.") and f"-{proc.pid}-" in name
        for spelling in (out, alias):
            found = live_readers(str(spelling))
            [reader] = found.readers
            assert (reader.holder.pid, reader.holder.host, reader.operation, reader.item) == (
                proc.pid, socket.gethostname(), "migrate", "checkpoint-100")
            assert reader.judged_alive and found.of("checkpoint-100") == (reader,) and found.of("checkpoint-200") == ()
            assert reader.describe().startswith(f"migrate (pid {proc.pid} on host ")
            assert reader.describe().endswith(" reads checkpoint-100")
            assert found.problems == ()
        record = json.loads((out.parent / name).read_text())
        assert record["item"] == "checkpoint-100" and record["operation"] == "migrate"
        assert record["command"] == "fvconsole migrate --yes" and record["pid"] == proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.stdout is not None and proc.stdout.read().strip() == "None"  # released without a problem
        proc.wait(timeout=30)
    assert _records(out) == [] and live_readers(str(out)).readers == ()


def test_readers_share_a_run(tmp_path: Path) -> None:
    out = _run(tmp_path)
    first, second = _reader(out / "checkpoint-100"), _reader(out / "checkpoint-200")
    try:
        found = live_readers(str(out))
        assert sorted((r.item, r.holder.pid) for r in found.readers) == [("checkpoint-100", first.pid),
                                                                          ("checkpoint-200", second.pid)]
        mine = ReaderRecord(str(out), "checkpoint-100", operation="reshard")
        assert isinstance(mine, Lock) and mine.mode is LockMode.SHARED and mine.probe().reason is None
        state = mine.acquire()
        assert state.held and state.mode is LockMode.SHARED
        assert len(live_readers(str(out)).of("checkpoint-100")) == 2
        assert mine.release() is None
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait(timeout=30)


def test_a_killed_readers_record_is_stale_and_listing_leaves_it(tmp_path: Path) -> None:
    out = _run(tmp_path)
    proc = _reader(out / "checkpoint-100")
    proc.kill()  # SIGKILL
    proc.wait(timeout=30)
    [left] = _records(out)
    # Same host, dead pid: stale, not a reader; the listing does not change what it lists.
    assert live_readers(str(out)).readers == () and _records(out) == [left]
    # The next reader of this identity cleans it up.
    mine = ReaderRecord(str(out), "checkpoint-200", operation="migrate")
    mine.acquire()
    try:
        assert left not in _records(out) and len(_records(out)) == 1
    finally:
        mine.release()


@pytest.mark.parametrize("other", ["another host", "another PID namespace"])
def test_a_reader_that_cannot_be_judged_counts_as_live(tmp_path: Path, other: str) -> None:
    out = _run(tmp_path)
    record = Holder.current("fvconsole migrate --yes").to_json()
    if other == "another host":
        record.update(host="fv-login2", boot_id="another-boot")
    else:
        record["pidns"] += 1
    record.update(operation="reshard", item="checkpoint-200", record_format="fvconsole-reader/v1")
    name = f".out{READER_TAG}.fv-login2-0123456789ab-4242-0badcafe"
    (out.parent / name).write_text(json.dumps(record))
    [reader] = live_readers(str(out)).readers
    assert reader.item == "checkpoint-200" and not reader.judged_alive and reader.judgement.state.value == "unknown"
    # Never removed by a reader of this identity: it is not provably dead.
    mine = ReaderRecord(str(out), "checkpoint-100", operation="migrate")
    mine.acquire()
    mine.release()
    assert (out.parent / name).exists()


def test_a_damaged_record_is_said_not_trusted(tmp_path: Path) -> None:
    out = _run(tmp_path)
    path = out.parent / f".out{READER_TAG}.host-0123456789ab-1-0badcafe"
    path.write_text('{"host": "x"')
    found = live_readers(str(out))
    assert found.readers == ()
    [problem] = found.problems
    assert problem.code == "lock.reader_damaged" and str(path) in problem.cli


def test_a_reader_item_is_a_name_inside_the_run(tmp_path: Path) -> None:
    out = _run(tmp_path)
    for item in ("", "..", "checkpoint-1/dcp"):
        with pytest.raises(ValueError):
            ReaderRecord(str(out), item, operation="migrate")


def test_a_reader_whose_record_cannot_be_written_says_so() -> None:
    """As an unprivileged user (``nobody`` through ``setpriv`` when the suite runs as root) reading a run
    whose parent it cannot write: no record, and the state says a prune will not see it."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed: no unprivileged user to run as")
    as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="fv-reader-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        (base / "runs" / "out" / "checkpoint-100").mkdir(parents=True)
        os.chmod(base / "runs", 0o555)
        code = ("import sys\nfrom fvconsole.core.shared.locks import ReaderRecord\n"
                "state = ReaderRecord.of_checkpoint(sys.argv[1], operation='migrate').acquire()\n"
                "print(state.held, state.problem.code if state.problem else None)\nprint(state.problem.cli)\n")
        done = subprocess.run([*as_user, sys.executable, "-c", code, str(base / "runs" / "out" / "checkpoint-100")],
                              capture_output=True, text=True, timeout=60, cwd="/")
        assert done.returncode == 0, done.stderr
        first, cli = done.stdout.splitlines()
        assert first == "False lock.reader_unwritten"
        assert f"a prune of {base / 'runs' / 'out'} will not see that migrate reads checkpoint-100" in cli
        assert [p.name for p in (base / "runs").iterdir()] == ["out"]
    finally:
        os.chmod(base / "runs", 0o755)
        shutil.rmtree(base)
