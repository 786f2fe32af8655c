"""D26: `migrate --yes` and `cache evict --yes` stopped by SIGTERM or SIGHUP (scancel, a time
limit, srun teardown, timeout(1), a dropped ssh session) clean up like Ctrl-C.

The defect: Python's default for SIGTERM/SIGHUP ends the process at once, without cleanup.
A migration left its lock file (the next run was refused until --break-lock) and its
staging dir, an eviction its holder record beside the root; nothing was journaled and the
user saw no message.

Migrations are stopped at chosen steps with the executor's test-only pause hook
(``FVCONSOLE_FAULT_PAUSE_AT``): the test sends the signal to the paused process (a real
forked process running the CLI on a real DCP checkpoint) and lets it go on. Evictions have
no hook: strace delivers the signal on entry to the N-th ``rename`` or ``unlinkat``.
After each: the lock and staging dir are gone, the output dir is untouched or a complete
published set that `sidecars verify` accepts, the exit code and the one `error:` line are
as docs/cli.md says, no traceback, a journal line once writing had begun, and the next
run succeeds without --break-lock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from signal_defaults import DEFAULTS

from .harness import (
    CliResult,
    assert_no_traceback,
    cli_env,
    run_forked,
    run_inproc,
    strace_available,
    tree_digest,
)
from .test_crash_evict import KEY_RE, LEFTOVER_RE, entry_digests
from .test_shared_output_dir import PausedRun, lock_leftovers, staging_dirs
from .workspace import MigrationWorkspace

#: SIGINT (Ctrl-C) too: it already unwound, but could cut publishing or a lock step apart.
SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


@pytest.fixture(scope="module")
def steps(ws: MigrationWorkspace, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The labelled file-system steps of one uninterrupted `migrate --yes --overwrite` over a previous set."""
    tmp = tmp_path_factory.mktemp("signals-trace")
    out = tmp / "out"
    first = run_forked(ws.migrate_args(out, "--no-journal"))
    assert first.returncode == 0, first.describe()
    trace = tmp / "trace"
    again = run_forked(ws.migrate_args(out, "--overwrite", "--no-journal"), env={"FVCONSOLE_FAULT_TRACE": str(trace)})
    assert again.returncode == 0, again.describe()
    return [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]


def step_number(steps: list[str], prefix: str, contains: str = "") -> int:
    """1-based number of the first step whose label starts with ``prefix`` (and contains ``contains``)."""
    for i, label in enumerate(steps, 1):
        if label.startswith(prefix) and contains in label:
            return i
    raise AssertionError(f"no step {prefix!r} {contains!r} in {steps}")


#: Where a signal lands (the label of the step the run is paused before), and whether by then the
#: output dir is being changed (publishing has begun: the run finishes publishing first).
POINTS = {
    "taking the lock": ("lock: create", "", False),
    "writing sidecars": ("write", "dataloader_state_rank5.pt", False),
    "writing the receipt": ("create", "migration_receipt.json", False),
    "publishing (exchange)": ("exchange", "", True),
    "syncing after publishing": ("fsync", "", True),  # the first fsync after the exchange (see below)
    "releasing the lock": ("lock: unlink", "", True),
}


def pause_point(steps: list[str], name: str) -> int:
    prefix, contains, _ = POINTS[name]
    if name == "syncing after publishing":
        return step_number(steps[step_number(steps, "exchange"):], "fsync") + step_number(steps, "exchange")
    if name == "releasing the lock":
        return max(i for i, label in enumerate(steps, 1) if label.startswith("lock: unlink"))
    return step_number(steps, prefix, contains)


def journal_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def error_lines(result: CliResult) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def set_names(ws: MigrationWorkspace) -> list[str]:
    return sorted([f"dataloader_state_rank{r}.pt" for r in range(ws.world)] + ["migration_receipt.json"])


def interrupted_run(argv: list[str], tmp: Path, at: int, signum: int) -> CliResult:
    run = PausedRun(argv, tmp, str(at))
    run.wait_paused()
    os.kill(run.pid, signum)
    time.sleep(0.3)  # let a run that acts on the signal at once leave the paused step by itself
    return run.resume()


