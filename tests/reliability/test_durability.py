"""How `migrate --yes` makes a staged sidecar set durable, watched at the syscall level (strace -y).

On a local filesystem fvconsole trusts with syncfs (ext4, XFS, Btrfs, F2FS, tmpfs; Linux >= 5.8)
one ``syncfs`` on the staging dir covers every sidecar before the receipt is written; with
``FVCONSOLE_DURABILITY=fsync`` each sidecar is fsynced instead; where ``syncfs`` is unavailable
at run time (ENOSYS, as a seccomp filter or a sandbox kernel answers; injected by strace) each
sidecar is fsynced by name; a ``syncfs`` that reports a writeback error (EIO, injected) fails
the run with the output dir unchanged and the staging dir removed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fvconsole.core.shared import durable

from .harness import (
    CliResult,
    assert_clean_error,
    cli_env,
    digest_diff,
    run_inproc,
    strace_available,
    tree_digest,
)
from .workspace import MigrationWorkspace

pytestmark = pytest.mark.skipif(strace_available() is not None, reason=str(strace_available()))

SIDECAR = re.compile(r"dataloader_state_rank\d+\.pt")


@dataclass(frozen=True)
class Traced:
    result: CliResult
    calls: list[tuple[str, str, str]]  # (syscall, fd path, result)

    @property
    def returncode(self) -> int:
        return self.result.returncode

    @property
    def stderr(self) -> str:
        return self.result.stderr

    def paths(self, syscall: str) -> list[str]:
        return [path for name, path, _ in self.calls if name == syscall]

    def sidecar_fsyncs(self, *, temp: bool) -> list[str]:
        """Paths of fsynced sidecars: their hidden temp files, or the files by their own name."""
        names = [os.path.basename(p) for p in self.paths("fsync")]
        return [n for n in names if SIDECAR.search(n) and n.startswith(".") == temp]


def traced_migrate(ws: MigrationWorkspace, out: Path, trace: Path, *, inject: str | None = None,
                   env: dict[str, str] | None = None) -> Traced:
    """``fvconsole migrate --yes`` under ``strace -f -y``: exit code, stderr, and its sync calls."""
    cmd = ["strace", "-f", "-qq", "-y", "-o", str(trace), "-e", "trace=fsync,fdatasync,syncfs"]
    if inject:
        cmd += ["-e", f"inject=syncfs:error={inject}"]
    argv = tuple(map(str, ws.migrate_args(out)))
    proc = subprocess.run([*cmd, sys.executable, "-m", "fvconsole", *argv], env=cli_env(env),
                          capture_output=True, text=True, timeout=240)
    calls = []
    for line in trace.read_text().splitlines():
        # "fsync(5</path>) = 0", or from concurrent threads "fsync(5</path> <unfinished ...>"
        # and later "<... fsync resumed>) = 0" (the result is then not needed).
        match = re.search(r"\b(fsync|fdatasync|syncfs)\(\d+<([^>]*)>(?:\)\s+=\s+(.*))?", line)
        if match:
            calls.append((match.group(1), match.group(2), match.group(3) or ""))
    return Traced(CliResult(argv, proc.returncode, proc.stdout, proc.stderr), calls)


def require_syncfs_here(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        chosen = durable.choose(fd)
    finally:
        os.close(fd)
    if chosen.mode != "syncfs":
        pytest.skip(f"syncfs is not used on {path}: {chosen.reason}")


@pytest.mark.fault("durability", "one syncfs makes every sidecar durable before the receipt (trusted local fs)")
def test_one_syncfs_covers_the_set(ws: MigrationWorkspace, tmp_path: Path, capsys, trials) -> None:
    require_syncfs_here(tmp_path)
    out = tmp_path / "state"
    run = traced_migrate(ws, out, tmp_path / "trace.txt")
    assert run.returncode == 0, run.stderr
    synced = run.paths("syncfs")
    assert len(synced) == 1 and ".fvconsole-staging-" in synced[0], run.calls
    assert run.sidecar_fsyncs(temp=True) == [] and run.sidecar_fsyncs(temp=False) == []
    # The receipt is still written atomically with its own fsync, after the syncfs.
    order = [name if name == "syncfs" else os.path.basename(path) for name, path, _ in run.calls]
    receipt = next(i for i, n in enumerate(order) if n.startswith(".migration_receipt.json."))
    assert order.index("syncfs") < receipt
    assert run_inproc(ws.verify_args(out), capsys).returncode == 0
    trials.add("one syncfs, verified")


@pytest.mark.fault("durability", "FVCONSOLE_DURABILITY=fsync: every sidecar fsynced, no syncfs")
def test_forced_per_file_fsync(ws: MigrationWorkspace, tmp_path: Path, capsys, trials) -> None:
    out = tmp_path / "state"
    run = traced_migrate(ws, out, tmp_path / "trace.txt", env={durable.ENV_DURABILITY: "fsync"})
    assert run.returncode == 0, run.stderr
    assert run.paths("syncfs") == []
    assert len(set(run.sidecar_fsyncs(temp=True))) == ws.world
    assert run_inproc(ws.verify_args(out), capsys).returncode == 0
    trials.add("per-file fsync, verified")


@pytest.mark.fault("durability", "syncfs unavailable at run time (ENOSYS injected): each sidecar fsynced instead")
def test_syncfs_unavailable_falls_back_to_fsync(ws: MigrationWorkspace, tmp_path: Path, capsys, trials) -> None:
    require_syncfs_here(tmp_path)
    out = tmp_path / "state"
    run = traced_migrate(ws, out, tmp_path / "trace.txt", inject="ENOSYS")
    assert run.returncode == 0, run.stderr
    assert [result for name, _, result in run.calls if name == "syncfs"] == [
        "-1 ENOSYS (Function not implemented) (INJECTED)"]
    assert sorted(run.sidecar_fsyncs(temp=False)) == sorted(f"dataloader_state_rank{r}.pt" for r in range(ws.world))
    assert run_inproc(ws.verify_args(out), capsys).returncode == 0
    trials.add("fell back to fsync, verified")


@pytest.mark.fault("durability", "syncfs reports a writeback error (EIO injected): exit 3, nothing published")
def test_syncfs_error_publishes_nothing(ws: MigrationWorkspace, tmp_path: Path, trials) -> None:
    require_syncfs_here(tmp_path)
    out = tmp_path / "state"
    checkpoint = tree_digest(ws.checkpoint)
    run = traced_migrate(ws, out, tmp_path / "trace.txt", inject="EIO")
    line = assert_clean_error(run.result, codes=(3,), names=[str(out)], progress_ok=True)
    assert "making the sidecars durable" in line and "not changed" in line, line
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if ".fvconsole-" in p.name] == []  # no staging dir, no lock
    assert run.sidecar_fsyncs(temp=False) == []  # an I/O error is not "unavailable": no fallback
    assert digest_diff(checkpoint, tree_digest(ws.checkpoint)) == []
    trials.add("exit 3, output dir unchanged")
