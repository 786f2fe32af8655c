"""Issue 19 item 2: before renaming an entry to ``.evicting-*``, eviction checks it can remove all of it.

We run as root, which ignores file modes and the sticky bit, so each eviction runs in a
subprocess without the capabilities that let root do that (CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH as in ``test_permissions.py``; CAP_FOWNER too for the sticky bit).
Immutable files are real ``chattr +i`` files. Skipped with the reason where that is impossible.
Invariants: the entry is skipped "not removable by <user>: <path> (why)", in the dry run too;
nothing of it is renamed or removed; the rest of the cache is evicted as usual; exit 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import CliResult, cli_env, digest_diff, tree_digest

DAY = 86400
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH, _CAP_FOWNER = 1, 2, 3
ME = pwd.getpwuid(os.geteuid()).pw_name


def _drop(*caps: int):
    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in caps:
            if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), "prctl(PR_CAPBSET_DROP)")
    return preexec


NO_DAC = _drop(_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH)
NO_DAC_NO_FOWNER = _drop(_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH, _CAP_FOWNER)


def evict(root: Path, *extra: str, preexec=None) -> CliResult:
    argv = ("cache", "evict", str(root), "--older-than", "1d", "--json", *extra)
    proc = subprocess.run([sys.executable, "-m", "fvconsole", *argv], capture_output=True, text=True,
                          env=cli_env(), timeout=240, preexec_fn=preexec)
    return CliResult(argv, proc.returncode, proc.stdout, proc.stderr)


def _entry(root: Path, seed: int) -> Path:
    from fvconsole.demo.cache_builders import write_cache_entry

    return Path(write_cache_entry(root, seed=seed, num_shards=2, tensor_bytes=1024,
                                  last_used=time.time() - 3 * DAY))


def _cache(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A world-writable root (0777) with two old entries: (root, the one made unremovable, an ordinary one)."""
    root = tmp_path / "cache"
    victim, ordinary = _entry(root, seed=1), _entry(root, seed=2)
    os.chmod(root, 0o777)
    return root, victim, ordinary


def _skips(result: CliResult) -> dict[str, str]:
    return {s["key"]: s["reason"] for s in json.loads(result.stdout)["skipped"]}


def _needs_cap_drop(preexec) -> None:
    if os.geteuid() != 0:
        pytest.skip("these cases drop root's capabilities; run as root")
    probe = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=preexec, capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot drop capabilities here")


@contextlib.contextmanager
def chmod(path: Path, bits: int) -> Iterator[None]:
    old = os.stat(path).st_mode & 0o7777
    os.chmod(path, bits)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path, old)


def _assert_skipped_untouched(root: Path, victim: Path, ordinary: Path, before: dict, result: CliResult,
                              blocked: Path, why: str) -> None:
    assert result.returncode == 0, result.describe()
    assert _skips(result)[victim.name] == f"not removable by {ME}: {blocked} ({why})"
    assert sorted(os.listdir(root)) == [victim.name], "renamed, or the ordinary entry was not evicted"
    assert digest_diff(before, tree_digest(victim)) == [], "something of the unremovable entry was touched"
    assert not ordinary.exists()


@pytest.mark.fault("permissions", "evict entries this user cannot empty (0777 root, read-only entry)")
def test_an_entry_this_user_cannot_empty_is_skipped_before_the_rename(tmp_path: Path, trials) -> None:
    _needs_cap_drop(NO_DAC)
    root, victim, ordinary = _cache(tmp_path)
    with chmod(victim, 0o555):
        before = tree_digest(victim)
        dry = evict(root, preexec=NO_DAC)
        assert dry.returncode == 0, dry.describe()
        assert _skips(dry)[victim.name] == f"not removable by {ME}: {victim} (no write permission)"
        assert [e["key"] for e in json.loads(dry.stdout)["evict"]] == [ordinary.name]
        result = evict(root, "--yes", preexec=NO_DAC)
        _assert_skipped_untouched(root, victim, ordinary, before, result, victim, "no write permission")
    trials.add("skipped before the rename")


@pytest.mark.fault("permissions", "evict an entry with an unwritable directory deep inside")
def test_an_unwritable_subdirectory_is_named(tmp_path: Path, trials) -> None:
    _needs_cap_drop(NO_DAC)
    root, victim, ordinary = _cache(tmp_path)
    deep = victim / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "f.bin").write_bytes(b"x" * 100)
    old = time.time() - 3 * DAY  # not "being written" (the grace period looks at mtimes)
    for path in (deep / "f.bin", deep, deep.parent, victim):
        os.utime(path, (old, old))
    with chmod(deep, 0o500):
        before = tree_digest(victim)
        result = evict(root, "--yes", preexec=NO_DAC)
        _assert_skipped_untouched(root, victim, ordinary, before, result, deep, "no write permission")
    trials.add("skipped before the rename")


@pytest.mark.fault("permissions", "evict another user's entry in a sticky root (mode 1777)")
def test_sticky_root_entries_of_another_user_are_skipped(tmp_path: Path, trials) -> None:
    _needs_cap_drop(NO_DAC_NO_FOWNER)
    root, victim, ordinary = _cache(tmp_path)
    nobody = pwd.getpwnam("nobody").pw_uid
    os.chown(root, nobody, -1)  # a shared root someone else owns, like /tmp
    os.chmod(root, 0o1777)
    for dirpath, dirnames, filenames in os.walk(victim):  # the victim belongs to that other user
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), nobody, -1, follow_symlinks=False)
    os.chown(victim, nobody, -1)
    os.chmod(victim, 0o777)  # even a world-writable entry: the sticky bit forbids removing it
    for child in victim.iterdir():
        if child.is_dir():
            child.chmod(0o777)
    before = tree_digest(victim)
    result = evict(root, "--yes", preexec=NO_DAC_NO_FOWNER)
    _assert_skipped_untouched(root, victim, ordinary, before, result, victim,
                              "owned by another user in a sticky directory")
    trials.add("skipped before the rename")


@pytest.mark.fault("permissions", "evict an entry holding an immutable file (chattr +i)")
def test_an_immutable_file_is_skipped_before_the_rename(tmp_path: Path, trials) -> None:
    root, victim, ordinary = _cache(tmp_path)
    frozen = next(p for p in sorted(victim.iterdir()) if p.is_file())
    if shutil.which("chattr") is None:
        pytest.skip("no chattr(1)")
    proc = subprocess.run(["chattr", "+i", str(frozen)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot set the immutable flag here: {proc.stderr.strip()}")
    try:
        before = tree_digest(victim)
        dry = evict(root)
        assert _skips(dry)[victim.name] == f"not removable by {ME}: {frozen} (immutable (chattr +i))"
        result = evict(root, "--yes")
        _assert_skipped_untouched(root, victim, ordinary, before, result, frozen, "immutable (chattr +i)")
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], capture_output=True, check=False)
    trials.add("skipped before the rename")
