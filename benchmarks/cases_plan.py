"""Plan, fingerprint and end-to-end dry-run cases (cursor arithmetic at scale)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from benchmarks import baselines, inputs
from benchmarks.harness import Row, Timing, measure, run_command, timed

SEED = 42
_CLI_RECORDING_IMPORTS = (
    "import sys\n"
    "from fvconsole.cli import main\n"
    "code = main(sys.argv[2:])\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    f.write(' '.join(m for m in ('torch', 'textual', 'pyarrow') if m in sys.modules))\n"
    "sys.exit(code)\n"
)


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
    from fvconsole.core.formats.streaming import Topology, compute_cursors, shard_layout

    manifest = inputs.synthetic_manifest(row_groups, "/data/bench-plan")
    rows = [g["rows"] for g in manifest["row_groups"]]
    starts = [g["sample_start"] for g in manifest["row_groups"]]
    topo = Topology(ranks, sp, inputs.BATCH, SEED, True)
    yielded = inputs.STEP * inputs.BATCH

    def fv() -> Any:
        shards, _spw = shard_layout(rows, topo)
        return compute_cursors(rows, starts, shards, topo, yielded)

    cursors = fv()
    fv_t = measure(fv, repeat)
    sample = _sample(ranks, baseline_ranks or ranks)
    states: list[dict] = []
    base_t = measure(lambda: states.extend(_baseline_states(manifest, sample, ranks, sp, yielded)))
    _check_agree(states, cursors, sample, "plan")
    scale = ranks / len(sample)
    note = "cursors identical to baseline"
    if len(sample) < ranks:
        note += f"; baseline extrapolated from {len(sample)} ranks"
    row = Row(
        f"plan {ranks} ranks x {row_groups:,} rg, sp {sp}", fv_t.wall, base_t.wall * scale,
        "per-rank upstream recompute", ">=50x and <1 s", None, note, fv_t.cpu, base_t.cpu * scale,
    )
    return _judge(row, row.ratio is not None and row.ratio >= 50 and fv_t.cpu < 1)


def _judge(row: Row, met: bool) -> Row:
    from dataclasses import replace

    return replace(row, met=met)


def fingerprint_case(row_groups: int, repeat: int = 2) -> list[Row]:
    """The manifest fingerprint: fastjson (stdlib fast path; orjson when present) vs json.dumps."""
    from fvconsole.core.formats import fastjson

    manifest = inputs.synthetic_manifest(row_groups, "/data/bench-fp")
    groups = manifest["row_groups"]
    expected = baselines.upstream_fingerprint(groups)
    base = measure(lambda: baselines.upstream_fingerprint(groups), repeat)
    rows = []
    for label, use_orjson in (("stdlib fast path", False), ("orjson path", True)):
        if fastjson.fingerprint(groups, use_orjson=use_orjson) != expected:
            raise AssertionError(f"fingerprint {label} differs from the stdlib")
        t = measure(lambda u=use_orjson: fastjson.fingerprint(groups, use_orjson=u), repeat)
        rows.append(Row(f"fingerprint {row_groups:,} rg ({label})", t.wall, base.wall, "json.dumps + sha256",
                        "byte-identical", True, "digest identical", t.cpu, base.cpu))
    return rows


def dry_run_case(root: str, ranks: int, row_groups: int, baseline_ranks: int, repeat: int = 1) -> list[Row]:
    """`fvconsole migrate` without --yes (subprocess, manifest on disk) vs the upstream approach."""
    t_setup, run = timed(lambda: inputs.migration_run(root, world_size=ranks, num_row_groups=row_groups))
    out_dir = os.path.join(root, "sidecars")
    out_file = os.path.join(root, "dry-run.json")
    heavy_file = os.path.join(root, "heavy-modules.txt")
    # The same entry point as `python -m fvconsole`, plus a record of the heavy modules it loaded.
    cmd = [sys.executable, "-c", _CLI_RECORDING_IMPORTS, heavy_file, *run.cli_args(out_dir), "--json"]
    with open(out_file, "wb") as handle:
        fv_t, code = run_command(cmd, stdout=handle)
    if code != 0:
        raise AssertionError(f"dry run exited {code}")
    with open(out_file, encoding="utf-8") as handle:
        report = json.load(handle)
    plan_ranks = report["plan"]["ranks"]
    if os.path.exists(out_dir):
        raise AssertionError("a dry run wrote the output dir")

    with open(heavy_file, encoding="utf-8") as handle:
        heavy = handle.read().split()
    imported = f"imports {', '.join(heavy)}" if heavy else "no torch/textual/pyarrow imported"
    row = Row(f"dry run e2e {ranks} ranks x {row_groups:,} rg (CLI, incl. startup)", fv_t.wall,
              None, "", "<10 s", fv_t.cpu < 10, f"{imported}; inputs built in {t_setup:.0f} s", fv_t.cpu)
    stock = _in_process_preview(run, out_dir, repeat)
    with _stdlib_fingerprint():
        slow = _in_process_preview(run, out_dir, repeat)
    stock = Row(stock.case, stock.fv_seconds, slow.fv_seconds, "same, stdlib fingerprint", "", None, stock.note,
                stock.fv_cpu, slow.fv_cpu)
    return [_with_baseline(row, run, plan_ranks, baseline_ranks), stock]


def reshard_case(root: str, ranks: int, row_groups: int) -> list[Row]:
    """`fvconsole migrate` dry runs of an elastic resume to twice the ranks: every mode's accounting, then one chosen.

    The accounting works on row-group ranges (core/migration/reshard.py); the cross-check is the
    ranges' own invariant: consumed + to_read - repeated + unread is every row of the manifest.
    """
    _t_setup, run = timed(lambda: inputs.migration_run(root, world_size=ranks, num_row_groups=row_groups))
    out_dir = os.path.join(root, "sidecars")
    target = ["--set", f"training.distributed.num_gpus={2 * ranks}"]
    rows = []
    for label, extra, want in (("all three modes, refused without a mode", [], 1),
                               ("--reshard nearest", ["--reshard", "nearest"], 0)):
        out_file = os.path.join(root, "reshard.json")
        with open(out_file, "wb") as handle:
            fv_t, code = run_command([sys.executable, "-m", "fvconsole", *run.cli_args(out_dir), *target, *extra,
                                      "--json"], stdout=handle)
        if code != want:
            raise AssertionError(f"reshard dry run ({label}) exited {code}, expected {want}")
        with open(out_file, encoding="utf-8") as handle:
            report = json.load(handle)
        reshard = report["reshard"] if want else report["plan"]["reshard"]
        total = sum(g["rows"] for g in run.manifest["row_groups"])
        for mode, acc in reshard["modes"].items():
            if acc["consumed"] + acc["to_read"] - acc["repeated"] + acc["unread"] != total:
                raise AssertionError(f"reshard {mode}: the accounting does not cover the manifest's {total} rows")
        rows.append(Row(f"reshard dry run {ranks} -> {2 * ranks} ranks x {row_groups:,} rg ({label}; CLI)",
                        fv_t.wall, None, "", "<10 s", fv_t.cpu < 10,
                        "accounting covers every row: consumed + to_read - repeated + unread", fv_t.cpu))
    return rows


@contextlib.contextmanager
def _stdlib_fingerprint() -> Iterator[None]:
    """Undo the fastjson integration (manifest.compute_fingerprint) to show what it buys."""
    from fvconsole.core.formats import fastjson, manifest

    original = manifest.compute_fingerprint
    manifest.compute_fingerprint = fastjson.stdlib_fingerprint
    try:
        yield
    finally:
        manifest.compute_fingerprint = original


def _with_baseline(row: Row, run: inputs.MigrationRun, plan_ranks: list[dict], sample_count: int) -> Row:
    """Upstream: json.load + FastVideo's fingerprint + reconstruct per rank (sampled, extrapolated)."""

    def load() -> dict:
        with open(run.manifest_path, encoding="utf-8") as handle:
            return json.load(handle)

    box: dict[str, Any] = {}
    t_load = measure(lambda: box.setdefault("manifest", load()))
    manifest = box["manifest"]
    t_fp = measure(lambda: baselines.upstream_fingerprint(manifest["row_groups"]))
    sample = _sample(run.world_size, sample_count)
    yielded = run.step * inputs.BATCH
    states: list[dict] = []
    t_ranks = measure(lambda: states.extend(_baseline_states(manifest, sample, run.world_size, 1, yielded)))
    for rank, state in zip(sample, states, strict=True):
        got = plan_ranks[rank]
        if (got["row_group_position"], got["row_offset"]) != (state["row_group_position"], state["row_offset"]):
            raise AssertionError(f"dry run: rank {rank} disagrees with the upstream baseline")
    scale = run.world_size / len(sample)
    total = Timing(t_load.wall + t_fp.wall + t_ranks.wall * scale, t_load.cpu + t_fp.cpu + t_ranks.cpu * scale)
    note = f"{row.note}; baseline extrapolated from {len(sample)} ranks ({total.cpu / 60:.0f} min cpu)"
    return Row(row.case, row.fv_seconds, total.wall, "upstream per-rank (extrapolated)", row.target, row.met, note,
               row.fv_cpu, total.cpu)


