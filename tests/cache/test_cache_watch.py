"""`cache ls --watch SECONDS`: bounded iterations (--count), logs vs terminals, failed scans, Ctrl-C."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from signal_defaults import DEFAULTS
from sized_cache import sized_entry

DAY = 86400.0


def _watch(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fvconsole", "cache", "ls", *argv], capture_output=True, text=True,
                          timeout=timeout)


def test_json_watch_prints_one_line_per_scan(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    started = time.monotonic()
    out = _watch(str(root), "--watch", "0.2", "--count", "3", "--json")
    elapsed = time.monotonic() - started
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert len(lines) == 3
    scans = [json.loads(line) for line in lines]
    assert all(s["entry_count"] == 1 and s["root"] == str(root) for s in scans)
    assert scans[0]["scanned_at"] < scans[1]["scanned_at"] < scans[2]["scanned_at"]
    assert elapsed >= 0.4  # two pauses between three scans (a lower bound only: never a timing target)


def test_text_watch_without_a_terminal_appends_timestamped_blocks(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    out = _watch(str(root), "--watch", "0.05", "--count", "2")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout  # a log never gets terminal control sequences
    stamps = re.findall(r"^=== \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ===$", out.stdout, re.M)
    assert len(stamps) == 2 and out.stdout.count(f"cache {root} on ") == 2


def test_prometheus_watch_rewrites_the_output_file(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    target = tmp_path / "fv.prom"
    out = _watch(str(root), "--format", "prometheus", "--output", str(target), "--watch", "0.05", "--count", "2")
    assert out.returncode == 0 and out.stdout == ""
    assert f'fvconsole_cache_entries{{root="{root}",status="complete"}} 1' in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fv.prom", "wcache"]


def test_a_failed_scan_is_reported_and_watching_goes_on(tmp_path: Path) -> None:
    """The root is missing at first, then appears: errors, then listings; the exit code is the last scan's."""
    root = tmp_path / "wcache"
    proc = subprocess.Popen([sys.executable, "-m", "fvconsole", "cache", "ls", str(root), "--watch", "0.1",
                             "--count", "12", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(proc.stdout.readline())
    assert "does not exist" in first["error"] and first["time"].endswith("Z")
    sized_entry(root, "a", 1, DAY)
    out, err = proc.communicate(timeout=60)
    scans = [json.loads(line) for line in out.splitlines()]
    assert len(scans) == 11 and scans[-1]["entry_count"] == 1
    assert proc.returncode == 0
    errors = err.splitlines()
    assert errors and all(line.startswith("error: ") and line.endswith("(still watching)") for line in errors)
    assert len(errors) == 1 + sum(1 for s in scans if "error" in s)
    gone = _watch(str(tmp_path / "never"), "--watch", "0.05", "--count", "2")
    assert gone.returncode == 1 and len(gone.stderr.splitlines()) == 2


@pytest.mark.serial  # a real terminal, redrawn within a deadline
def test_terminal_watch_redraws_and_ctrl_c_exits_0(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fvconsole", "cache", "ls", str(root), "--watch", "0.1"],
                            stdin=follower, stdout=follower, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=DEFAULTS)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    while seen.count(b"\x1b[H\x1b[2J") < 3 and time.monotonic() < deadline:
        if select.select([leader], [], [], 1)[0]:
            seen += os.read(leader, 65536)
    assert seen.count(b"\x1b[H\x1b[2J") >= 3, seen[-500:]  # clear + home before each redraw
    assert b"(watching; Ctrl-C to stop)" in seen
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    # No traceback, no "interrupted": at most the scans' warnings (this machine's /proc may be partial).
    assert all(line.startswith(b"warning: ") for line in proc.stderr.read().splitlines())
    os.close(leader)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_end_watching_like_every_command(tmp_path: Path, signum: int, code: int) -> None:
    """scancel, timeout(1) or a dropped ssh session stop a watch with 128 + signal, not 0 ("done")."""
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    proc = subprocess.Popen([sys.executable, "-m", "fvconsole", "cache", "ls", str(root), "--watch", "0.1", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=DEFAULTS)
    try:
        first = proc.stdout.readline()  # one scan done: the handlers are in place
        assert json.loads(first)["root"]
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == code
        err = proc.stderr.read().decode()
        name = signal.Signals(signum).name
        assert err.splitlines() == [f"error: interrupted by {name}"], err
        last = [json.loads(line) for line in proc.stdout.read().decode().splitlines() if line.strip()]
        assert last and last[-1]["error"] == f"interrupted by {name}" and last[-1]["interrupted_by"] == name
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
