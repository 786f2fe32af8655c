"""Plan, fingerprint and end-to-end dry-run cases (cursor arithmetic at scale)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks import baselines, inputs
from benchmarks.harness import Row, best_of, timed

SEED = 42


def _sample(world: int, count: int) -> list[int]:
    """``count`` ranks spread over the world (first and last included)."""
    if count >= world:
        return list(range(world))
    step = (world - 1) / (count - 1) if count > 1 else 0
    return sorted({round(i * step) for i in range(count)})


def _baseline_states(manifest: dict, ranks: list[int], world: int, sp: int, yielded: int) -> list[dict]:
    return [
        baselines.upstream_rank_state(
            manifest, global_rank=r, world_size=world, sp_world_size=sp, batch_size=inputs.BATCH,
            read_batch_size=8, seed=SEED, shuffle_row_groups=True, yielded_samples=yielded,
        )
        for r in ranks
    ]


def _check_agree(states: list[dict], cursors: Any, ranks: list[int], label: str) -> None:
    """The baseline and fvconsole must compute the same cursors, or the timing means nothing."""
    for rank, state in zip(ranks, states, strict=True):
        c = cursors[rank]
        if (c.row_group_position, c.row_offset) != (state["row_group_position"], state["row_offset"]):
            raise AssertionError(f"{label}: rank {rank} disagrees with the upstream baseline")


def plan_case(ranks: int, row_groups: int, sp: int, baseline_ranks: int | None, repeat: int = 3) -> Row:
    """fvconsole's plan (shard once, walk once per SP group) vs the per-rank recomputation."""
    from fvconsole.core.migration import Topology, compute_cursors, shard_layout

    manifest = inputs.synthetic_manifest(row_groups, "/data/bench-plan")
    rows = [g["rows"] for g in manifest["row_groups"]]
    starts = [g["sample_start"] for g in manifest["row_groups"]]
    topo = Topology(ranks, sp, inputs.BATCH, SEED, True)
    yielded = inputs.STEP * inputs.BATCH

    def fv() -> Any:
        shards, _spw = shard_layout(rows, topo)
        return compute_cursors(rows, starts, shards, topo, yielded)

    cursors = fv()
    fv_time = best_of(fv, repeat)
    sample = _sample(ranks, baseline_ranks or ranks)
    base_time, states = timed(lambda: _baseline_states(manifest, sample, ranks, sp, yielded))
    _check_agree(states, cursors, sample, "plan")
    base_total = base_time * ranks / len(sample)
    note = "cursors identical to baseline"
    if len(sample) < ranks:
        note += f"; baseline extrapolated from {len(sample)} ranks"
    ratio = base_total / fv_time
    return Row(
        f"plan {ranks} ranks x {row_groups:,} rg, sp {sp}", fv_time, base_total, "per-rank upstream recompute",
        ">=50x and <1 s", ratio >= 50 and fv_time < 1, note,
    )


def fingerprint_case(row_groups: int, repeat: int = 2) -> list[Row]:
    """The manifest fingerprint: fastjson (stdlib fast path; orjson when present) vs json.dumps."""
    from fvconsole.core import fastjson

    manifest = inputs.synthetic_manifest(row_groups, "/data/bench-fp")
    groups = manifest["row_groups"]
    expected = baselines.upstream_fingerprint(groups)
    base = best_of(lambda: baselines.upstream_fingerprint(groups), repeat)
    rows = []
    for label, use_orjson in (("stdlib fast path", False), ("orjson path", True)):
        if fastjson.fingerprint(groups, use_orjson=use_orjson) != expected:
            raise AssertionError(f"fingerprint {label} differs from the stdlib")
        t = best_of(lambda u=use_orjson: fastjson.fingerprint(groups, use_orjson=u), repeat)
        rows.append(Row(f"fingerprint {row_groups:,} rg ({label})", t, base, "json.dumps + sha256",
                        "byte-identical", True, "digest identical"))
    return rows


def dry_run_case(root: str, ranks: int, row_groups: int, baseline_ranks: int) -> list[Row]:
    """`fvconsole migrate` without --yes (subprocess, manifest on disk) vs the upstream approach."""
    t_setup, run = timed(lambda: inputs.migration_run(root, world_size=ranks, num_row_groups=row_groups))
    out_dir = os.path.join(root, "sidecars")
    out_file = os.path.join(root, "dry-run.json")
    cmd = [sys.executable, "-m", "fvconsole", *run.cli_args(out_dir), "--json"]
    with open(out_file, "wb") as handle:
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=handle, stderr=subprocess.PIPE, check=False)
        fv_time = time.perf_counter() - start
    if proc.returncode != 0:
        raise AssertionError(f"dry run exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    with open(out_file, encoding="utf-8") as handle:
        report = json.load(handle)
    plan_ranks = report["plan"]["ranks"]
    if os.path.exists(out_dir):
        raise AssertionError("a dry run wrote the output dir")

    rows = [Row(f"dry run e2e {ranks} ranks x {row_groups:,} rg (CLI, incl. startup)", fv_time,
                None, "", "<10 s", fv_time < 10, f"inputs built in {t_setup:.0f} s")]
    rows[0] = _with_baseline(rows[0], run, plan_ranks, baseline_ranks)
    rows.append(_in_process_preview(run, out_dir))
    return rows


def _with_baseline(row: Row, run: inputs.MigrationRun, plan_ranks: list[dict], sample_count: int) -> Row:
    """Upstream: json.load + FastVideo's fingerprint + reconstruct per rank (sampled, extrapolated)."""

    def load() -> dict:
        with open(run.manifest_path, encoding="utf-8") as handle:
            return json.load(handle)

    t_load, manifest = timed(load)
    t_fp, _ = timed(lambda: baselines.upstream_fingerprint(manifest["row_groups"]))
    sample = _sample(run.world_size, sample_count)
    yielded = run.step * inputs.BATCH
    t_ranks, states = timed(lambda: _baseline_states(manifest, sample, run.world_size, 1, yielded))
    for rank, state in zip(sample, states, strict=True):
        got = plan_ranks[rank]
        if (got["row_group_position"], got["row_offset"]) != (state["row_group_position"], state["row_offset"]):
            raise AssertionError(f"dry run: rank {rank} disagrees with the upstream baseline")
    total = t_load + t_fp + t_ranks * run.world_size / len(sample)
    note = f"{row.note}; baseline extrapolated from {len(sample)} ranks ({total / 60:.0f} min)"
    return Row(row.case, row.fv_seconds, total, "upstream per-rank (extrapolated)", row.target, row.met, note)


def _in_process_preview(run: inputs.MigrationRun, out_dir: str) -> Row:
    """The same dry run in-process (no interpreter start, no JSON output), phase by phase."""
    from fvconsole.core.migration import preview_migration

    phases: list[tuple[str, float]] = []
    last = [time.perf_counter()]

    def progress(done: int, total: int, message: str) -> None:
        now = time.perf_counter()
        phases.append((message, now - last[0]))
        last[0] = now

    t, preview = timed(lambda: preview_migration(run.request(out_dir), progress))
    if preview.plan is None:
        raise AssertionError(f"preview refused: {[r.message for r in preview.refusals]}")
    # progress(k) marks the start of phase k: attribute each gap to the phase that just ended.
    names = [m for m, _ in phases]
    gaps = [d for _, d in phases][1:]
    detail = ", ".join(f"{name} {gap:.1f}s" for name, gap in zip(names, gaps, strict=False))
    return Row(f"dry run {run.world_size} ranks x {len(run.manifest['row_groups']):,} rg (in-process preview)",
               t, None, "", "", None, detail)
