"""Acceptance 3: migrate into a tiny tmpfs (root only: mounted per test, skipped otherwise).

ENOSPC is made to strike at many different points by pre-filling the filesystem with a
filler file of varying size, and once by running out of inodes. Invariants: exit 0 when
it fits, else exit 1 (refused up front) or 3 (failed part-way) with one clear error line;
never a partially published set, never a staging leftover, a previous set intact.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

import pytest
from mounts import tmpfs

from .harness import assert_clean_error, digest_diff, run_inproc, tree_digest
from .workspace import MigrationWorkspace

FILL_STEPS = 12


def set_size(ws: MigrationWorkspace, scratch: Path) -> int:
    """Bytes a complete set occupies on disk (allocated blocks of sidecars + receipt + dir)."""
    out = scratch / "measure"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from fvconsole.cli import main

        assert main(ws.migrate_args(out)) == 0
    size = sum(p.stat().st_blocks * 512 for p in out.iterdir()) + 4096
    shutil.rmtree(out)
    return size


def fill(mount: Path, nbytes: int) -> None:
    """Occupy ``nbytes`` (or as much as fits) with a filler file."""
    with contextlib.suppress(OSError), open(mount / "filler", "wb") as handle:
        handle.write(b"\0" * nbytes)


def staging(mount: Path) -> list[str]:
    return [p.name for p in mount.iterdir() if ".fvconsole-staging-" in p.name]


def judge(result, out: Path, previous: dict | None, mount: Path) -> str:
    """Check one run on a (nearly) full filesystem; returns the outcome label."""
    if result.returncode == 0:
        verdict = "fits: new set written"
    else:
        line = assert_clean_error(result, codes=(1, 3), names=[str(out), str(mount)], progress_ok=True)
        assert "space" in line.lower() or "ENOSPC" in line or "full" in line.lower(), line
        verdict = f"no space: exit {result.returncode}"
        if previous is None:
            assert not out.exists(), "a failed migration published an output dir"
        else:
            assert tree_digest(out) == previous, "a failed --overwrite damaged the previous set"
    assert staging(mount) == [], f"staging leftovers on the full filesystem: {staging(mount)}"
    return verdict


@pytest.mark.slow
@pytest.mark.fault("disk full", "migrate into a nearly full tmpfs, fresh output dir (fill level swept)")
def test_fresh_migration_on_full_tmpfs(ws: MigrationWorkspace, tmp_path: Path, capsys, trials) -> None:
    need = set_size(ws, tmp_path)
    size = max(need * 3, 64 << 10)
    with tmpfs(tmp_path / "mnt", size) as mount:
        out = mount / "state"
        for i in range(FILL_STEPS):
            free_target = int(need * 2 * (i + 1) / FILL_STEPS)  # from far too little to enough
            shutil.rmtree(out, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                (mount / "filler").unlink()
            fill(mount, os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize - free_target)
            result = run_inproc(ws.migrate_args(out), capsys)
            trials.add(judge(result, out, None, mount))
    assert any(k.startswith("no space") for k in trials.outcomes), trials.outcomes
    assert any(k.startswith("fits") for k in trials.outcomes), trials.outcomes


@pytest.mark.slow
@pytest.mark.fault("disk full", "migrate --overwrite into a nearly full tmpfs holding a previous set")
def test_overwrite_on_full_tmpfs_keeps_previous(ws: MigrationWorkspace, tmp_path: Path, capsys, trials) -> None:
    need = set_size(ws, tmp_path)
    size = max(need * 3, 64 << 10)
    with tmpfs(tmp_path / "mnt", size) as mount:
        out = mount / "state"
        first = run_inproc(ws.migrate_args(out), capsys)
        assert first.returncode == 0, first.describe()
        previous = tree_digest(out)
        for i in range(FILL_STEPS):
            with contextlib.suppress(FileNotFoundError):
                (mount / "filler").unlink()
            free_target = int(need * 2 * (i + 1) / FILL_STEPS)
            fill(mount, os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize - free_target)
            result = run_inproc(ws.migrate_args(out, "--overwrite"), capsys)
            trials.add(judge(result, out, previous, mount))
            previous = tree_digest(out)  # a successful overwrite is the next "previous"
    assert any(k.startswith("no space") for k in trials.outcomes), trials.outcomes
    assert any(k.startswith("fits") for k in trials.outcomes), trials.outcomes


@pytest.mark.fault("disk full", "migrate into a tmpfs with too few inodes / far too little space (quick)")
@pytest.mark.parametrize("shape", ["4 inodes", "16 KiB"])
def test_tiny_tmpfs_quick(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, shape: str) -> None:
    mnt = tmp_path / "mnt"
    ctx = tmpfs(mnt, 4 << 20, "nr_inodes=4") if shape == "4 inodes" else tmpfs(mnt, 16 << 10)
    with ctx:
        out = mnt / "state"
        before = tree_digest(ws.root)
        result = run_inproc(ws.migrate_args(out), capsys)
        assert result.returncode in (1, 3), result.describe()
        trials.add(judge(result, out, None, mnt))
        assert digest_diff(before, tree_digest(ws.root)) == []


def _free(mount: Path) -> tuple[int, int]:
    """(bytes, inodes) free on ``mount``, as statvfs reports them to root (who runs these tests)."""
    st = os.statvfs(mount)
    return st.f_bfree * st.f_frsize, st.f_ffree


@pytest.mark.fault("disk full", "a dry run refuses a full output filesystem exactly as --yes does (issue 29 item 5)")
@pytest.mark.parametrize("shape", ["no bytes", "no inodes"])
def test_a_dry_run_foresees_a_full_filesystem(ws: MigrationWorkspace, tmp_path: Path, capsys, shape: str) -> None:
    mnt = tmp_path / "mnt"
    ctx = tmpfs(mnt, 4 << 20, "nr_inodes=6") if shape == "no inodes" else tmpfs(mnt, 64 << 10)
    with ctx:
        out = mnt / "state"
        if shape == "no bytes":
            fill(mnt, 1 << 30)
        free_bytes, free_inodes = _free(mnt)
        assert (free_bytes if shape == "no bytes" else free_inodes) < ws.world  # too little for the set, by statvfs
        dry = run_inproc(ws.migrate_args(out, yes=False), capsys)
        line = assert_clean_error(dry, codes=(1,), names=[str(out)])
        assert "not enough free space" in line and "inodes" in line
        free_words = "0 B" if shape == "no bytes" else f"{free_inodes} inodes are free"
        assert free_words in line, line
        assert sorted(p.name for p in mnt.iterdir()) == (["filler"] if shape == "no bytes" else [])
        yes = run_inproc(ws.migrate_args(out), capsys)
        assert assert_clean_error(yes, codes=(1,), names=[str(out)]) == line  # refused up front, the same words
        assert sorted(p.name for p in mnt.iterdir()) == (["filler"] if shape == "no bytes" else [])


@pytest.mark.fault("disk full", "dry run and --yes agree at every fill level (issue 29 item 5)")
def test_dry_run_and_yes_agree_at_every_fill_level(ws: MigrationWorkspace, tmp_path: Path, capsys) -> None:
    """What the dry run accepts, --yes writes; what it refuses for room, --yes refuses before writing."""
    need = set_size(ws, tmp_path)
    with tmpfs(tmp_path / "mnt", max(need * 3, 64 << 10)) as mount:
        out = mount / "state"
        verdicts = set()
        for i in range(FILL_STEPS):
            shutil.rmtree(out, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                (mount / "filler").unlink()
            fill(mount, _free(mount)[0] - int(need * 2 * (i + 1) / FILL_STEPS))
            dry = run_inproc(ws.migrate_args(out, yes=False), capsys)
            yes = run_inproc(ws.migrate_args(out), capsys)
            if dry.returncode == 0:
                assert yes.returncode == 0, yes.describe()  # never a part-way failure the dry run did not foresee
                verdicts.add("fits")
            else:
                line = assert_clean_error(dry, codes=(1,), names=[str(out)])
                assert "not enough free space" in line
                assert assert_clean_error(yes, codes=(1,), names=[str(out)]) == line
                assert not out.exists() and staging(mount) == []
                verdicts.add("refused")
        assert verdicts == {"fits", "refused"}
