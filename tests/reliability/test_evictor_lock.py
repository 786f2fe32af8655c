"""Issue 19.5: the evictor's lock cannot be taken by a user who cannot write the cache.

The defect: the lock was a ``flock`` of the root directory, which any user who can *open* the
root read-only could take and hold forever; every epilog eviction then waited or refused.
The lock is now an OFD write lock on ``<root>/.fvconsole-evictor.lock``, which needs the file
open for writing. The other user here is real: a forked child that ``setuid()``s to
``nobody`` and tries every lock it can get. A lock file planted there that the evictor
cannot write is a clear refusal naming its owner. Across PID namespaces, the refusal names
the holder by the pid this namespace sees, or says it is in another PID namespace.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import assert_clean_error, run_cli, tree_digest
from .workspace import cheap_entries

LOCK_NAME = ".fvconsole-evictor.lock"
_FLOCK = "hhxxxxqqixxxx"


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A cache root owned by root, mode 0755, on a path every user can reach (tmp_path is 0700)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user (setuid)")
    base = Path(tempfile.mkdtemp(prefix="fv-evictor-lock-", dir="/tmp"))
    try:
        base.chmod(0o755)
        root = base / "cache"
        cheap_entries(root, 3)
        root.chmod(0o755)
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_nobody_try_to_block(root: Path) -> tuple[int, int, list[str]]:
    """Fork a child that becomes ``nobody`` and takes every lock on the root it can; returns (pid, fd to end it, got)."""
    nobody = pwd.getpwnam("nobody")
    report_r, report_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.close(report_r)
            os.close(stop_w)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            got = []
            with contextlib.suppress(OSError):  # what the old lock was: a flock of the root directory
                fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got.append("flock of the root")
            for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):  # the new lock file: create it, or read it
                with contextlib.suppress(OSError):
                    fd = os.open(root / LOCK_NAME, flags, 0o644)
                    for name, cmd in (("OFD write lock", fcntl.F_OFD_SETLK), ("POSIX write lock", fcntl.F_SETLK)):
                        with contextlib.suppress(OSError):
                            fcntl.fcntl(fd, cmd, struct.pack(_FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0))
                            got.append(f"{name} of the lock file")
                    with contextlib.suppress(OSError):
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        got.append("flock of the lock file")
            os.write(report_w, (json.dumps(got) + "\n").encode())
            os.read(stop_r, 1)  # hold whatever it got until the test is done
        finally:
            os._exit(0)
    os.close(report_w)
    os.close(stop_r)
    with os.fdopen(report_r) as report:
        got = json.loads(report.readline())
    return pid, stop_w, got


@pytest.mark.fault("races", "a user who can only read the cache root tries to hold its eviction lock")
def test_a_user_who_cannot_write_the_cache_cannot_block_its_evictor(shared_root: Path, trials) -> None:
    pid, stop, got = _as_nobody_try_to_block(shared_root)
    try:
        assert "flock of the root" in got, got  # what blocked every evictor before
        assert not any("lock file" in what for what in got), got
        done = run_cli(["cache", "evict", str(shared_root), "--max-gb", "0", "--yes", "--no-journal"])
        assert done.returncode == 0, done.describe()
        assert sorted(p.name for p in shared_root.iterdir()) == [], "not evicted, or the lock file was left"
        trials.add("evicted while nobody held every lock it could")
    finally:
        os.close(stop)
        os.waitpid(pid, 0)


@pytest.mark.fault("races", "a lock file the evictor cannot write, planted in the cache root")
def test_a_planted_unwritable_lock_file_is_a_clear_refusal(shared_root: Path, unprivileged_ok, trials) -> None:
    planted = shared_root / LOCK_NAME
    planted.write_text("")
    nobody = pwd.getpwnam("nobody")
    os.chown(planted, nobody.pw_uid, nobody.pw_gid)
    planted.chmod(0o644)
    before = tree_digest(shared_root)
    # root without CAP_DAC_OVERRIDE: the cache owner, obeying file modes like any other user
    result = run_cli(["cache", "evict", str(shared_root), "--max-gb", "0", "--yes", "--no-journal"], unprivileged=True)
    line = assert_clean_error(result, names=[str(planted)])
    assert "belongs to nobody" in line and "not writable" in line, line
    assert tree_digest(shared_root) == before and stat.S_IMODE(planted.stat().st_mode) == 0o644
    trials.add("refused, naming the file and its owner; nothing changed")


@pytest.mark.fault("races", "the root's evictor runs in another PID namespace of this host")
def test_holder_in_another_pid_namespace_is_named_as_this_namespace_sees_it(tmp_path: Path, trials) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for another PID namespace")
    root = tmp_path / "cache"
    cheap_entries(root, 2)
    code = ("import sys, time\nfrom fvconsole.core.cache.roots import evictor_lock\n"
            "lock = evictor_lock(sys.argv[1], command='evictor in a container')\nlock.acquire()\n"
            "print('held', flush=True)\nsys.stdin.read()\nlock.release()\n")
    with subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code, str(root)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}) as proc:
        try:
            if proc.stdout.readline() != "held\n":
                pytest.skip("unshare --pid does not work here")
            record = json.loads((tmp_path / ".cache.fvconsole-evictor").read_text())
            inner = record["pid"]  # its pid in its own namespace (1 or 2)
            here = int(subprocess.run(["pgrep", "-f", "-n", "evictor in a container"], capture_output=True,
                                      text=True).stdout.split()[0])
            assert here != inner
            line = assert_clean_error(run_cli(["cache", "evict", str(root), "--max-gb", "0", "--yes"]),
                                      names=[str(root)])
            assert f"another eviction is running (pid {here} here, pid {inner} in its own PID namespace, " in line, line
            trials.add("named by this namespace's pid")
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
