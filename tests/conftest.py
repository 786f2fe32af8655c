"""Shared pytest configuration and fixtures.

- ``async def`` tests run under ``asyncio.run`` (the console tests drive ``App.run_test()``;
  no async plugin is needed).
- ``cli``: run ``fvconsole`` in this process, ``cli(argv)`` → ``CliResult`` (unpacks as
  ``code, out, err``); a subprocess is ``reliability.harness.run_cli``.
- ``fake_srun``: the stand-in ``srun`` of tests/slurm_cluster.py in a fresh bin dir;
  ``srun_on_path`` also puts it first on PATH.

Plain helpers live in modules named after what they hold: ``migration_runs`` (real legacy
runs, requests, plans, migrate/verify command lines), ``fastvideo_reference`` (the
independent FastVideo oracle), ``reliability.harness`` (tree digests, CLI runs, the error
contract), ``slurm_cluster``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from reliability.harness import CliResult, run_inproc
from slurm_cluster import write_fake_srun


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test function to completion with asyncio."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[[Sequence[str]], CliResult]:
    """``cli(argv)``: ``fvconsole.cli.main(argv)`` in this process, its exit code and output."""
    return lambda argv: run_inproc(argv, capsys)


@pytest.fixture
def pin_after_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[[Path, str], None]]:
    """``pin(entry_dir, name)``: make that file of the entry immutable (``chattr +i``) right after
    eviction's removability check passed for it, before the hiding rename: the one way a removal
    can still fail part-way (the file changed after the check). Skips where chattr cannot work."""
    import glob
    import shutil
    import subprocess

    from fvconsole.core.cache import evict

    def chattr(flag: str, path: str) -> bool:
        return subprocess.run(["chattr", flag, path], capture_output=True).returncode == 0

    pins: dict[str, tuple[Path, str]] = {}
    real = evict.removal_skip

    def check_then_pin(key: str, path: str):
        found = real(key, path)
        if key in pins and found is None:
            assert chattr("+i", os.path.join(path, pins[key][1]))
        return found

    def pin(entry: Path, name: str) -> None:
        probe = entry.parent / ".chattr-probe"
        probe.write_bytes(b"")
        ok = shutil.which("chattr") is not None and chattr("+i", str(probe)) and chattr("-i", str(probe))
        probe.unlink()
        if not ok:
            pytest.skip("chattr +i is not available here (needs root and a supporting filesystem)")
        pins[entry.name] = (entry.parent, name)
        monkeypatch.setattr(evict, "removal_skip", check_then_pin)

    yield pin
    for key, (root, name) in pins.items():
        for path in [str(root / key / name), *glob.glob(str(root / f".evicting-{key}-*" / name))]:
            if os.path.exists(path):
                chattr("-i", path)


@pytest.fixture
def fake_srun(tmp_path: Path) -> str:
    return write_fake_srun(tmp_path / "bin")


@pytest.fixture
def srun_on_path(fake_srun: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PATH", os.path.dirname(fake_srun) + os.pathsep + os.environ["PATH"])
    return fake_srun


@pytest.fixture(scope="session", autouse=True)
def _private_journal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The whole session (module fixtures and the processes tests start included) journals
    into a temp dir, never into ~/.local/state: executed migrations and evictions append there."""
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        patch.setenv("XDG_CACHE_HOME", str(state / "cache"))  # checkpoints ls remembers DCP verdicts there
        patch.setenv("FVCONSOLE_JOURNAL", str(state / "fvconsole" / "journal.jsonl"))
        yield
