"""MigrationOperation through the one runner: what both front ends run for `migrate --yes` (execute under the
lock, then one journal line)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from migration_runs import STEP, WORLD, build_legacy, plan_for

from fvconsole.core.journal import appender
from fvconsole.core.migration import write
from fvconsole.core.migration.failure import MigrationFailed, MigrationFailure
from fvconsole.core.migration.locked import MigrationOperation
from fvconsole.core.shared import run_locked


def run_migration(plan, *, command: str, journal_path: str | None):
    return run_locked(MigrationOperation(plan, command=command), journal=appender(journal_path))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_published_set_is_journaled_with_its_files(tmp_path: Path) -> None:
    legacy = build_legacy(str(tmp_path))
    journal = tmp_path / "journal.jsonl"
    run = run_migration(plan_for(legacy), command="fvconsole migrate ... --yes", journal_path=str(journal))
    assert run.journal is not None and run.journal.written
    [line] = _lines(journal)
    names = [f"dataloader_state_rank{r}.pt" for r in range(WORLD)] + ["migration_receipt.json"]
    assert line["action"] == "migrate" and line["result"] == "ok" and line["exit_code"] == 0
    assert line["items"] == names and line["command"] == "fvconsole migrate ... --yes"
    assert line["bytes"] == sum(os.lstat(os.path.join(legacy.out, n)).st_size for n in names)
    assert line["details"]["step"] == STEP and line["details"]["world_size"] == WORLD


def test_a_failure_part_way_is_typed_and_journaled(tmp_path: Path, monkeypatch) -> None:
    legacy = build_legacy(str(tmp_path))
    journal = tmp_path / "journal.jsonl"
    real = write._write_file_atomic

    def failing(directory, name, data, *rest):
        if name == "dataloader_state_rank2.pt":
            raise OSError(5, "Input/output error")
        return real(directory, name, data, *rest)

    monkeypatch.setattr(write, "_write_file_atomic", failing)
    run = run_migration(plan_for(legacy), command="fvconsole migrate --yes", journal_path=str(journal))
    assert isinstance(run.failure, MigrationFailed) and run.result is None
    failure = run.failure.failure
    assert isinstance(failure, MigrationFailure) and failure.output_dir_changed is False
    assert (failure.stage, failure.sidecars_written, failure.sidecars_total) == ("writing sidecars", 2, WORLD)
    # The report's JSON is the shape it had as a dict: the staging dir's fate, nothing of publishing.
    assert set(run.failure.report) == {"stage", "output_dir", "output_dir_changed", "sidecars_written",
                                      "sidecars_total", "staging_dir", "staging_removed"}
    assert run.journal is not None and run.journal.written
    [line] = _lines(journal)
    assert line["result"] == "partial" and line["exit_code"] == 3 and "Input/output error" in line["errors"][0]
    assert {k: line["details"][k] for k in ("stage", "output_dir_changed", "sidecars_written", "sidecars_total")} \
        == {"stage": "writing sidecars", "output_dir_changed": False, "sidecars_written": 2, "sidecars_total": WORLD}
    assert "staging_dir" not in line["details"]
    assert not os.path.exists(legacy.out)


def test_no_journal_path_writes_no_line(tmp_path: Path) -> None:
    legacy = build_legacy(str(tmp_path))
    run = run_migration(plan_for(legacy), command="fvconsole migrate --yes --no-journal", journal_path=None)
    assert run.journal is None and os.path.isdir(legacy.out)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".jsonl")]


@pytest.mark.parametrize(("failure", "keys"), [
    (MigrationFailure.published("/o", 4), {"stage", "output_dir", "output_dir_changed", "sidecars_written",
                                            "sidecars_total"}),
    (MigrationFailure("publishing", "/o", True, previous_set="/a", new_set="/s"),
     {"stage", "output_dir", "output_dir_changed", "previous_set", "new_set"}),
    (MigrationFailure("syncing the parent dir", "/o", True, previous_set=None),
     {"stage", "output_dir", "output_dir_changed", "previous_set"}),
    (MigrationFailure("verifying the published set", "/o", True, previous_set="/a", problems=("x",)),
     {"stage", "output_dir", "output_dir_changed", "previous_set", "problems"}),
    (MigrationFailure.unchanged("/o", "creating the output dir's parent", None, True, 0, 4),
     {"stage", "output_dir", "output_dir_changed", "sidecars_written", "sidecars_total", "staging_dir",
      "staging_removed"}),
])
def test_each_kind_of_failure_keeps_its_json_keys(failure: MigrationFailure, keys: set[str]) -> None:
    """The keys each report had when it was a dict (a null that said something stays, e.g. no previous set)."""
    assert set(failure.to_json()) == keys
