"""core.reasons (refusals and skips as a code + values, without CLI advice) and core.migration.published
(the set published for a checkpoint), on real refusals, real plans and real migrations."""

from __future__ import annotations

import json
import os
import re

import pytest

from fvconsole.cli import main as cli_main
from fvconsole.core.cache import plan_eviction, scan_cache
from fvconsole.core.errors import FvError
from fvconsole.core.migration import output_dir
from fvconsole.core.migration.plan import MigrationRequest, Refusal, plan_migration
from fvconsole.core.migration.published import defaults_from_published, latest, published_for
from fvconsole.core.reasons import (
    FORCE,
    OVERWRITE,
    SKIP_SOURCE_CHECK,
    refusal_reason,
    skip_reason,
    strip_advice,
)
from fvconsole.demo import builders
from fvconsole.demo.cache_builders import write_cache_entry
from fvconsole.tui.wording import refusal_text, skip_text

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> builders.RunFixture:
    return builders.build_run(tmp_path_factory.mktemp("reasons") / "run", steps=(3, 6), num_gpus=2, sp_size=1)


def request(run: builders.RunFixture, out: str, **changes) -> MigrationRequest:
    fields = dict(config_path=run.config_path, checkpoint=run.checkpoint(3), output_dir=out, expected_step=3,
                  expected_world_size=2, consumed_batches_per_rank=3)
    return MigrationRequest(**{**fields, **changes})


def migrate(run: builders.RunFixture, step: int, out: str) -> None:
    assert cli_main(["migrate", "--config", run.config_path, "--checkpoint", run.checkpoint(step), "--output-dir", out,
                     "--expected-step", str(step), "--expected-world-size", "2",
                     "--consumed-batches-per-rank", str(step), "--yes"]) == 0


def test_migration_refusals_become_codes_with_values(run: builders.RunFixture, tmp_path) -> None:
    preview = plan_migration(request(run, str(tmp_path / "out"), expected_step=4, expected_world_size=3,
                                        consumed_batches_per_rank=5))
    reasons = {r.code: r for r in map(refusal_reason, preview.refusals)}
    assert set(reasons) >= {"expected_step.metadata", "expected_step.directory", "expected_world_size.config",
                            "consumed_batches_per_rank.config"}
    assert dict(reasons["expected_step.metadata"].values)["given"] == "4"
    assert dict(reasons["expected_step.metadata"].values)["actual"] == "3"
    directory = dict(reasons["expected_step.directory"].values)
    assert (directory["given"], directory["actual"], directory["name"]) == ("4", "3", "checkpoint-3")
    assert dict(reasons["expected_world_size.config"].values) == {"given": "3", "actual": "2"}
    assert dict(reasons["consumed_batches_per_rank.config"].values)["actual"] == "3"
    assert any("--expected-step" in r.message for r in preview.refusals)  # the CLI's words stay as they were
    for refusal in preview.refusals:
        worded = refusal_text(refusal_reason(refusal))
        assert not FLAG.search(worded), worded


def test_an_existing_set_names_the_overwrite_option_not_its_flag(run: builders.RunFixture, tmp_path) -> None:
    out = str(tmp_path / "side")
    migrate(run, 3, out)
    preview = plan_migration(request(run, out))
    reason = refusal_reason(next(r for r in preview.refusals if r.field == "output_dir"))
    assert (reason.code, reason.remedy) == ("output_dir.has_sidecars", OVERWRITE)
    assert dict(reason.values)["count"] == "2" and "use --overwrite" not in reason.detail
    assert "tick “overwrite existing sidecars”" in refusal_text(reason)
    # The execute-time rule (run by the dry run and the console's preview) words the same case.
    with pytest.raises(FvError) as refused:
        output_dir.check_output_dir(out, run.checkpoint(3), overwrite=False)
    message = str(refused.value)
    assert "--overwrite" in message
    reason = refusal_reason(Refusal("output_dir", message))
    assert (reason.code, reason.remedy) == ("output_dir.has_set", OVERWRITE)
    assert not FLAG.search(refusal_text(reason))