@pytest.mark.fault("signal: migrate", "SIGTERM/SIGHUP/SIGINT at each stage of migrate --yes (over a previous set)")
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("point", list(POINTS))
def test_migrate_signal(ws: MigrationWorkspace, steps: list[str], tmp_path: Path, capsys, trials,
                        point: str, signum: int) -> None:
    out = tmp_path / "out"
    journal = tmp_path / "journal.jsonl"
    previous = run_forked(ws.migrate_args(out, "--no-journal"))
    assert previous.returncode == 0, previous.describe()
    before = tree_digest(out)
    checkpoint_before = tree_digest(ws.checkpoint)
    at = pause_point(steps, point)
    result = interrupted_run(ws.migrate_args(out, "--overwrite", "--journal", journal), tmp_path, at, signum)
    name = signal.Signals(signum).name
    publishing = POINTS[point][2]

    assert result.killed_by is None, f"killed by the signal, no cleanup ran:\n{result.describe()}"
    assert_no_traceback(result)
    errors = error_lines(result)
    assert len(errors) == 1 and errors[0].startswith(f"error: interrupted by {name}; "), result.describe()
    assert lock_leftovers(out) == [], "the lock file was left behind"
    assert staging_dirs(out) == [], "a staging dir was left behind"
    assert tree_digest(ws.checkpoint) == checkpoint_before
    assert sorted(p.name for p in out.iterdir()) == set_names(ws)
    verdict = run_inproc(ws.verify_args(out), capsys)
    assert verdict.returncode == 0, verdict.describe()
    lines = journal_lines(journal)
    if publishing:  # the new set was published whole and verified before the run stopped
        assert result.returncode == 3, result.describe()
        assert "the migration completed: 16 sidecars and the receipt in" in errors[0]
        assert tree_digest(out) != before
        assert len(lines) == 1 and lines[0]["exit_code"] == 3 and lines[0]["items_total"] == ws.world + 1
        assert lines[0]["details"]["interrupted_by"] == name and lines[0]["details"]["output_dir_changed"] is True
    else:  # stopped before publishing: the previous set is exactly as it was
        assert result.returncode == 128 + signum, result.describe()
        assert tree_digest(out) == before
        if point == "taking the lock":
            assert lines == [], "nothing was written: no journal line"
        else:
            assert "staging dir removed" in errors[0] and "was not changed" in errors[0], errors[0]
            assert len(lines) == 1 and lines[0]["exit_code"] == 128 + signum
            assert lines[0]["details"]["interrupted_by"] == name
            assert lines[0]["details"]["output_dir_changed"] is False
    again = run_forked(ws.migrate_args(out, "--overwrite", "--no-journal"))
    assert again.returncode == 0, f"the next run needed help:\n{again.describe()}"
    trials.add("set published, then stopped (exit 3)" if publishing else "stopped, output dir unchanged")


@pytest.mark.fault("signal: migrate", "SIGTERM while staging into a fresh output dir: --json error object, exit 143")
def test_migrate_sigterm_json_subprocess(ws: MigrationWorkspace, steps: list[str], tmp_path: Path) -> None:
    """A real `python -m fvconsole` process: --json prints one {"error": ...} object; the output dir never appears."""
    out = tmp_path / "fresh"
    flag = tmp_path / "pause"
    env = cli_env({"FVCONSOLE_FAULT_PAUSE_AT": "dataloader_state_rank3", "FVCONSOLE_FAULT_PAUSE_FILE": str(flag)})
    argv = [sys.executable, "-m", "fvconsole", *map(str, ws.migrate_args(out, "--json", "--no-journal"))]
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=DEFAULTS) as proc:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        flag.unlink(missing_ok=True)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, stdout, stderr)
    assert "Traceback" not in stderr
    payload = json.loads(stdout)
    assert payload["error"].startswith("interrupted by SIGTERM; stopped while writing sidecars")
    assert payload["interrupted_by"] == "SIGTERM" and payload["executed"] is False
    assert payload["failure"]["staging_removed"] is True
    assert [line for line in stderr.splitlines() if line.startswith("error:")] == [f"error: {payload['error']}"]
    assert not out.exists() and staging_dirs(out) == [] and lock_leftovers(out) == []


# --------------------------------------------------------------------------- eviction


ENTRIES = 4


@pytest.fixture(scope="module")
def cache_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = strace_available()
    if reason:
        pytest.skip(reason)
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path_factory.mktemp("signals-cache") / "cache"
    for seed in range(ENTRIES):
        write_cache_entry(root, seed=seed, num_shards=3, tensor_bytes=2048)
    return root


def evict_with_signal(argv: list[str], syscall: str, nth: int, signum: int) -> CliResult:
    """The CLI under strace, ``signum`` delivered on entry to its ``nth`` ``syscall`` (which still runs)."""
    name = signal.Signals(signum).name
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscall}",
         "-e", f"inject={syscall}:signal={name}:when={nth}", sys.executable, "-m", "fvconsole", *argv],
        env=cli_env(), capture_output=True, text=True, timeout=240, preexec_fn=DEFAULTS,
    )
    return CliResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


