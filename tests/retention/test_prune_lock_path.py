"""Issue 37 item 1: a lock names the real directory, not the path it was reached by.

Real processes: one holds an output dir's lock through one path (a prune's or a migration's
lock, in a child process), the other tries through another path to the same directory (a
symlink, ``~``) with ``checkpoints prune --yes`` and is refused; nothing is removed. And
``prune '~/out' --yes`` takes the lock beside the real directory, not under ``CWD/~``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from retention_runs import DAY, make_checkpoint

from fvconsole.core.shared.locks import FileLock

HOLD = ("import sys\nfrom fvconsole.core.{module} import {function}\n"
        "lock = {function}(sys.argv[1])\nlock.acquire()\nprint('held', flush=True)\nsys.stdin.read()\n"
        "lock.release()\n")


def _run(tmp_path: Path, steps: tuple[int, ...] = (100, 200, 300)) -> Path:
    out = tmp_path / "runs" / "out"
    out.mkdir(parents=True)
    for i, step in enumerate(steps):
        make_checkpoint(out, step, age=(10 - i) * DAY)
    return out


@contextmanager
def holding(path: Path, module: str, function: str) -> Iterator[subprocess.Popen[str]]:
    """A child process holding ``function(path)``'s lock until the block ends."""
    code = HOLD.format(module=module, function=function)
    with subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
            yield proc
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)


def _prune(path: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fvconsole", "checkpoints", "prune", path, "--keep-last", "1",
                           "--yes", "--no-journal"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=cwd)


@pytest.mark.parametrize(("held_by", "module", "function"), [
    ("a prune", "retention.locked", "prune_lock"),
    ("a migration", "migration.output_dir", "migration_lock"),
])
def test_a_prune_through_a_symlink_is_refused_while_the_real_dir_is_locked(tmp_path: Path, held_by: str,
                                                                            module: str, function: str) -> None:
    out = _run(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(out)
    with holding(out, module, function):
        done = _prune(str(alias))
        assert done.returncode == 1, (held_by, done.stdout, done.stderr)
        assert "holds the lock" in done.stderr and str(out.parent / ".out.fvconsole-lock") in done.stderr
        assert sorted(p.name for p in out.iterdir()) == ["checkpoint-100", "checkpoint-200", "checkpoint-300"]
    assert not (tmp_path / ".alias.fvconsole-lock").exists()


def test_a_prune_of_the_real_dir_is_refused_while_a_symlink_holds_it(tmp_path: Path) -> None:
    out = _run(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(out)
    with holding(alias, "retention.locked", "prune_lock"):
        assert (out.parent / ".out.fvconsole-lock").is_file()
        done = _prune(str(out))
        assert done.returncode == 1 and "holds the lock" in done.stderr, (done.stdout, done.stderr)
        assert len(list(out.iterdir())) == 3


def test_a_prune_of_a_tilde_path_takes_the_real_dirs_lock(tmp_path: Path) -> None:
    out = _run(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {"HOME": str(out.parent)}
    with holding(out, "retention.locked", "prune_lock"):
        refused = _prune("~/out", env, cwd)
        assert refused.returncode == 1 and "holds the lock" in refused.stderr, (refused.stdout, refused.stderr)
    done = _prune("~/out", env, cwd)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-300"]
    assert list(cwd.iterdir()) == [], "a '~' directory was made in the working directory"


def test_every_path_to_a_directory_names_one_lock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "data" / "out"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "data")
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = str(tmp_path / "data" / ".out.fvconsole-lock")
    for spelling in (str(real), str(tmp_path / "link" / "out"), "~/data/out", "~/link/out/", str(real) + "/."):
        assert FileLock.beside(spelling, ".fvconsole-lock", what="w").path == expected, spelling
