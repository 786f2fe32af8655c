"""One lock interface (issue 35 item 2): every kind of lock answers probe, acquire and release alike.

Real lock files and real OFD locks (two lock objects in one process exclude each other as two
processes would: an OFD lock belongs to its open file description); expected values written here.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from fvconsole.core.cache.roots import EVICTOR
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.locks import (
    FileLock,
    Lock,
    LockBusy,
    LockMode,
    LockProbe,
    LockState,
    RootLock,
)
from fvconsole.core.shared.reasons import KINDS, Reason


def _kinds(tmp_path: Path) -> dict[str, tuple[Lock, Lock]]:
    """Two locks of one directory, per kind (the second is the one refused)."""
    out = tmp_path / "out"
    root = tmp_path / "wcache"
    out.mkdir()
    root.mkdir()
    lock_file = str(tmp_path / ".out.fvconsole-lock")
    return {
        "file": (FileLock(lock_file, subject=str(out), what="another run holds the lock"),
                 FileLock(lock_file, subject=str(out), what="another run holds the lock")),
        "root": (RootLock(str(root), EVICTOR, command="fvconsole cache evict --yes"),
                 RootLock(str(root), EVICTOR, command="fvconsole cache evict --yes")),
    }


@pytest.mark.parametrize("kind", ["file", "root"])
def test_every_kind_answers_probe_acquire_and_release_alike(tmp_path: Path, kind: str) -> None:
    first, second = _kinds(tmp_path)[kind]
    assert isinstance(first, Lock) and first.mode is LockMode.EXCLUSIVE
    free = second.probe()
    assert isinstance(free, LockProbe) and free.reason is None and free.holder is None
    state = first.acquire(0.0)
    try:
        assert isinstance(state, LockState) and state.held and state.notes == () and state.problem is None
        probe = second.probe(break_stale=True)
        assert probe.holder is not None and probe.holder.pid == os.getpid()
        assert isinstance(probe.reason, Reason) and probe.reason.code in ("lock.alive_not_broken", "lock.evicting")
        with pytest.raises(LockBusy) as refused:
            second.acquire(0.0, break_stale=True)
        why = refused.value.reason
        # The refusal names the holder's host, pid and operation, as data and in its words.
        assert why.code in KINDS and why.value("pid") == str(os.getpid())
        assert why.value("host") == socket.gethostname() and why.value("operation")
        assert f"pid {os.getpid()} on host " in why.cli
    finally:
        assert first.release() is None
    assert second.release() is None  # never taken: nothing to give up
    assert second.acquire().held
    assert second.release() is None


def test_a_release_problem_is_a_reason_of_the_catalogue(tmp_path: Path) -> None:
    lock = _kinds(tmp_path)["file"][0]
    lock.acquire()
    os.unlink(lock.path)
    problem = lock.release()
    assert isinstance(problem, Reason) and problem.code == "lock.gone_at_release"
    assert problem.cli == f"{lock.path}: the lock file had already been removed (by hand?)"


def test_a_root_lock_refuses_with_reasons_not_bare_messages(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(FvError) as refused:
        RootLock(str(missing), EVICTOR).acquire()
    assert refused.value.reason is not None and refused.value.reason.code == "lock.root_missing"
    assert str(refused.value) == f"{missing}: cache root does not exist"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(FvError) as refused:
        RootLock(str(a_file), EVICTOR).acquire()
    assert refused.value.reason is not None and refused.value.reason.code == "lock.root_not_dir"
    root = tmp_path / "wcache"
    root.mkdir()
    os.symlink(tmp_path / "elsewhere", root / EVICTOR.lock_name)
    with pytest.raises(FvError) as refused:
        RootLock(str(root), EVICTOR).acquire()
    assert refused.value.reason is not None and refused.value.reason.code == "lock.file_symlink"
    assert str(refused.value) == (f"{root}: the lock file {root / EVICTOR.lock_name} is a symlink; remove it once "
                                  "no fvconsole run uses it")


def test_cache_evict_help_names_the_lock_for_what_it_is() -> None:
    from fvconsole.cli.cache import EVICT_HELP

    assert "flock" not in EVICT_HELP and "OFD write lock" in EVICT_HELP


def test_no_lock_module_refuses_with_a_bare_message() -> None:
    """Every refusal of the locks door is built from a reason of the catalogue (``FvError.of``, ``LockBusy``):
    an ``FvError("...")`` or ``LockFileRefused("...")`` with a message of its own was a refusal no front end
    could word (the root lock's five f-string refusals)."""
    import ast

    from fvconsole.core.shared import locks

    package = Path(locks.__file__).parent
    bare = []
    for module in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                    "FvError", "LockFileRefused", "UsageError"):
                bare.append(f"{module.name}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert bare == []
    assert len(list(package.glob("*.py"))) >= 8, "the scan looks in the wrong place"


def test_a_signal_while_the_lock_file_is_made_is_acted_on_once_it_is_held(tmp_path: Path) -> None:
    """The lock owns its signal safety (the runner and the migration need no section of their own): a
    SIGTERM that arrives once the lock file is linked, before this object knew it held it, left the file
    behind with nobody to remove it; now it is acted on once ``held`` is set, and ``release`` removes it."""
    import signal

    from fvconsole.core.shared.interrupts import Interrupted, handlers

    path = tmp_path / ".out.fvconsole-lock"

    def step(label: str) -> None:
        if label.startswith("unlink ") and label.endswith(".tmp"):  # the lock file is linked by now
            os.kill(os.getpid(), signal.SIGTERM)

    lock = FileLock(str(path), subject=str(tmp_path / "out"), step=step)
    with handlers():
        with pytest.raises(Interrupted) as stopped:
            lock.acquire()
        assert stopped.value.signum == signal.SIGTERM
        assert lock.held is not None and path.is_file()
        assert lock.release() is None
    assert not path.exists()
