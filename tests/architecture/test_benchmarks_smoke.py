"""Keep `python -m benchmarks` working: tiny in-process cases plus the --quick run (slow).

No timed assertions: these check that each case runs, cross-checks fvconsole against its
baseline, and reports a row; the numbers themselves belong in docs/performance.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)  # `benchmarks` is a top-level directory of the checkout, not installed

from benchmarks import baselines, cases_fleet, cases_io, cases_plan, cases_sidecars, inputs  # noqa: E402
from benchmarks.__main__ import CASES, main  # noqa: E402
from benchmarks.harness import Row, format_table  # noqa: E402


def test_upstream_baseline_matches_fvconsole_plan_on_a_real_checkpoint(tmp_path) -> None:
    """The re-implemented upstream reconstruction agrees with fvconsole's plan, state for state."""
    from fvconsole.core.migration.plan import preview_migration

    run = inputs.migration_run(str(tmp_path / "run"), world_size=8, num_row_groups=400, sp_size=2, step=20)
    preview = preview_migration(run.request(str(tmp_path / "out")))
    assert preview.plan is not None, [r.message for r in preview.refusals]
    for rank in range(run.world_size):
        state = baselines.upstream_rank_state(
            run.manifest, global_rank=rank, world_size=8, sp_world_size=2, batch_size=inputs.BATCH,
            read_batch_size=8, seed=42, shuffle_row_groups=True, yielded_samples=run.step * inputs.BATCH,
        )
        assert state == preview.plan.dataset_state(rank)


def test_dcp_keys_case_times_the_core_reader_against_torch(tmp_path) -> None:
    """Both sides run in fresh interpreters and must read the same keys (the case cross-checks).

    Key equality of the reader itself on every checkpoint kind is tests/checkpoints/test_checkpoints.py's job.
    """
    row = cases_io.dcp_keys_case(str(tmp_path), repeat=1)
    assert row.fv_cpu and row.baseline_cpu
    assert "FileSystemReader" in row.baseline and "same" in row.note and "no torch import" in row.note
    assert json.loads((tmp_path / "core.json").read_text()) == json.loads((tmp_path / "torch.json").read_text())


def test_header_case_reports_both_hostile_headers(tmp_path) -> None:
    """The case cross-checks that fvconsole fails the entry and safetensors refuses the file."""
    rows = cases_io.header_case(str(tmp_path), repeat=1)
    assert len(rows) == 2 and all(r.fv_cpu is not None and "safe_open" in r.baseline for r in rows)


def test_plan_case_reports_a_ratio() -> None:
    row = cases_plan.plan_case(16, 600, 4, None, repeat=1)
    assert row.ratio is not None and row.ratio > 0
    assert "identical" in row.note


def test_execute_case_writes_and_compares(tmp_path) -> None:
    row = cases_io.execute_case(str(tmp_path), 8, repeat=1)
    assert row.fv_seconds and row.baseline_seconds
    assert "files/s" in row.note
    assert not os.path.exists(tmp_path / "fv-0"), "outputs are cleaned up between repetitions"


def test_sidecar_cases_run_both_clis_and_cross_check_bytes(tmp_path) -> None:
    """migrate --yes and verify in fresh interpreters; the case itself fails if fvconsole's
    sidecars are not byte-identical to the torch.save baseline's."""
    migrate, verify, *tmpfs = cases_sidecars.sidecar_cases(str(tmp_path), 8, repeat=1)
    assert len(tmpfs) in (0, 2)
    assert migrate.fv_seconds and migrate.baseline_seconds and "byte-identical" in migrate.note
    assert verify.fv_seconds and verify.baseline_seconds and "torch.load" in verify.baseline
    # Each repetition writes into a directory of its own (none deleted right before a run).
    assert sorted(os.listdir(tmp_path / "fv-out-0")) == sorted(os.listdir(tmp_path / "seed-out-0"))


def test_cache_scan_case_matches_du_inputs(tmp_path) -> None:
    rows = cases_io.cache_scan_case(str(tmp_path / "cache"), 6, 3, repeat=1)
    assert [r.baseline for r in rows[:2]] == ["du -sb", "du -sb"]
    assert baselines.du_bytes(str(tmp_path / "cache")) > 6 * 3 * len(inputs.SHARD_BYTES)


def test_fleet_case_counts_job_steps_on_the_simulated_cluster(tmp_path) -> None:
    single, per_node = cases_fleet.fanout_case(str(tmp_path), nodes=20, per_node_sample=2)
    assert "1 job step vs 20" in single.note and single.baseline_seconds
    assert per_node.note.startswith("2 job steps")


def test_table_lists_every_row_and_ratio() -> None:
    table = format_table([Row("a", 0.5, 1.0, "base", "t", True, "n"), Row("b FAILED", None)])
    lines = table.splitlines()
    assert len(lines) == 4 and "2.0x" in lines[2] and "b FAILED" in lines[3]


def test_only_option_runs_just_the_named_case(tmp_path, capsys) -> None:
    out = tmp_path / "r.json"
    assert main(["--quick", "--only", "plan", "--json", str(out), "--tmp", str(tmp_path)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"].split()[0] for r in rows] == ["plan", "plan"]
    assert "machine:" in capsys.readouterr().out
    assert set(CASES) >= {"plan", "dryrun", "execute", "sidecars", "cache", "startup", "tui", "fleet"}


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path) -> None:
    out = tmp_path / "quick.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--json", str(out), "--tmp", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert not [r for r in rows if "FAILED" in r["case"]]
    assert {r["case"].split()[0] for r in rows} >= {"plan", "dry", "execute", "cache", "startup:", "TUI", "`migrate",
                                                    "`sidecars"}
    assert all(r["fv_seconds"] for r in rows)


def test_scale_cases_list_every_entry_and_checkpoint(tmp_path) -> None:
    cache, first, again = cases_io.scale_cases(str(tmp_path), cache_entries=5, checkpoints=3, repeat=1)
    assert "5 entries" in cache.case and "peak RSS" in cache.note and cache.fv_cpu
    for checkpoints, label in ((first, "first listing"), (again, "listed again")):
        assert "3 checkpoints" in checkpoints.case and label in checkpoints.case and checkpoints.fv_seconds
    # The DCP verdict cache of the run is the case's own (never ~/.cache), and it was kept.
    assert os.path.isfile(tmp_path / "xdg-cache" / "fvconsole" / "dcp-verdicts.json")
    assert sorted(os.listdir(tmp_path / "ckpts" / "output")) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
