"""Reasons are the only carrier of refusals, skips and warnings (issue 20 item 2).

Each record stores its reasons once, as :class:`Reason` values; the command line's text and
``to_json`` are derived from them. Real caches, real DCP checkpoints, real migrations.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import time

import pytest
from migration_runs import build_legacy, plan_for, request

from fvconsole.core.cache import EvictionSelectors, PlannedEviction, plan_eviction, scan_cache
from fvconsole.core.cache.evict import EvictedEntry
from fvconsole.core.cache.plan import SkippedEntry
from fvconsole.core.migration import locked, output_dir, write
from fvconsole.core.migration.output_dir import migration_lock
from fvconsole.core.migration.plan import MigrationPlan, MigrationPreview, Refusal, preview_migration
from fvconsole.core.shared import locks
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.locks import LockProbe
from fvconsole.core.shared.optional import MissingExtra
from fvconsole.core.shared.reasons import Reason
from fvconsole.demo.cache_builders import make_key, write_cache_entry

#: Fields that held a record's message a second time, as text beside (or instead of) its reason.
TEXT_COPIES = {"reason", "message", "warnings", "output_dir_warnings"}


def test_records_store_no_text_copy_of_their_reasons() -> None:
    for record in (PlannedEviction, EvictedEntry, SkippedEntry, Refusal, MigrationPlan, MigrationPreview,
                   write.MigrationResult):
        names = {f.name for f in dataclasses.fields(record)}
        assert not names & TEXT_COPIES, (record.__name__, names & TEXT_COPIES)
    # A lock probe kept its refusal and its note twice: as text and as a reason.
    assert {f.name for f in dataclasses.fields(LockProbe)} == {"reason", "note_reason", "holder"}


def test_the_command_lines_text_is_the_reasons_wording(tmp_path) -> None:
    root = tmp_path / "cache"
    now = time.time()
    old = os.path.basename(write_cache_entry(root, last_used=now - 10 * 86400, seed=1))
    plan = plan_eviction(scan_cache(root, now=now), EvictionSelectors(keys=(old, make_key("absent"))))
    [planned], [skipped] = plan.evict, plan.skipped
    assert planned.to_json()["reason"] == "selected by --key" and [r.code for r in planned.why] == ["evict.key"]
    assert skipped.to_json() == {"key": make_key("absent"), "reason": "no such entry in the cache"}
    assert isinstance(skipped.why, Reason) and skipped.why.code == "skip.missing"


def test_execution_reports_each_warning_once_by_value_not_by_its_text(tmp_path) -> None:
    """A staging dir of another host, seen by the preview, is not reported again by execution."""
    legacy = build_legacy(str(tmp_path))
    name = os.path.basename(legacy.out)
    other = tmp_path / f".{name}.fvconsole-staging-login2-0123456789ab-4242-feed"
    other.mkdir()
    plan = plan_for(legacy)
    [seen] = [n for n in plan.output_dir_notes if str(other) in n.cli]
    assert isinstance(seen, Reason) and "another host or container (login2" in seen.detail
    told: list[Reason] = []
    result = locked.execute_migration(plan, on_warning=told.append)
    assert told == [] and all(isinstance(n, Reason) for n in result.notes)
    assert [n for n in result.notes if str(other) in n.cli] == [seen]
    assert result.to_json()["warnings"] == [n.cli for n in result.notes]


def test_executions_refusals_are_the_previews_reasons(tmp_path) -> None:
    """Between the plan and the write: an output dir rule and the lock refuse in execution with the very
    reason (code, field, values) a new preview gives; a changed source with a code of its own."""
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    os.makedirs(legacy.out)
    (tmp_path / "sidecars" / "train.log").write_text("not ours")
    with pytest.raises(FvError) as refused:
        locked.execute_migration(plan)
    [preview_refusal] = preview_migration(request(legacy)).refusals
    assert refused.value.reason == preview_refusal.why
    assert (preview_refusal.why.code, preview_refusal.field) == ("output_dir.foreign", "output_dir")
    os.remove(tmp_path / "sidecars" / "train.log")

    plan = plan_for(legacy)
    other = migration_lock(legacy.out)
    other.acquire()
    try:
        with pytest.raises(FvError) as refused:
            locked.execute_migration(plan)
        [preview_refusal] = preview_migration(request(legacy)).refusals
    finally:
        other.release()
    assert refused.value.reason == preview_refusal.why
    assert (refused.value.reason.code, refused.value.reason.field) == ("lock.alive", "output_dir")

    plan = plan_for(legacy)
    with open(legacy.run.config_path, "a", encoding="utf-8") as fh:
        fh.write("# edited after planning\n")
    with pytest.raises(FvError) as refused:
        locked.execute_migration(plan)
    why = refused.value.reason
    assert (why.code, why.field, why.value("path")) == ("recheck.config_changed", "config", legacy.run.config_path)
    assert Refusal(why).to_json() == {
        "field": "config", "message": f"config: {legacy.run.config_path}: run config changed since the plan was made "
                                      "(sha256)"}


def test_execution_raises_no_refusal_without_a_reason() -> None:
    """Every ``FvError`` the execution's modules build comes from a :class:`Reason` (``FvError.of``), so a
    front end words it like the preview's refusals; a bare message was a refusal the console could not word."""
    bare = []
    for source in (inspect.getsource(write), inspect.getsource(output_dir), inspect.getsource(locks.FileLock)):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "FvError":
                bare.append(ast.unparse(node)[:80])
    assert bare == []


def test_a_missing_extra_is_a_reason_too() -> None:
    """``--torch-check`` without torch is refused by execution before it writes: as data like the rest."""
    missing = MissingExtra("checking sidecars with torch.load", "torch", "torch")
    assert (missing.reason.code, missing.reason.field) == ("extra.missing", "extra")
    assert str(missing) == missing.reason.cli == "checking sidecars with torch.load needs torch: pip install 'fvconsole[torch]'"
