"""Issue 31 items 1-2: each retention rule, with the expected sets written by hand.

Output dirs of real ``checkpoint-<step>`` directories (``retention_runs``), judged by
``plan_prune`` on a real scan; a real process holds a file open for the in-use rule, a real
migration publishes the sidecar set for the published-set rule.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from retention_runs import DAY, make_checkpoint

from fvconsole.core.retention import PruneRules, plan_prune, scan_output_dir
from fvconsole.core.shared.process_use import ProcessUse


def judge(out: Path, **rules) -> tuple[list[int], list[int]]:
    """(steps deleted, steps kept) by ``rules``; no process holds anything (a clean pass over /proc)."""
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(**rules))
    return sorted(d.step for d in plan.delete), sorted(k.step for k in plan.kept)


@pytest.fixture()
def out(tmp_path: Path) -> Path:
    """Complete 100..600 (ages 10, 9, 8, 3, 2, 1 days), interrupted 350 (5 days) and 700 (1 minute)."""
    out = tmp_path / "out"
    out.mkdir()
    for step, days in ((100, 10), (200, 9), (300, 8), (400, 3), (500, 2), (600, 1)):
        make_checkpoint(out, step, age=days * DAY)
    make_checkpoint(out, 350, complete=False, age=5 * DAY)
    make_checkpoint(out, 700, complete=False, age=60)
    return out


ALL = [100, 200, 300, 350, 400, 500, 600, 700]


def test_no_selector_deletes_nothing(out: Path) -> None:
    assert judge(out) == ([], ALL)
    assert judge(out, keep_every=200) == ([], ALL)


def test_keep_last_counts_complete_checkpoints_only(out: Path) -> None:
    assert judge(out, keep_last=2) == ([100, 200, 300, 400], [350, 500, 600, 700])
    assert judge(out, keep_last=4) == ([100, 200], [300, 350, 400, 500, 600, 700])
    assert judge(out, keep_last=10) == ([], ALL)


def test_older_than_alone(out: Path) -> None:
    assert judge(out, older_than=7 * DAY) == ([100, 200, 300], [350, 400, 500, 600, 700])
    # Everything complete is older than 12 hours, but the newest complete checkpoint stays.
    assert judge(out, older_than=DAY / 2) == ([100, 200, 300, 400, 500], [350, 600, 700])


def test_keep_last_and_older_than_must_both_select(out: Path) -> None:
    # Beyond the newest 2 are 100..400; older than 8.5 days only 100 and 200.
    assert judge(out, keep_last=2, older_than=8.5 * DAY) == ([100, 200], [300, 350, 400, 500, 600, 700])
    assert judge(out, keep_last=5, older_than=7 * DAY) == ([100], [200, 300, 350, 400, 500, 600, 700])
    assert judge(out, keep_last=6, older_than=7 * DAY) == ([], ALL)


def test_keep_every_and_keep_only_keep(out: Path) -> None:
    assert judge(out, keep_last=1, keep_every=200) == ([100, 300, 500], [200, 350, 400, 600, 700])
    assert judge(out, keep_last=1, keep_steps=frozenset({100, 300})) == ([200, 400, 500], [100, 300, 350, 600, 700])
    assert judge(out, keep_last=1, keep_every=300, keep_steps=frozenset({100})) == (
        [200, 400, 500], [100, 300, 350, 600, 700])


def test_incomplete_alone_selects_interrupted_saves_with_grace_for_the_newer_one(out: Path) -> None:
    # 350 is older than the newest complete checkpoint: no grace. 700 is newer and a minute old.
    assert judge(out, incomplete=True) == ([350], [100, 200, 300, 400, 500, 600, 700])
    assert judge(out, incomplete=True, grace=30) == ([350, 700], [100, 200, 300, 400, 500, 600])
    assert judge(out, keep_last=1, incomplete=True, grace=0) == ([100, 200, 300, 350, 400, 500, 700], [600])
    # --keep keeps an interrupted save too; --keep-last never selects one.
    assert judge(out, incomplete=True, grace=0, keep_steps=frozenset({350})) == ([700], [100, 200, 300, 350, 400,
                                                                                        500, 600])
    assert judge(out, keep_last=1) == ([100, 200, 300, 400, 500], [350, 600, 700])


def test_the_newest_complete_checkpoint_is_never_deleted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    make_checkpoint(out, 10, age=30 * DAY)
    make_checkpoint(out, 20, age=20 * DAY)
    make_checkpoint(out, 30, complete=False, age=10 * DAY)
    assert judge(out, older_than=1, incomplete=True, grace=0) == ([10, 30], [20])
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(older_than=1))
    [newest] = [k for k in plan.kept if k.step == 20]
    assert newest.why[0].code == "keep.newest_complete"
    assert newest.to_json()["reason"].startswith("the newest complete checkpoint")


def test_only_interrupted_saves(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    make_checkpoint(out, 10, complete=False, age=3 * DAY)
    make_checkpoint(out, 20, complete=False, age=60)
    assert judge(out, keep_last=1, incomplete=True) == ([10], [20])


def test_a_symlinked_checkpoint_and_other_names_are_never_touched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    make_checkpoint(elsewhere, 50, age=30 * DAY)
    (out / "checkpoint-50").symlink_to(elsewhere / "checkpoint-50")
    make_checkpoint(out, 60, age=20 * DAY)
    make_checkpoint(out, 70, age=10 * DAY)
    (out / "checkpoint-final").mkdir()
    (out / "checkpoint-80.bak").mkdir()
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(older_than=DAY))
    assert [d.step for d in plan.delete] == [60]
    assert [(k.step, k.why[0].code) for k in plan.kept] == [(70, "keep.newest_complete"), (50, "keep.symlink")]


def test_a_checkpoint_held_open_by_a_live_process_is_kept_naming_the_pid(out: Path) -> None:
    held = out / "checkpoint-100" / "dcp" / "__0_0.distcp"
    holder = subprocess.Popen([sys.executable, "-c", "import sys,time; f=open(sys.argv[1],'rb'); "
                               "print('open', flush=True); time.sleep(60)", str(held)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"open"
        plan = plan_prune(scan_output_dir(str(out)), PruneRules(keep_last=1))
        assert sorted(d.step for d in plan.delete) == [200, 300, 400, 500]
        [kept] = [k for k in plan.kept if k.step == 100]
        assert kept.why[0].code == "keep.in_use" and kept.why[0].value("pid") == str(holder.pid)
        assert f"by pid {holder.pid}" in kept.to_json()["reason"]
    finally:
        holder.kill()
        holder.wait()


def test_a_checkpoint_that_is_a_mount_point_is_kept(out: Path) -> None:
    from mounts import tmpfs

    with tmpfs(out / "checkpoint-200", 1 << 20):
        plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(keep_last=1))
        [kept] = [k for k in plan.kept if k.step == 200]
        assert kept.why[0].code == "keep.mounted" and "mount point" in kept.reason
        assert sorted(d.step for d in plan.delete) == [100, 300, 400, 500]


def test_the_newest_resumable_checkpoints_published_set_is_kept(tmp_path: Path, cli) -> None:
    """A legacy checkpoint resumes on 4 ranks only with its published set: while it is the newest
    resumable state, it stays, although newer (legacy, unmigrated) checkpoints exist."""
    from migration_runs import migrate_argv, small_run

    run = small_run(tmp_path / "run", steps=(2, 4, 6))
    accum = run.config["training"]["loop"]["gradient_accumulation_steps"]
    sidecars = os.path.join(run.output_dir, "dataloader-state", "checkpoint-4")
    code, _, err = cli(migrate_argv(run.config_path, run.checkpoint(4), sidecars, step=4, world=4,
                                    consumed=4 * accum, extra=("--yes", "--no-journal")))
    assert code == 0, err
    out = Path(run.output_dir)
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(keep_last=1))
    assert [d.step for d in plan.delete] == [2]
    [published] = [k for k in plan.kept if k.step == 4]
    assert published.why[0].code == "keep.published" and sidecars in published.reason
    # Once a newer checkpoint has its own published set, the older one's is no longer the newest.
    sidecars6 = os.path.join(run.output_dir, "dataloader-state", "checkpoint-6")
    code, _, err = cli(migrate_argv(run.config_path, run.checkpoint(6), sidecars6, step=6, world=4,
                                    consumed=6 * accum, extra=("--yes", "--no-journal")))
    assert code == 0, err
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(keep_last=1))
    assert [d.step for d in plan.delete] == [4, 2]
    assert [k.why[0].code for k in plan.kept] == ["keep.newest_complete"]


def test_the_json_shape(out: Path) -> None:
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse(), now=time.time()), PruneRules(keep_last=5))
    data = plan.to_json()
    assert data["kept"][0] == {"step": 700, "path": str(out / "checkpoint-700"), "bytes": data["kept"][0]["bytes"],
                               "reason": "interrupted save; --incomplete would select it"}
    assert data["kept"][0]["bytes"] == sum(p.stat().st_size for p in (out / "checkpoint-700").rglob("*") if p.is_file())
    [gone] = data["delete"]
    assert set(gone) == {"step", "path", "bytes", "reason", "warnings"} and gone["step"] == 100
    assert gone["bytes"] == sum(p.stat().st_size for p in (out / "checkpoint-100").rglob("*") if p.is_file())
    assert data["freed_bytes"] == gone["bytes"]


def test_marked_checkpoints_go_under_the_rules_that_always_hold(out: Path) -> None:
    """The console's marks select by step; the newest complete checkpoint and a fresh interrupted save stay."""
    assert judge(out, marked=frozenset({100, 400, 600, 700})) == ([100, 400], [200, 300, 350, 500, 600, 700])
    plan = plan_prune(scan_output_dir(str(out), use=ProcessUse()), PruneRules(marked=frozenset({350, 600})))
    assert [(d.step, d.why[0].code) for d in plan.delete] == [(350, "prune.marked")]
    assert [k.why[0].code for k in plan.kept if k.step == 600] == ["keep.newest_complete"]
