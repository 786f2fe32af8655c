"""Issue 37 item 7: a checkpoint view is judged as FastVideo judges it.

Real views: ``migrate --reshard`` of a real FastVideo-native checkpoint writes
``VIEWS/checkpoint-<step>`` (its own sidecars and receipt, every other entry an absolute link into
the source). FastVideo follows the links, so the view is complete when they resolve to a
complete checkpoint; a prune of the views' dir removes a view's own files and links only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from migration_runs import migrate_argv, one_json, small_run
from reliability.harness import tree_digest


@pytest.fixture()
def views(tmp_path: Path, cli):
    run = small_run(tmp_path / "run", steps=(2, 4), kind="rank-local")
    accum = run.config["training"]["loop"]["gradient_accumulation_steps"]
    out = tmp_path / "views"
    for step in (2, 4):
        code, _, err = cli(migrate_argv(run.config_path, run.checkpoint(step), out / f"checkpoint-{step}", step=step,
                                        world=4, consumed=step * accum,
                                        extra=("--set", "training.distributed.num_gpus=2", "--reshard", "nearest",
                                               "--yes", "--no-journal")))
        assert code == 0, err
    assert os.path.islink(out / "checkpoint-4" / "dcp")
    return run, out


def test_a_view_whose_links_resolve_to_a_complete_checkpoint_is_complete(views, cli) -> None:
    run, out = views
    code, stdout, err = cli(["checkpoints", "ls", str(out), "--json"])
    assert code == 0, err
    data = one_json(stdout)
    listed = {c["step"]: c for c in data["checkpoints"]}
    for step in (2, 4):
        assert listed[step]["complete"] is True and listed[step]["has_dcp"] is True
        assert listed[step]["view_of"] == os.path.realpath(run.checkpoint(step))
    assert not [w for w in data["warnings"] if "dcp/ directory is missing" in w or "world size" in w]
    code, stdout, err = cli(["checkpoints", "ls", str(out)])
    assert f"view: {out / 'checkpoint-4'} is a checkpoint view of {os.path.realpath(run.checkpoint(4))}" in stdout


def test_a_view_whose_link_is_dangling_is_not_complete(views, cli) -> None:
    run, out = views
    rng = out / "checkpoint-4" / "rng_state_rank1.pt"
    rng.unlink()
    rng.symlink_to(out / "nowhere.pt")
    listed = {c["step"]: c for c in one_json(cli(["checkpoints", "ls", str(out), "--json"]).stdout)["checkpoints"]}
    assert listed[4]["complete"] is False and listed[2]["complete"] is True


def test_prune_never_takes_a_complete_view_for_an_interrupted_save(views, cli) -> None:
    _run, out = views
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--grace", "0", "--json"])
    assert code == 0, err
    assert one_json(stdout)["delete"] == []


def test_removing_a_view_removes_its_own_files_and_links_never_the_sources(views, cli) -> None:
    run, out = views
    sources = {step: tree_digest(run.checkpoint(step), mtimes=True, modes=True) for step in (2, 4)}
    code, stdout, err = cli(["checkpoints", "prune", str(out), "--keep-last", "1", "--yes", "--json", "--no-journal"])
    assert code == 0, err
    assert [r["step"] for r in one_json(stdout)["removed"]] == [2]
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-4"]
    assert {step: tree_digest(run.checkpoint(step), mtimes=True, modes=True) for step in (2, 4)} == sources
