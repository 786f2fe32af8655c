"""Issue 37 item 5: what cannot be read is kept and said.

Run as a real unprivileged user (``nobody`` through ``setpriv`` when the suite runs as root, as CI
does; the suite's own user otherwise): a mode-000 checkpoint, the newest complete one, is listed
as unreadable by ``checkpoints ls`` (which goes on with the rest), kept by a prune saying why, and
does not count as complete, so the newest *readable* complete checkpoint stays protected.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability.harness import cli_env
from retention_runs import DAY, make_checkpoint

NOBODY = 65534


def _as_user() -> list[str]:
    """The command prefix that runs a child as an unprivileged user (skips when there is none)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed: no unprivileged user to run as")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@pytest.fixture()
def out() -> Iterator[Path]:
    """An output dir an unprivileged user owns; checkpoint-400 (the newest complete one) mode 000."""
    base = Path(tempfile.mkdtemp(prefix="fv-unreadable-", dir="/tmp"))
    os.chmod(base, 0o755)
    out = base / "out"
    out.mkdir()
    for step, days in ((100, 10), (200, 9), (300, 8), (400, 3)):
        make_checkpoint(out, step, age=days * DAY)
    make_checkpoint(out, 350, complete=False, age=5 * DAY)
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(base):
            for name in (root, *(os.path.join(root, n) for n in dirs + files)):
                os.chown(name, NOBODY, NOBODY)
    os.chmod(out / "checkpoint-400", 0)
    try:
        yield out
    finally:
        os.chmod(out / "checkpoint-400", 0o755)
        shutil.rmtree(base)


def run_as_user(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run([*_as_user(), sys.executable, "-m", "fvconsole", *argv], cwd=cwd,
                          env=cli_env({"FVCONSOLE_DCP_CACHE": "off", "HOME": str(cwd)}),
                          capture_output=True, text=True, timeout=240)
    return proc.returncode, proc.stdout, proc.stderr


def test_checkpoints_ls_lists_an_unreadable_checkpoint_and_goes_on(out: Path) -> None:
    code, stdout, err = run_as_user(["checkpoints", "ls", str(out), "--json"], out.parent)
    assert code == 0, err
    listed = {c["step"]: c for c in json.loads(stdout)["checkpoints"]}
    assert sorted(listed) == [100, 200, 300, 350, 400]
    assert listed[400]["complete"] is False and "Permission denied" in listed[400]["unreadable"]
    assert all(listed[s]["unreadable"] is None for s in (100, 200, 300, 350))
    assert [listed[s]["complete"] for s in (100, 200, 300, 350)] == [True, True, True, False]
    code, stdout, err = run_as_user(["checkpoints", "ls", str(out)], out.parent)
    assert code == 0, err
    assert "checkpoint-400" in stdout and "cannot be read (Permission denied)" in err


def test_a_prune_keeps_it_saying_why_and_protects_the_newest_readable_complete_one(out: Path) -> None:
    argv = ["checkpoints", "prune", str(out), "--keep-last", "1", "--incomplete", "--json"]
    code, stdout, err = run_as_user(argv, out.parent)
    assert code == 0, err
    plan = json.loads(stdout)
    kept = {k["step"]: k["reason"] for k in plan["kept"]}
    assert sorted(kept) == [300, 400]
    assert kept[400].startswith("cannot be read (Permission denied): never deleted")
    assert kept[300].startswith("the newest complete checkpoint")
    assert [d["step"] for d in plan["delete"]] == [350, 200, 100]
    code, stdout, err = run_as_user([*argv, "--yes", "--no-journal"], out.parent)
    assert code == 0, err
    assert [r["step"] for r in json.loads(stdout)["removed"]] == [350, 200, 100]
    os.chmod(out / "checkpoint-400", 0o755)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["checkpoint-300",
                                                                                    "checkpoint-400"]
    assert (out / "checkpoint-400" / "dcp" / ".metadata").is_file()
