"""Shared pytest configuration and fixtures.

- ``async def`` tests run under ``asyncio.run`` (the console tests drive ``App.run_test()``;
  no async plugin is needed).
- ``cli``: run ``fvconsole`` in this process, ``cli(argv)`` → ``CliResult`` (unpacks as
  ``code, out, err``); a subprocess is ``reliability.harness.run_cli``.
- ``fake_srun``: the stand-in ``srun`` of tests/slurm_cluster.py in a fresh bin dir;
  ``srun_on_path`` also puts it first on PATH.
- Workspaces, built once per session and shared by every module (building one is a real torch
  DCP save, Parquet and safetensors: seconds each). Tests leave them as they found them: outputs
  go to ``tmp_path``, writes go to a copy; a module that changes its workspace in place (and
  restores it) asks for a private one. ``migration_workspace(world=16, private=False)`` → a legacy run (``reliability.workspace``), ``ws`` the
  default one; ``demo_workspace(relpath="ws")`` → a demo workspace at that relative path,
  ``demo_ws`` the default one. A module needing another world size or path overrides ``ws`` /
  ``demo_ws`` with a one-line fixture calling the factory.

Parallel runs (``-n 3 --dist loadgroup``, pyproject.toml's addopts): the tests of a file that use
a module-scoped fixture run in one worker, so it is built once; every other test is its own
group, so the workers balance; the tests marked ``serial`` (and every ``slurm`` test: one shared
emulated cluster) all run in one worker, one after another (``xdist_group_of``). ``-n 0`` runs
in this process (``--snapshot-update`` needs it; so may a single file).

Plain helpers live in modules named after what they hold: ``console_apps`` (``make_app``, the
console on given paths; ``run_console`` and ``running``, that console started; ``wait_until``, a condition against a deadline;
``work_copy``, a test's own copy of a demo's output dir and cache; ``Notified`` and
``shown_notifications``, its notifications), ``textual_test_private`` (the tests' only uses of
Textual's private API), ``mounts`` (real tmpfs and
bind mounts), ``cache_roots`` (a cache root's refusal in the command line's words),
``lean_checks`` (what a lean install must hold and show),
``migration_runs`` (real legacy
runs, requests, plans, migrate/verify command lines), ``fastvideo_reference`` (the
independent FastVideo oracle), ``reliability.harness`` (tree digests, CLI runs, the error
contract), ``slurm_cluster``, ``suite_timeline`` (with ``FVCONSOLE_TEST_TIMELINE=FILE``, each test's
wall and CPU time, and the summary of a run: docs/development.md, "Suite time").
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from mounts import Mounter, require_mount
from reliability.harness import CliResult, run_inproc
from reliability.workspace import WORLD, MigrationWorkspace, build_migration_workspace
from slurm_cluster import write_fake_srun
from suite_timeline import record

if TYPE_CHECKING:
    from fvconsole.demo.workspace import DemoWorkspace

#: A worker's quiet exit (tests/clean_exit.py).
pytest_plugins = ["clean_exit"]


#: Fixture scopes whose value is built once and shared by the tests of one file (or class). Not
#: "package": grouping by file cannot keep a package's sharing, and the one package fixture
#: (reliability's memory cap) costs nothing to set up again.
SHARED_SCOPES = frozenset({"module", "class"})


def xdist_group_of(item: pytest.Item) -> str:
    """"serial" for the ``serial`` and ``slurm`` tests (one worker, one after another); its file
    for a test that uses a module- (or class-) scoped fixture, so the file's tests share one
    build of it; else the test alone, so the workers balance to the test."""
    if item.get_closest_marker("serial") or item.get_closest_marker("slurm"):
        return "serial"
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    if any(chain and chain[-1].scope in SHARED_SCOPES for chain in defs):
        return item.nodeid.split("::", 1)[0]
    return item.nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its xdist group before xdist reads them (``--dist loadgroup``); without
    ``-n`` the marks do nothing. In a worker, the groups that cannot be split (the serial one,
    then each file sharing a module fixture) come first and the single tests last: xdist hands
    out the groups with the most tests first (its default ``--loadscope-reorder``) and those of
    equal size in this order, so the long indivisible ones start at once and the single tests
    fill the gaps at the end instead of one worker finishing a large file alone."""
    groups = {}
    for item in items:
        groups[item] = xdist_group_of(item)
        item.add_marker(pytest.mark.xdist_group(groups[item]))
    if hasattr(config, "workerinput"):  # the same stable order in every worker, as xdist requires
        rank = {"serial": 0}
        items.sort(key=lambda item: rank.get(groups[item], 1 if groups[item] != item.nodeid else 2))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``FVCONSOLE_TEST_TIMELINE=FILE``: each test's wall and CPU time into FILE
    (tests/suite_timeline.py, which also summarises it); without it, nothing."""
    yield from record(item.nodeid, xdist_group_of(item))


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
def mounter(tmp_path: Path) -> Iterator[Mounter]:
    """``mounter(args, target)``: a real mount (tests/mounts.py); every mount below tmp_path is
    lazily unmounted at teardown. Skips the test where this process may not mount."""
    require_mount()
    mount = Mounter(tmp_path)
    try:
        yield mount
    finally:
        mount.close()


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


@pytest.fixture(scope="session")
def migration_workspace(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., MigrationWorkspace]:
    """``migration_workspace(world=16)``: the session's legacy run of that world size (built on
    first use), shared: never write into it. ``private=True``: a new one for a module that
    writes into its workspace, even temporarily (a rewrite restores the bytes, not the mtimes
    the manifest's source check compares)."""
    built: dict[int, MigrationWorkspace] = {}

    def get(world: int = WORLD, *, private: bool = False) -> MigrationWorkspace:
        if private:
            return build_migration_workspace(tmp_path_factory.mktemp(f"legacy-own-world{world}"), world=world)
        if world not in built:
            built[world] = build_migration_workspace(tmp_path_factory.mktemp(f"legacy-world{world}"), world=world)
        return built[world]

    return get


@pytest.fixture(scope="session")
def ws(migration_workspace: Callable[..., MigrationWorkspace]) -> MigrationWorkspace:
    """The session's legacy run (16 ranks, SP 2, checkpoint-2)."""
    return migration_workspace()


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., DemoWorkspace]:
    """``demo_workspace(relpath="ws")``: the session's demo workspace at ``<tmp>/<relpath>`` (a path
    the console shows; built on first use). Shared: tests that write use ``work_copy``."""
    from fvconsole.demo.workspace import build_demo_workspace

    built: dict[str, DemoWorkspace] = {}

    def get(relpath: str = "ws") -> DemoWorkspace:
        if relpath not in built:
            built[relpath] = build_demo_workspace(str(tmp_path_factory.mktemp("demo") / relpath))
        return built[relpath]

    return get


@pytest.fixture(scope="session")
def demo_ws(demo_workspace: Callable[..., DemoWorkspace]) -> DemoWorkspace:
    """The session's demo workspace at ``<tmp>/ws``."""
    return demo_workspace()
