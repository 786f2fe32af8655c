"""Issue 37 item 4: every holder counts, by inode, whatever path it used.

Real processes: one holds a file deep in a checkpoint through a bind mount of the output dir in
a private mount namespace (``unshare -m``: its /proc paths name the bind mount, never the output
dir), one has its working directory inside a checkpoint. Each keeps its checkpoint, in the dry
run and at ``--yes``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from migration_runs import one_json
from retention_runs import DAY, make_checkpoint

from fvconsole.core.retention import PruneRules, plan_prune, scan_output_dir


@pytest.fixture()
def out(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    for step, days in ((100, 10), (200, 9), (300, 3)):
        make_checkpoint(out, step, age=days * DAY)
    deep = out / "checkpoint-200" / "transformer"
    deep.mkdir()
    (deep / "model.safetensors").write_bytes(b"w" * 64)
    return out


def _started(proc: subprocess.Popen) -> None:
    line = proc.stdout.readline() if proc.stdout else b""
    if line.strip() != b"ready":
        proc.kill()
        err = proc.communicate()[1]
        pytest.skip(f"the holder did not start: {err.decode(errors='replace').strip()[-300:]}")


@pytest.fixture()
def bind_mount_holder(out: Path, tmp_path: Path) -> Iterator[subprocess.Popen]:
    """A process in its own mount namespace holding VIEW/checkpoint-200/transformer/model.safetensors,
    VIEW a bind mount of the output dir there (skips without unshare or the privilege to use it)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    view = tmp_path / "view"
    view.mkdir()
    script = ("import sys,time; f=open(sys.argv[1],'rb'); print('ready', flush=True); time.sleep(300)")
    held = view / "checkpoint-200" / "transformer" / "model.safetensors"
    shell = (f"mount --make-rprivate / && mount --bind '{out}' '{view}' && "
             f"exec '{sys.executable}' -c \"{script}\" '{held}'")
    proc = subprocess.Popen(["unshare", "-m", "sh", "-c", shell], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _started(proc)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_file_held_through_a_bind_mount_in_another_mount_namespace_keeps_its_checkpoint(
        out: Path, bind_mount_holder: subprocess.Popen, cli) -> None:
    plan = plan_prune(scan_output_dir(str(out)), PruneRules(keep_last=1))
    [kept] = [k for k in plan.kept if k.step == 200]
    assert kept.why[0].code == "keep.in_use" and kept.why[0].value("pid") == str(bind_mount_holder.pid)
    assert [d.step for d in plan.delete] == [100]
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--keep-last", "1", "--yes", "--json", "--no-journal"])
    assert code == 0, err
    assert [r["step"] for r in one_json(stdout)["removed"]] == [100]
    assert (out / "checkpoint-200" / "transformer" / "model.safetensors").is_file()


def test_a_process_whose_working_directory_is_inside_a_checkpoint_keeps_it(out: Path, cli) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(300)"],
                            cwd=out / "checkpoint-100" / "dcp", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _started(proc)
        code, stdout, err = cli(["checkpoints", "prune", str(out), "--keep-last", "1", "--json"])
        assert code == 0, err
        [kept] = [k for k in one_json(stdout)["kept"] if k["step"] == 100]
        assert kept["reason"].startswith(f"in use: working directory by pid {proc.pid} ")
        code, stdout, err = cli(["checkpoints", "prune", str(out), "--keep-last", "1", "--yes", "--json",
                                 "--no-journal"])
        assert code == 0, err
        assert [r["step"] for r in one_json(stdout)["removed"]] == [200]
        assert (out / "checkpoint-100" / "dcp").is_dir()
    finally:
        proc.kill()
        proc.wait()


def test_the_re_check_finds_a_holder_deep_in_the_tree_that_came_after_the_plan(out: Path) -> None:
    """Held after the plan, by a file below the checkpoint's top and dcp/: renamed back, left in place."""
    from fvconsole.core.retention import execute_prune
    from fvconsole.core.shared.process_use import ProcessUse

    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(keep_last=1))
    assert [d.step for d in plan.delete] == [200, 100]
    held = out / "checkpoint-200" / "transformer" / "model.safetensors"
    proc = subprocess.Popen([sys.executable, "-c", "import sys,time; f=open(sys.argv[1],'rb'); "
                             "print('ready', flush=True); time.sleep(300)", str(held)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _started(proc)
        # The holder's paths name the hidden dir after the rename, by inode they are the same files.
        result = execute_prune(plan)
        assert [r.step for r in result.removed] == [100]
        assert [left.step for left in result.left] == [200] and f"pid {proc.pid}" in result.left[0].why.cli
        assert held.is_file()
    finally:
        proc.kill()
        proc.wait()