def test_strip_advice_removes_each_cli_clause_and_names_what_lifts_it() -> None:
    cases = {
        "x; use --overwrite to replace them": ("x", OVERWRITE),
        "x (--skip-source-check to proceed anyway)": ("x", SKIP_SOURCE_CHECK),
        "busy (10s ago); --force to evict anyway": ("busy (10s ago)", FORCE),
        "/: contains no cache-looking entries; is this the right root? --force to proceed":
            ("/: contains no cache-looking entries; is this the right root?", FORCE),
        "/x: output dir is a symlink; pass the real directory (--output-dir)":
            ("/x: output dir is a symlink; pass the real directory", None),
        "kept (--keep)": ("kept", None),
        "/r: another eviction is running (pid 7 on host n1); re-run with --wait SECONDS to wait for it":
            ("/r: another eviction is running (pid 7 on host n1); try again once it has finished", None),
    }
    for message, expected in cases.items():
        assert strip_advice(message) == expected


def test_cache_skips_become_codes_and_in_use_is_worded_with_the_time_now(tmp_path) -> None:
    now = 1_800_000_000.0
    busy = os.path.basename(write_cache_entry(tmp_path, seed=1, num_shards=2, tensor_bytes=256, last_used=now - 30))
    old = os.path.basename(write_cache_entry(tmp_path, seed=2, num_shards=2, tensor_bytes=256,
                                             last_used=now - 86400))
    scan = scan_cache(str(tmp_path), now=now)
    plan = plan_eviction(scan, keys=(busy, old, "0" * 16), keep=(old,), now=now)
    reasons = {s.key: skip_reason(s) for s in plan.skipped}
    assert reasons[busy].code == "in_use" and reasons[busy].remedy == FORCE
    assert reasons[old].code == "kept" and reasons["0" * 16].code == "missing"
    later = skip_text(reasons[busy], scan.get(busy), now + 120, plan.grace_seconds)
    assert "used 2m30s ago" in later and "tick “force”" in later and not FLAG.search(later)
    assert "no longer looks in use" in skip_text(reasons[busy], scan.get(busy), now + 86400, plan.grace_seconds)


def test_the_published_set_of_a_checkpoint_is_found_through_its_receipt(run: builders.RunFixture) -> None:
    from fvconsole.core.migration.defaults import suggest_output_dir

    assert published_for(run.checkpoint(3), 3) is None
    out3, out6 = suggest_output_dir(run.checkpoint(3), 3), suggest_output_dir(run.checkpoint(6), 6)
    migrate(run, 3, out3)
    migrate(run, 6, out6)
    found = published_for(run.checkpoint(3), 3)
    assert found is not None and found.complete
    assert (found.output_dir, found.step, found.world_size, found.consumed_batches_per_rank) == (out3, 3, 2, 3)
    assert found.checkpoint == os.path.realpath(run.checkpoint(3))
    assert latest([found, published_for(run.checkpoint(6), 6), None]).step == 6
    defaults = defaults_from_published(found)
    assert (defaults.checkpoint, defaults.output_dir, defaults.expected_step) == (found.checkpoint, out3, 3)
    # A set for another checkpoint in that place does not count; a missing sidecar is incomplete.
    os.remove(os.path.join(out3, "dataloader_state_rank1.pt"))
    assert published_for(run.checkpoint(3), 3).sidecars_present == 1
    assert not published_for(run.checkpoint(3), 3).complete
    receipt = os.path.join(out6, "migration_receipt.json")
    with open(receipt) as fh:
        data = json.load(fh)
    with open(receipt, "w") as fh:
        json.dump(dict(data, source_checkpoint="/elsewhere/checkpoint-6"), fh)
    assert published_for(run.checkpoint(6), 6) is None
    with open(receipt, "w") as fh:
        fh.write("{ not json")
    with pytest.raises(FvError, match="migration_receipt.json"):
        published_for(run.checkpoint(6), 6)
