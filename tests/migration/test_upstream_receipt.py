"""FastVideo's validation receipt in a sidecar dir: found, checked against the files, part of the set.

The receipt is built by ``fastvideo_reference.validation_receipt`` the way FastVideo's
validator builds it, independently of fvconsole's reader.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastvideo_reference import sha256_file as _sha256
from fastvideo_reference import validation_receipt as upstream_receipt
from fastvideo_reference import write_validation_receipt as write_upstream
from migration_runs import WORLD, build_legacy, one_json, plan_for

from fvconsole.core.migration import locked, verify


@pytest.fixture()
def validated(tmp_path):
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    locked.execute_migration(plan)
    receipt = upstream_receipt(legacy.run.config_path, legacy.checkpoint, legacy.out, plan.step, WORLD)
    path = os.path.join(legacy.out, "fastvideo_validation.json")
    write_upstream(path, receipt)
    return legacy, plan, path, receipt


def _verify(legacy, **kwargs):
    return verify.verify_sidecars(legacy.run.config_path, legacy.checkpoint, legacy.out, **kwargs)


def test_found_in_the_sidecar_dir_and_holds(validated, cli) -> None:
    legacy, _, path, receipt = validated
    result = _verify(legacy)
    assert result.ok, result.problems  # the receipt is part of the set, not a foreign file
    up = result.upstream_validation
    assert up is not None and up.ok and up.problems == ()
    assert (up.path, up.created_at_utc, up.ranks) == (path, receipt["created_at_utc"], WORLD)
    code, out, err = cli(legacy.verify_argv("--json"))
    assert code == 0, err
    data = one_json(out)["upstream_validation"]
    assert data == {"ok": True, "path": path, "created_at_utc": receipt["created_at_utc"], "ranks": WORLD,
                    "problems": [], "warnings": []}
    code, out, _ = cli(legacy.verify_argv())
    assert code == 0
    assert f"validated in FastVideo's loader on {WORLD} ranks at {receipt['created_at_utc']}" in out


def test_a_rank_validated_with_other_bytes_fails_naming_it(validated, cli) -> None:
    legacy, _, path, receipt = validated
    receipt["results"][5]["sidecar_sha256"] = "0" * 64  # validated an earlier set's rank 5
    write_upstream(path, receipt)
    result = _verify(legacy)
    assert not result.ok
    assert [p for p in result.problems if "FastVideo" in p] == [
        "FastVideo's validation receipt fastvideo_validation.json: rank 5: dataloader_state_rank5.pt sha256 "
        f"{_sha256(Path(legacy.out, 'dataloader_state_rank5.pt'))[:12]} is not the one validated (000000000000): "
        "the sidecar changed since FastVideo's validation"]
    assert result.upstream_validation is not None and result.upstream_validation.ok is False
    assert all(row["ok"] for row in result.ranks)  # fvconsole's own checks of the files still pass
    code, out, err = cli(legacy.verify_argv("--json"))
    assert code == 1 and one_json(out)["upstream_validation"]["ok"] is False
    assert "rank 5" in one_json(out)["error"]


def test_config_edited_and_ranks_missing_fail(validated) -> None:
    legacy, _, path, receipt = validated
    with open(legacy.run.config_path, "a", encoding="utf-8") as handle:
        handle.write("# edited after the validation\n")  # same plan, other bytes
    receipt["results"] = receipt["results"][:-1]
    write_upstream(path, receipt)
    problems = _verify(legacy).upstream_validation.problems
    assert any(p.startswith("config_sha256 ") and "config changed" in p for p in problems), problems
    assert f"rank {WORLD - 1}: not validated (no result for it)" in problems


def test_step_and_world_size_must_match(validated) -> None:
    legacy, _, path, receipt = validated
    receipt["step"], receipt["world_size"] = 4, 16
    write_upstream(path, receipt)
    problems = _verify(legacy).upstream_validation.problems
    assert "step is 4, the checkpoint's is 5" in problems
    assert f"world_size is 16, the run's is {WORLD}" in problems


def test_given_path_outside_the_dir(validated, tmp_path, cli) -> None:
    legacy, _, path, receipt = validated
    elsewhere = str(tmp_path / "receipt-of-job-123.json")
    os.replace(path, elsewhere)
    assert _verify(legacy).upstream_validation is None
    code, out, _ = cli(legacy.verify_argv("--json", "--upstream-receipt", elsewhere))
    assert code == 0 and one_json(out)["upstream_validation"]["path"] == elsewhere
    missing = str(tmp_path / "nope.json")
    code, out, err = cli(legacy.verify_argv("--upstream-receipt", missing))
    assert code == 1 and err.startswith("error: verification failed") and "nope.json" in err
    assert "Traceback" not in err


def test_not_foreign_when_the_set_is_replaced(validated, cli) -> None:
    legacy, _, path, _ = validated
    plan = plan_for(legacy, overwrite=True)  # a dir with a foreign file is refused
    locked.execute_migration(plan)
    assert not os.path.exists(path)  # it vouched for the old set's files only: gone with them
    assert sorted(os.listdir(legacy.out)) == sorted(
        [f"dataloader_state_rank{r}.pt" for r in range(WORLD)] + ["migration_receipt.json"])


def test_a_json_file_of_another_schema_stays_foreign(validated) -> None:
    legacy, _, path, receipt = validated
    receipt["schema"] = "something-else/v1"
    write_upstream(path, receipt)
    result = _verify(legacy)
    assert result.upstream_validation is None
    assert "fastvideo_validation.json: foreign file in the sidecar dir" in result.problems


@pytest.mark.parametrize("field", ["row_group_position", "row_offset"])
def test_a_receipt_that_contradicts_the_sidecar_it_names_fails(validated, cli, field) -> None:
    """Issue 29 item 4: the validated sha256 is the sidecar's, but the cursor recorded for it is not."""
    legacy, _, path, receipt = validated
    row = receipt["results"][3]
    row[field] += 1
    write_upstream(path, receipt)
    problems = [p for p in _verify(legacy).problems if "FastVideo" in p]
    assert len(problems) == 1 and problems[0].startswith(
        f"FastVideo's validation receipt fastvideo_validation.json: rank 3: the receipt records {field} {row[field]}, "
        f"but dataloader_state_rank3.pt, the sidecar it validated, holds {row[field] - 1}")
    code, out, err = cli(legacy.verify_argv("--json"))
    assert code == 1 and one_json(out)["upstream_validation"]["ok"] is False and "rank 3" in one_json(out)["error"]


def test_with_deep_the_next_id_is_compared_with_the_dataset(validated) -> None:
    pytest.importorskip("pyarrow")
    legacy, _, path, receipt = validated
    result = _verify(legacy, deep=True)
    assert result.ok, result.problems  # the reference's next ids are the dataset's
    receipt["results"][2]["next_id"] = "sample-999999"
    write_upstream(path, receipt)
    problems = [p for p in _verify(legacy, deep=True).problems if "FastVideo" in p]
    assert len(problems) == 1 and "rank 2: the receipt records next_id 'sample-999999'" in problems[0]
    assert _verify(legacy).ok  # without --deep the dataset is not read: nothing to compare the id with


def test_a_receipt_row_without_a_position_fails(validated) -> None:
    legacy, _, path, receipt = validated
    receipt["results"][1]["row_offset"] = "7"
    write_upstream(path, receipt)
    problems = _verify(legacy).upstream_validation.problems
    assert problems == ("rank 1: the receipt's row_offset '7' is not a position",)
