"""core.shared.durable: which filesystems get one syncfs, and which get an fsync per file (real mounts)."""

from __future__ import annotations

import os

import pytest

from fvconsole.core.shared import durable


def choose_for(path: str) -> durable.Durability:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return durable.choose(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("release", "expected"),
    [("6.18.44-fc-v669", (6, 18)), ("5.8.0", (5, 8)), ("4.18.0-305.el8.x86_64", (4, 18)), ("5.10-rc1", (5, 10)),
     ("weird", (0, 0)), ("", (0, 0))],
)
def test_kernel_version(release: str, expected: tuple[int, int]) -> None:
    assert durable.kernel_version(release) == expected


@pytest.mark.skipif(durable.kernel_version() < durable.MIN_KERNEL, reason="kernel older than 5.8: always fsync")
def test_tmpfs_gets_syncfs_and_procfs_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(durable.ENV_DURABILITY, raising=False)
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    assert choose_for("/dev/shm") == durable.Durability("syncfs", "tmpfs: one syncfs")
    proc = choose_for("/proc")  # procfs (0x9fa0) is nothing syncfs is trusted with
    assert proc.mode == "fsync" and "0x9fa0" in proc.reason and proc.per_file_fsync


def test_operator_can_force_per_file_fsync(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(durable.ENV_DURABILITY, "fsync")
    assert choose_for(str(tmp_path)) == durable.Durability("fsync", "FVCONSOLE_DURABILITY=fsync")


def test_syncfs_and_fsync_at_on_a_real_directory(tmp_path) -> None:
    (tmp_path / "a").write_bytes(b"x")
    os.symlink(tmp_path / "a", tmp_path / "link")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        durable.syncfs(fd)
        durable.fsync_at(fd, "a")
        with pytest.raises(OSError):
            durable.fsync_at(fd, "link")  # never follows a symlink
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        durable.syncfs(fd)  # closed fd: EBADF is an error, not silently ignored
