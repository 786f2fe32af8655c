"""The output dir rules, once (issue 20 item 3): the preview and execution judge with one function.

Real legacy DCP checkpoints over real Parquet datasets; the expected codes are the reasons'
declared codes, never read back from the code under test's output.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from migration_runs import build_legacy, plan_for, request
from reliability.harness import tree_digest

from fvconsole.core.migration import locked
from fvconsole.core.migration.plan import preview_migration
from fvconsole.core.shared.errors import FvError


def _codes(preview) -> list[str]:
    return [r.reason.code for r in preview.refusals if r.field == "output_dir"]


def _moved(plan, out: str):
    return dataclasses.replace(plan, output_dir=out, request=dataclasses.replace(plan.request, output_dir=out))


def test_execution_refuses_a_plan_whose_output_dir_is_inside_the_dataset_root(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    inside = os.path.join(legacy.run.dataset_root, "sidecars")
    before = tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False)
    with pytest.raises(FvError) as refused:
        locked.execute_migration(_moved(plan, inside))
    assert "dataset root" in str(refused.value) and inside in str(refused.value)
    assert refused.value.reason.code == "output_dir.in_dataset"
    assert tree_digest(str(tmp_path), mtimes=True, modes=True, include_root=False) == before


def test_a_parent_swapped_for_a_symlink_into_the_dataset_after_the_preview_is_refused(tmp_path) -> None:
    """The preview passed; then the output dir's parent became a symlink into the dataset root."""
    legacy = build_legacy(str(tmp_path))
    place = tmp_path / "place"
    place.mkdir()
    out = str(place / "sidecars")
    preview = preview_migration(request(legacy, out=out))
    assert preview.plan is not None, [r.message for r in preview.refusals]
    place.rmdir()
    os.symlink(legacy.run.dataset_root, place)
    before = tree_digest(legacy.run.dataset_root, mtimes=True, modes=True)
    with pytest.raises(FvError, match="dataset root"):
        locked.execute_migration(preview.plan)
    assert tree_digest(legacy.run.dataset_root, mtimes=True, modes=True) == before


def test_the_preview_collects_every_output_dir_reason(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    out = os.path.join(legacy.run.dataset_root, "state")
    os.mkdir(out)
    with open(os.path.join(out, "dataloader_state_rank0.pt"), "wb") as fh:
        fh.write(b"old")
    with open(os.path.join(out, "notes.txt"), "w", encoding="utf-8") as fh:
        fh.write("mine")
    codes = _codes(preview_migration(request(legacy, out=out)))
    assert sorted(codes) == ["output_dir.foreign", "output_dir.has_sidecars", "output_dir.in_dataset"]


def test_a_name_that_only_looks_like_a_sidecar_is_foreign_in_the_preview_too(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    os.makedirs(legacy.out)
    with open(os.path.join(legacy.out, "dataloader_state_rank0-old.pt"), "wb") as fh:
        fh.write(b"someone's backup")
    assert _codes(preview_migration(request(legacy))) == ["output_dir.foreign"]
    assert _codes(preview_migration(request(legacy, overwrite=True))) == ["output_dir.foreign"]


@pytest.mark.parametrize("where", ["inside", "symlink-into-checkpoint"])
def test_inside_the_checkpoint_is_one_code_for_the_preview_and_execution(tmp_path, where) -> None:
    legacy = build_legacy(str(tmp_path))
    if where == "inside":
        out = os.path.join(legacy.checkpoint, "sidecars")
    else:
        out = str(tmp_path / "link")
        os.symlink(os.path.join(legacy.checkpoint, "dcp"), out)
    assert _codes(preview_migration(request(legacy, out=out))) == ["output_dir.in_checkpoint"]
    with pytest.raises(FvError) as refused:
        locked.execute_migration(_moved(plan_for(legacy), out))
    assert refused.value.reason.code == "output_dir.in_checkpoint"
