"""Issue 10.2: two migrations to one output dir on a filesystem shared by several hosts.

The defect: staging dirs were judged stale by a PID, which means nothing on another login
node or in another container. A second ``migrate --yes`` from another host deleted the
first one's live staging dir (and, through its directory fd, kept deleting inside the set
the first had just published): the first exited 0 over a partial set.

"Another host" is real here, not simulated: the second run is started under
``unshare --uts --pid --fork --mount-proc`` with its own hostname, so it has another
hostname and another PID namespace (``/proc/self/ns/pid``), where the first run's PID does
not exist; "a container on this host" is ``unshare --pid`` alone (same hostname and boot id).
The first run is held at a chosen step with the executor's test-only pause hook
(``FVCONSOLE_FAULT_PAUSE_AT``) or killed there (``FVCONSOLE_FAULT_KILL_AT``).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from .harness import CliResult, assert_clean_error, cli_env, digest_diff, run_forked, run_inproc, tree_digest
from .workspace import MigrationWorkspace

OTHER_HOST = "fv-login2"
#: A kill point inside the staging phase (after the lock is taken, while sidecars are written).
KILL_WHILE_STAGING = "20"
_PAUSES = itertools.count()


@functools.cache
def _namespaces_problem() -> str | None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare(1) to start a run in other UTS/PID namespaces"
    proc = subprocess.run(["unshare", "--uts", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, text=True)
    return None if proc.returncode == 0 else f"unshare does not work here: {proc.stderr.strip()[:200]}"


@pytest.fixture
def namespaces() -> None:
    problem = _namespaces_problem()
    if problem:
        pytest.skip(problem)


def in_namespaces(argv: Sequence[str], *, hostname: str | None) -> list[str]:
    """``python -m fvconsole argv`` in a new PID namespace (and UTS namespace named ``hostname``).

    The CLI runs as the namespace's PID 2 under a shell, not as PID 1, so that a SIGKILL it
    sends itself (the fault hook) is not ignored the way PID 1 ignores it.
    """
    script = ('hostname "$HOSTNAME_FOR_TEST" && ' if hostname else "") + '"$@"; exit $?'
    uts = ["--uts"] if hostname else []
    return ["unshare", *uts, "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh",
            sys.executable, "-m", "fvconsole", *map(str, argv)]


def run_elsewhere(argv: Sequence[str], *, hostname: str | None = OTHER_HOST,
                  env: Mapping[str, str] | None = None) -> CliResult:
    """Run the CLI as another host (``hostname``) or, with ``hostname=None``, a container on this host."""
    extra = {"HOSTNAME_FOR_TEST": hostname} if hostname else {}
    proc = subprocess.run(in_namespaces(argv, hostname=hostname), env=cli_env({**extra, **(env or {})}),
                          capture_output=True, text=True, timeout=240)
    code = 128 - proc.returncode if proc.returncode > 128 else proc.returncode  # sh: 128+N = killed by N
    return CliResult(tuple(map(str, argv)), code, proc.stdout, proc.stderr)


class PausedRun:
    """``fvconsole argv`` in a forked child that stops right before the first step whose label matches ``at``."""

    def __init__(self, argv: Sequence[str], tmp: Path, at: str, env: Mapping[str, str] | None = None) -> None:
        self.flag = tmp / f"pause-{next(_PAUSES)}"
        self.result: CliResult | None = None
        self.pid: int | None = None
        env = {"FVCONSOLE_FAULT_PAUSE_AT": at, "FVCONSOLE_FAULT_PAUSE_FILE": str(self.flag), **(env or {})}
        self.thread = threading.Thread(target=self._run, args=(argv, env), daemon=True)
        self.thread.start()

    def _run(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.result = run_forked(argv, env=env)

    def wait_paused(self, timeout: float = 120) -> str:
        """The label it paused at (fails the test if it finished or never got there)."""
        deadline = time.monotonic() + timeout
        while not self.flag.exists():
            assert self.thread.is_alive(), f"the run finished without pausing:\n{self.result and self.result.describe()}"
            assert time.monotonic() < deadline, "the run did not reach its pause point"
            time.sleep(0.02)
        pid, label = self.flag.read_text().rstrip("\n").split(" ", 1)
        self.pid = int(pid)
        return label

    def resume(self) -> CliResult:
        self.flag.unlink(missing_ok=True)
        self.thread.join(240)
        assert self.result is not None, "the paused run did not finish"
        return self.result


def staging_dirs(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.fvconsole-staging-"))


def lock_file(out: Path) -> Path:
    return out.parent / f".{out.name}.fvconsole-lock"


def lock_leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.fvconsole-lock"))


def assert_complete_set(ws: MigrationWorkspace, out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([f"dataloader_state_rank{r}.pt" for r in range(ws.world)] + ["migration_receipt.json"])
    verdict = run_inproc(ws.verify_args(out), capsys)
    assert verdict.returncode == 0, verdict.describe()


def start_time_of(pid: int) -> int:
    """Field 22 of /proc/PID/stat, read here independently of the code under test."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


