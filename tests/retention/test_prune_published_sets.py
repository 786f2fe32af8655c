"""Issue 37 item 6: a sidecar set published anywhere in the run is found, and a prune that deletes the
checkpoint a set was made for says so.

Real migrations publish real sets (receipt last) into the output dir's own subdirectories: the
default ``dataloader-state/checkpoint-<step>``, ``sidecars-600``-like names at the top, and one
level down in ``dataloader-state/<anything>``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from migration_runs import migrate_argv, one_json, small_run

from fvconsole.core.migration.published import run_sets
from fvconsole.core.retention import PruneRules, plan_prune, scan_output_dir
from fvconsole.core.shared.process_use import ProcessUse


def _publish(cli, run, step: int, where: str) -> str:
    accum = run.config["training"]["loop"]["gradient_accumulation_steps"]
    target = os.path.join(run.output_dir, where)
    code, _, err = cli(migrate_argv(run.config_path, run.checkpoint(step), target, step=step, world=4,
                                    consumed=step * accum, extra=("--yes", "--no-journal")))
    assert code == 0, err
    return target


@pytest.mark.parametrize("where", ["sidecars-4", "dataloader-state/elastic-4"])
def test_a_set_published_outside_dataloader_state_keeps_the_newest_resumable_checkpoint(tmp_path: Path, cli,
                                                                                         where: str) -> None:
    run = small_run(tmp_path / "run", steps=(2, 4, 6))
    sidecars = _publish(cli, run, 4, where)
    plan = plan_prune(scan_output_dir(run.output_dir, use=ProcessUse()), PruneRules(keep_last=1))
    assert [d.step for d in plan.delete] == [2]
    [kept] = [k for k in plan.kept if k.step == 4]
    assert kept.why[0].code == "keep.published" and sidecars in kept.reason


def test_deleting_a_checkpoint_a_set_was_made_for_says_so(tmp_path: Path, cli) -> None:
    run = small_run(tmp_path / "run", steps=(2, 4, 6))
    old = _publish(cli, run, 2, "sidecars-2")
    default = _publish(cli, run, 4, "dataloader-state/checkpoint-4")
    _publish(cli, run, 6, "dataloader-state/checkpoint-6")
    code, stdout, err = cli(["checkpoints", "prune", run.output_dir, "--keep-last", "1", "--json"])
    assert code == 0, err
    plan = one_json(stdout)
    gone = {d["step"]: d for d in plan["delete"]}
    assert sorted(gone) == [2, 4]
    assert gone[2]["warnings"] == [f"its sidecar set {old} is left without its checkpoint"]
    assert gone[4]["warnings"] == [f"its sidecar set {default} is left without its checkpoint"]
    assert f"{gone[2]['path']}: its sidecar set {old} is left without its checkpoint" in plan["warnings"]
    code, stdout, err = cli(["checkpoints", "prune", run.output_dir, "--keep-last", "1"])
    assert f"its sidecar set {old} is left without its checkpoint" in stdout + err


def test_the_search_is_two_levels_deep_never_inside_a_checkpoint_and_bounded(tmp_path: Path, cli) -> None:
    run = small_run(tmp_path / "run", steps=(2, 4))
    _publish(cli, run, 2, "a/b")
    deep = _publish(cli, run, 4, "x/y/z")  # three levels: not looked at
    found = run_sets(run.output_dir)
    assert [s.output_dir for s in found.sets] == [os.path.join(run.output_dir, "a", "b")]
    assert deep not in [s.output_dir for s in found.sets]
    # Inside a checkpoint tree: never (a receipt planted there is not a published set of the run).
    planted = Path(run.checkpoint(4)) / "sub"
    planted.mkdir()
    (planted / "migration_receipt.json").write_text((Path(deep) / "migration_receipt.json").read_text())
    assert [s.output_dir for s in run_sets(run.output_dir).sets] == [os.path.join(run.output_dir, "a", "b")]
    many = Path(run.output_dir) / "many"
    for i in range(30):
        (many / f"d{i:02d}").mkdir(parents=True)
    # "a", "a/b", "many" and seven of its 30: ten directories looked into, then a note.
    bounded = run_sets(run.output_dir, max_dirs=10)
    assert len(bounded.sets) == 1 and any("in 10 directories and stopped" in n for n in bounded.notes)
    assert not any("stopped" in n for n in run_sets(run.output_dir, max_dirs=40).notes)


def _fastvideo_receipt(path: str, sidecar_dir: str, checkpoint: str) -> None:
    """A FastVideo validation receipt (the fields of its validator's --output) naming ``sidecar_dir``."""
    import json

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"schema": "fastvideo-streaming-dataloader-sidecar-validation/v1", "checkpoint": checkpoint,
                   "sidecar_dir": sidecar_dir, "step": 2, "world_size": 4, "results": []}, handle)


@pytest.mark.parametrize("receipt", ["validation-2.json", "reports/validation-2.json"])
def test_a_set_outside_the_output_dir_that_a_receipt_inside_names_is_said_too(tmp_path: Path, cli,
                                                                            receipt: str) -> None:
    """Issue 37 item 6: FastVideo's validation receipt in the output dir (or a subdirectory) names its
    set's ``sidecar_dir``, published outside the run: deleting its checkpoint says it is left behind."""
    run = small_run(tmp_path / "run", steps=(2, 4, 6))
    accum = run.config["training"]["loop"]["gradient_accumulation_steps"]
    outside = str(tmp_path / "scratch" / "sets-2")
    code, _, err = cli(migrate_argv(run.config_path, run.checkpoint(2), outside, step=2, world=4,
                                    consumed=2 * accum, extra=("--yes", "--no-journal")))
    assert code == 0, err
    _fastvideo_receipt(os.path.join(run.output_dir, receipt), outside, run.checkpoint(2))
    assert [s.output_dir for s in run_sets(run.output_dir).named] == [outside]
    code, stdout, err = cli(["checkpoints", "prune", run.output_dir, "--keep-last", "1", "--json"])
    assert code == 0, err
    plan = one_json(stdout)
    gone = {d["step"]: d for d in plan["delete"]}
    assert sorted(gone) == [2, 4]
    assert gone[2]["warnings"] == [f"its sidecar set {outside} is left without its checkpoint"]
    assert gone[4].get("warnings", []) == []
    # A receipt naming a dir with no published set there (or an unreadable one) adds nothing.
    _fastvideo_receipt(os.path.join(run.output_dir, "validation-x.json"), str(tmp_path / "nowhere"),
                       run.checkpoint(4))
    assert [s.output_dir for s in run_sets(run.output_dir).named] == [outside]
