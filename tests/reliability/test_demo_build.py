"""`fvconsole demo` never leaves a dead end: a build that fails or dies part-way can be rerun.

The failures are real: a tmpfs too small for the workspace, a file size limit (RLIMIT_FSIZE),
and SIGKILL in the middle of the build.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mounts import mounted, require_mount, tmpfs

from fvconsole.demo.workspace import MARKER

from .harness import CliResult, cli_env


def run_demo(target: Path, *, preexec=None) -> CliResult:
    argv = ("demo", str(target), "--no-tui")
    proc = subprocess.run([sys.executable, "-m", "fvconsole", *argv], capture_output=True, text=True,
                          env=cli_env(), timeout=300, preexec_fn=preexec)
    return CliResult(argv, proc.returncode, proc.stdout, proc.stderr)


def failure_line(result: CliResult, target: Path) -> str:
    assert result.returncode == 1, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {target}: building the demo workspace failed ("), lines
    return lines[0]


def limit_file_size() -> None:
    """preexec_fn: files may not grow past 64 KiB (writes then fail with EFBIG; the demo needs ~4 MB)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


@pytest.mark.fault("demo", "disk full part-way through the demo build (1 MiB tmpfs)")
def test_disk_full_removes_the_partial_workspace_and_names_the_dir(tmp_path) -> None:
    with tmpfs(tmp_path / "small", 1 << 20) as small:
        target = small / "ws"
        line = failure_line(run_demo(target), target)
        assert "No space left on device" in line and line.endswith("the partial workspace was removed")
        assert not target.exists() and os.listdir(small) == []
        # The mount point itself as DIR: it existed (empty) before, so it stays, emptied.
        line = failure_line(run_demo(small), small)
        assert os.listdir(small) == []


@pytest.mark.fault("demo", "file size limit part-way through the demo build (RLIMIT_FSIZE)")
def test_file_size_limit_then_the_same_command_succeeds(tmp_path) -> None:
    target = tmp_path / "ws"
    line = failure_line(run_demo(target, preexec=limit_file_size), target)
    assert "File too large" in line
    assert not target.exists()
    again = run_demo(target)
    assert again.returncode == 0, again.describe()
    assert json.loads((target / MARKER).read_text())["state"] == "complete"


@pytest.mark.fault("demo", "demo build killed (SIGKILL) part-way")
def test_killed_build_is_rebuilt_by_the_same_command(tmp_path) -> None:
    target = tmp_path / "ws"
    proc = subprocess.Popen([sys.executable, "-m", "fvconsole", "demo", str(target), "--no-tui"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cli_env())
    marker_dir = target / "output" / "checkpoint-100"  # checkpoints 200-500 and the cache come after it
    deadline = time.monotonic() + 240
    while not marker_dir.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    if (target / MARKER).exists() and json.loads((target / MARKER).read_text())["state"] == "complete":
        pytest.skip("the build finished before it could be killed")
    assert json.loads((target / MARKER).read_text())["state"] == "building"
    again = run_demo(target)
    assert again.returncode == 0, again.describe()
    assert f"demo workspace: {target}" in again.stdout
    assert (target / "output" / "checkpoint-500").is_dir()


@pytest.mark.fault("demo", "rebuild of a demo workspace with a bind mount (same filesystem) inside")
def test_rebuild_never_empties_a_bind_mount_of_the_same_filesystem(tmp_path, capsys) -> None:
    from fvconsole.cli import main
    from fvconsole.demo.workspace import build_demo_workspace

    require_mount("mount --bind")
    ws = build_demo_workspace(str(tmp_path / "ws"))
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "precious.txt").write_text("keep me\n")
    (outside / "sub" / "more.bin").write_bytes(b"x" * 2048)
    point = Path(ws.output_dir) / "mnt"
    point.mkdir()
    assert os.stat(outside).st_dev == os.stat(point).st_dev  # the case st_dev alone cannot see
    with mounted(["--bind", str(outside)], point):
        code = main(["demo", ws.root, "--no-tui"])
        err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err == [f"error: {point}: a mount point inside the demo workspace; unmount it or choose another DIR"]
    assert (outside / "precious.txt").read_text() == "keep me\n"
    assert (outside / "sub" / "more.bin").stat().st_size == 2048
    assert (Path(ws.output_dir) / "checkpoint-300").is_dir()  # refused before anything was removed