# --------------------------------------------------------------------------- the reported defect


@pytest.mark.fault("shared output dir", "second `migrate --yes` from another host while the first is staging")
def test_second_host_is_refused_while_the_first_is_staging(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], namespaces: None, trials
) -> None:
    out = tmp_path / "shared" / "state"
    out.parent.mkdir()
    first = PausedRun(ws.migrate_args(out), tmp_path, at=f"^rename .* -> {re.escape(str(out))}$")  # about to publish
    first.wait_paused()
    (staging,) = staging_dirs(out)
    staged = tree_digest(out.parent / staging)
    assert len(staged) == ws.world + 2, "the first run has not staged its whole set"

    second = run_elsewhere(ws.migrate_args(out))
    line = assert_clean_error(second, names=[str(out)])
    assert "another migration holds the lock" in line, line
    assert f"(pid {first.pid} on host {socket.gethostname()} since " in line, line
    assert f"; lock file {lock_file(out)})" in line, line
    assert digest_diff(staged, tree_digest(out.parent / staging)) == [], "the other host touched a live staging dir"
    assert f"{out.parent / staging}: staging dir of another host or container" in second.stderr, second.describe()
    assert not out.exists()
    trials.add("second host refused, staging dir untouched")

    done = first.resume()
    assert done.returncode == 0, done.describe()
    assert f"wrote {ws.world} sidecars" in done.stdout
    assert_complete_set(ws, out, capsys)
    assert staging_dirs(out) == [] and lock_leftovers(out) == []
    trials.add("first run published a complete set")


@pytest.mark.fault("shared output dir", "migration killed while staging, seen from another host")
def test_killed_run_is_left_alone_by_another_host(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], namespaces: None, trials
) -> None:
    out = tmp_path / "shared" / "state"
    out.parent.mkdir()
    lock = lock_file(out)
    killed = run_forked(ws.migrate_args(out), env={"FVCONSOLE_FAULT_KILL_AT": KILL_WHILE_STAGING})
    assert killed.killed_by == 9, killed.describe()
    (staging,) = staging_dirs(out)
    staged = tree_digest(out.parent / staging)
    assert lock.exists()

    # The other host cannot tell whether that PID still runs: a plain run never takes the lock over.
    held = lock.read_bytes()
    other = run_elsewhere(ws.migrate_args(out))
    line = assert_clean_error(other, names=[str(lock)])
    assert f"(pid {killed.pid} on host {socket.gethostname()} since " in line, line
    assert "not taken over from here" in line and "--break-lock" in line, line
    assert lock.read_bytes() == held and digest_diff(staged, tree_digest(out.parent / staging)) == []
    trials.add("lock of another host kept")

    # The operator makes sure that run is gone and says so with --break-lock, as the line says.
    other = run_elsewhere(ws.migrate_args(out, "--break-lock"))
    assert other.returncode == 0, other.describe()
    assert f"warning: {lock}: broke the lock of pid {killed.pid} on host " in other.stderr, other.stderr
    assert f"warning: {out.parent / staging}: staging dir of another host or container" in other.stderr
    assert digest_diff(staged, tree_digest(out.parent / staging)) == [], "another host removed a staging dir"
    assert_complete_set(ws, out, capsys)
    trials.add("other host published, staging dir reported and untouched")

    # On the host that ran it, the dead run's staging dir is its own: the next run removes it.
    again = run_inproc(ws.migrate_args(out, "--overwrite"), capsys)
    assert again.returncode == 0, again.describe()
    assert staging_dirs(out) == [] and lock_leftovers(out) == []
    assert_complete_set(ws, out, capsys)


