"""Reasons are the only carrier of refusals, skips and warnings (issue 20 item 2).

Each record stores its reasons once, as :class:`Reason` values; the command line's text and
``to_json`` are derived from them. Real caches, real DCP checkpoints, real migrations.
"""

from __future__ import annotations

import dataclasses
import os
import time

from migration_runs import build_legacy, plan_for

from fvconsole.core.cache import (
    EvictedEntry,
    EvictionSelectors,
    PlannedEviction,
    SkippedEntry,
    plan_eviction,
    scan_cache,
)
from fvconsole.core.locks import LockProbe
from fvconsole.core.migration import write
from fvconsole.core.migration.plan import MigrationPlan, MigrationPreview, Refusal
from fvconsole.core.reasons import Reason
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
    result = write.execute_migration(plan, on_warning=told.append)
    assert told == [] and all(isinstance(n, Reason) for n in result.notes)
    assert [n for n in result.notes if str(other) in n.cli] == [seen]
    assert result.to_json()["warnings"] == [n.cli for n in result.notes]