#: (syscall, nth): the 1st rename publishes the lock's holder record, the 3rd hides the second
#: entry; each entry (3 shards and a manifest) takes 5 unlinkat: #3 is inside the first entry's
#: removal, #5 removes its directory.
EVICT_POINTS = {"holder record": ("rename", 1), "hiding entry 2": ("rename", 3),
                "mid-removal": ("unlinkat", 3), "entry's last unlink": ("unlinkat", 5)}


@pytest.mark.fault("signal: evict", "SIGTERM/SIGHUP/SIGINT during cache evict --yes (lock record, hide rename, removal)")
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("point", list(EVICT_POINTS))
def test_evict_signal(cache_template: Path, tmp_path: Path, capsys, trials, point: str, signum: int) -> None:
    root = tmp_path / "cache"
    shutil.copytree(cache_template, root)
    original = entry_digests(root)
    journal = tmp_path / "journal.jsonl"
    syscall, nth = EVICT_POINTS[point]
    result = evict_with_signal(["cache", "evict", str(root), "--max-gb", "0", "--yes", "--journal", str(journal)],
                               syscall, nth, signum)
    name = signal.Signals(signum).name

    assert result.killed_by is None, f"killed by the signal, no cleanup ran:\n{result.describe()}"
    assert_no_traceback(result)
    errors = error_lines(result)
    assert len(errors) == 1 and errors[0].startswith(f"error: interrupted by {name}"), result.describe()
    assert [p.name for p in root.parent.iterdir() if ".fvconsole-evictor" in p.name] == [], \
        "the lock's holder record was left beside the root"
    names = sorted(p.name for p in root.iterdir())
    intact = [n for n in names if KEY_RE.match(n)]
    leftovers = [n for n in names if LEFTOVER_RE.match(n)]
    assert sorted(intact + leftovers) == names
    assert all(tree_digest(root / k) == original[k] for k in intact), "an entry changed under its own key"
    lines = journal_lines(journal)
    if point == "holder record":  # the lock was taken; nothing removed
        assert result.returncode == 128 + signum and errors[0].endswith("nothing was changed"), result.describe()
        assert intact == sorted(original) and lines == []
    else:
        assert result.returncode == 3, result.describe()
        # The entry being removed is a leftover exactly as after a crash, or gone whole.
        assert len(leftovers) == (0 if point == "entry's last unlink" else 1), names
        assert all(x in errors[0] for x in leftovers)
        evicted = len(original) - len(intact) - len(leftovers)
        assert f"{evicted} {'entry' if evicted == 1 else 'entries'} evicted" in errors[0]
        assert len(lines) == 1 and lines[0]["exit_code"] == 3 and lines[0]["items_total"] == evicted
        assert any(f"interrupted by {name}" in e for e in lines[0]["errors"])
    again = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--yes", "--no-journal"], capsys)
    assert again.returncode == 0, again.describe()
    assert list(root.iterdir()) == []
    trials.add("nothing removed, exit 128+N" if point == "holder record"
               else "stopped, exit 3, leftover for the next eviction" if leftovers else "stopped, exit 3")


@pytest.mark.fault("signal: evict", "SIGTERM to the fleet node runner mid-eviction: result frame, exit 3")
def test_node_runner_sigterm(cache_template: Path, tmp_path: Path) -> None:
    """`fleet cache evict --yes` node side (srun teardown / scancel send SIGTERM to the task)."""
    root = tmp_path / "cache"
    shutil.copytree(cache_template, root)
    argv = [sys.executable, "-m", "fvconsole.cli.node", "cache", "evict", str(root), "--max-gb", "0", "--yes",
            "--json", "--no-journal"]
    proc = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=unlinkat",
                           "-e", "inject=unlinkat:signal=SIGTERM:when=3", *argv],
                          env=cli_env({"SLURMD_NODENAME": "n1"}), capture_output=True, text=True, timeout=240,
                          preexec_fn=DEFAULTS)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    from fvconsole.core.fleet.frames import decode_result, parse_frame

    frames = [parse_frame(line.encode()) for line in proc.stdout.splitlines()]
    chunks = [f for f in frames if f is not None and f.seq is not None]
    assert chunks, proc.stdout
    envelope, problem = decode_result("".join(f.chunk for f in sorted(chunks, key=lambda f: f.seq)))
    assert problem is None, problem
    assert envelope["node"] == "n1" and envelope["exit"] == 3, envelope
    assert envelope["output"]["error"].startswith("interrupted by SIGTERM; 0 entries evicted"), envelope
    assert envelope["output"]["interrupted_by"] == "SIGTERM" and envelope["output"]["executed"] is True
    assert [p.name for p in root.parent.iterdir() if ".fvconsole-evictor" in p.name] == []
    assert len([p for p in root.iterdir() if LEFTOVER_RE.match(p.name)]) == 1