# --------------------------------------------------------------------------- --break-lock


@pytest.mark.fault("shared output dir", "live holder kept (even with --break-lock); killed holder, reused PID taken over")
def test_dead_holder_of_this_host_is_taken_over_and_a_live_one_never_broken(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], trials
) -> None:
    out = tmp_path / "state"
    lock = lock_file(out)

    # A live holder: refused with and without --break-lock, in the dry run as with --yes.
    first = PausedRun(ws.migrate_args(out), tmp_path, at="^mkdir ")  # holds the lock, staging not yet made
    first.wait_paused()
    held = lock.read_bytes()
    for extra, yes in (((), True), (("--break-lock",), True), (("--break-lock",), False), ((), False)):
        res = run_inproc(ws.migrate_args(out, *extra, yes=yes), capsys)
        line = assert_clean_error(res, names=[str(lock)])
        assert f"another migration holds the lock (pid {first.pid} on host " in line, line
        if extra:
            assert "still running, so --break-lock leaves it" in line, line
    assert lock.read_bytes() == held
    assert first.resume().returncode == 0
    trials.add("live holder kept", 4)

    # A SIGKILLed holder: the dry run names it and says it will be taken over, taking no lock.
    shutil.rmtree(out)
    killed = run_forked(ws.migrate_args(out), env={"FVCONSOLE_FAULT_KILL_AT": KILL_WHILE_STAGING})
    assert killed.killed_by == 9, killed.describe()
    before = tree_digest(out.parent)
    dry = run_inproc(ws.migrate_args(out, yes=False), capsys)
    assert dry.returncode == 0, dry.describe()
    assert f"warning: {lock}: stale lock of pid {killed.pid} on host" in dry.stderr, dry.stderr
    assert "will be taken over: " in dry.stderr and "no longer running" in dry.stderr, dry.stderr
    assert digest_diff(before, tree_digest(out.parent)) == [], "a dry run changed something"
    trials.add("killed holder named; dry run wrote nothing")

    # The same lock, but its PID now belongs to another process: kept only if the start time matches.
    record = json.loads(lock.read_text())
    with subprocess.Popen(["sleep", "120"]) as sleeper:
        try:
            assert start_time_of(sleeper.pid) != record["start_time"]
            lock.write_text(json.dumps(dict(record, pid=sleeper.pid, start_time=start_time_of(sleeper.pid))))
            line = assert_clean_error(run_inproc(ws.migrate_args(out, "--break-lock"), capsys), names=[str(lock)])
            assert f"(pid {sleeper.pid} on host " in line and "still running" in line, line
            trials.add("holder with a matching start time kept")
            lock.write_text(json.dumps(dict(record, pid=sleeper.pid)))
            took = run_inproc(ws.migrate_args(out), capsys)  # no --break-lock: provably not the holder
            assert took.returncode == 0, took.describe()
            assert f"warning: {lock}: took over the stale lock of pid {sleeper.pid} on host" in took.stderr, took.stderr
            assert "is now another process" in took.stderr, took.stderr
            trials.add("reused PID recognised, stale lock taken over")
        finally:
            sleeper.kill()
    assert_complete_set(ws, out, capsys)
    assert staging_dirs(out) == [] and lock_leftovers(out) == []