def _in_process_preview(run: inputs.MigrationRun, out_dir: str, repeat: int) -> Row:
    """The same dry run in-process (no interpreter start, no JSON output), phase by phase."""
    from fvconsole.core.migration.plan import preview_migration

    phases: list[tuple[str, float]] = []
    last = [time.perf_counter()]

    def progress(done: int, total: int, message: str) -> None:
        now = time.perf_counter()
        phases.append((message, now - last[0]))
        last[0] = now

    box: dict[str, Any] = {}

    def once() -> None:
        phases.clear()
        last[0] = time.perf_counter()
        box["preview"] = preview_migration(run.request(out_dir), progress)

    t = measure(once, repeat)
    preview = box["preview"]
    if preview.plan is None:
        raise AssertionError(f"preview refused: {[r.message for r in preview.refusals]}")
    # progress(k) marks the start of phase k: attribute each gap to the phase that just ended.
    names = [m for m, _ in phases]
    gaps = [d for _, d in phases][1:]
    detail = ", ".join(f"{name} {gap:.1f}s" for name, gap in zip(names, gaps, strict=False))
    return Row(f"dry run {run.world_size} ranks x {len(run.manifest['row_groups']):,} rg (in-process preview)",
               t.wall, None, "", "", None, f"wall per phase: {detail}", t.cpu)