@pytest.mark.fault("shared output dir", "the host of a container whose migration was killed: kept, --break-lock breaks it")
def test_lock_of_a_container_is_broken_from_its_host_only_with_break_lock(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], namespaces: None, trials
) -> None:
    out = tmp_path / "state"
    lock = lock_file(out)
    killed = run_elsewhere(ws.migrate_args(out), hostname=None, env={"FVCONSOLE_FAULT_KILL_AT": KILL_WHILE_STAGING})
    assert killed.killed_by == 9, killed.describe()
    (staging,) = staging_dirs(out)
    staged = tree_digest(out.parent / staging)
    record = json.loads(lock.read_text())
    # Its PID (2 in its own namespace) is some other process here: it must not be judged by it.
    line = assert_clean_error(run_inproc(ws.migrate_args(out), capsys), names=[str(lock)])
    assert f"(pid {record['pid']} on host {socket.gethostname()} since " in line, line
    assert "another PID namespace (container) on this host" in line and "not taken over from here" in line, line
    assert lock.exists() and digest_diff(staged, tree_digest(out.parent / staging)) == []
    trials.add("container's lock kept")
    done = run_inproc(ws.migrate_args(out, "--break-lock"), capsys)  # the container is known to be gone
    assert done.returncode == 0, done.describe()
    assert f"warning: {lock}: broke the lock of pid {record['pid']} on host " in done.stderr, done.stderr
    assert f"warning: {out.parent / staging}: staging dir of another host or container" in done.stderr
    assert digest_diff(staged, tree_digest(out.parent / staging)) == []
    assert_complete_set(ws, out, capsys)
    trials.add("container's staging dir reported and untouched")


# --------------------------------------------------------------------------- re-verification


def _append_byte(out: Path) -> None:
    with open(out / "dataloader_state_rank3.pt", "ab") as handle:
        handle.write(b"\0")


def _replace_dir(out: Path) -> None:
    moved = out.parent / "moved-away"
    out.rename(moved)
    shutil.copytree(moved, out)


TAMPER: dict[str, tuple[Callable[[Path], None], str]] = {
    "sidecar changed": (_append_byte, "dataloader_state_rank3.pt: sha256 "),
    "sidecar removed": (lambda out: (out / "dataloader_state_rank5.pt").unlink(), "dataloader_state_rank5.pt: missing"),
    "receipt removed": (lambda out: (out / "migration_receipt.json").unlink(), "migration_receipt.json: missing"),
    "foreign file added": (lambda out: (out / "notes.txt").write_text("x"), "notes.txt: unexpected entry"),
    "output dir replaced": (_replace_dir, "is no longer the directory that was published"),
}


@pytest.mark.fault("shared output dir", "published set changed between publishing and reporting success")
@pytest.mark.parametrize("overwrite", [False, True], ids=["fresh", "overwrite"])
@pytest.mark.parametrize("tamper", list(TAMPER))
def test_published_set_is_reverified_before_success(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], tamper: str, overwrite: bool, trials
) -> None:
    out = tmp_path / "state"
    extra: tuple[str, ...] = ()
    previous = None
    if overwrite:
        assert run_inproc(ws.migrate_args(out), capsys).returncode == 0
        previous = tree_digest(out)
        extra = ("--overwrite",)
    # Right after the publishing rename: the parent dir is synced next, then success is reported.
    run = PausedRun(ws.migrate_args(out, *extra), tmp_path, at=f"^fsync {re.escape(str(out.parent))}$")
    run.wait_paused()
    action, expected = TAMPER[tamper]
    action(out)
    result = run.resume()
    line = assert_clean_error(result, codes=(3,), names=[expected], progress_ok=True)
    assert "the published set does not read back as written" in line, line
    if overwrite:  # the previous set is kept for the operator, and said where
        kept = line.split("the previous set is kept at ", 1)[1].split(" (until", 1)[0]
        assert tree_digest(kept) == previous, "the previous set was not kept intact"
    assert lock_leftovers(out) == [], "the lock was not released after the failure"
    trials.add("exit 3 naming the difference")
