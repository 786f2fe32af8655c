"""``python -m benchmarks [--quick] [--only CASE ...] [--json FILE]``: run the cases, print the table.

Exit status: 0 when every case ran (targets missed are reported in the table, not as
failures), 1 when a case crashed or its cross-check (baseline and fvconsole agree) failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.harness import Row, format_machine, format_table, machine_info

CASES = ("fingerprint", "plan", "dryrun", "reshard", "dcpkeys", "execute", "sidecars", "cache", "headers", "scale",
         "startup", "tui", "fleet", "prune", "preflight")


@dataclass(frozen=True)
class Sizes:
    """Problem sizes; FULL is the issue's acceptance configuration."""

    plan_ranks: int
    plan_row_groups: int
    plan_baseline_ranks: int | None  # None: time every rank
    e2e_ranks: int
    e2e_row_groups: int
    e2e_baseline_ranks: int
    exec_ranks: int
    exec_fsync_delay: float  # 0 disables the simulated network-filesystem row
    cache_entries: int
    cache_shards: int
    tui_ranks: int
    tui_entries: int
    key_presses: int
    repeat: int
    fleet_nodes: int = 1000
    fleet_per_node_sample: int = 100  # per-node fan-out costs >= 0.3 s per node: measured on a subset
    sidecar_ranks: int = 1024  # `migrate --yes` / `sidecars verify` end to end
    scale_cache_entries: int = 20_000  # `cache ls --json` at scale, serial (issue 28 item 6)
    scale_checkpoints: int = 20_000  # `checkpoints ls` at scale
    reshard_ranks: int = 4096  # `migrate` dry run of an elastic resume to twice the ranks (issue 30 item 8)
    reshard_row_groups: int = 1_000_000
    prune_checkpoints: int = 2000  # `checkpoints prune` dry run (issue 31 item 6)
    prune_files: int = 100_000  # one checkpoint of this many files removed by `checkpoints prune --yes`
    preflight_ranks: int = 1024  # `preflight` of every rank's sidecar and RNG file (issue 36 item 6)
    preflight_row_groups: int = 1_000_000


FULL = Sizes(1024, 100_000, 128, 4096, 1_000_000, 8, 1024, 0.005, 2000, 32, 4096, 2000, 15, 3)
QUICK = Sizes(64, 5_000, 16, 256, 20_000, 4, 64, 0.0, 100, 8, 256, 200, 4, 1, 200, 10, sidecar_ranks=64,
              scale_cache_entries=300, scale_checkpoints=20, reshard_ranks=64, reshard_row_groups=20_000,
              prune_checkpoints=50, prune_files=2000, preflight_ranks=64, preflight_row_groups=20_000)


def _runners(sizes: Sizes, tmp: str) -> dict[str, Callable[[], list[Row]]]:
    from benchmarks import (
        cases_fleet,
        cases_io,
        cases_plan,
        cases_preflight,
        cases_retention,
        cases_sidecars,
        cases_tui,
    )

    def plan() -> list[Row]:
        return [
            cases_plan.plan_case(sizes.plan_ranks, sizes.plan_row_groups, sp, sizes.plan_baseline_ranks, sizes.repeat)
            for sp in (1, 4)
        ]

    def execute() -> list[Row]:
        rows = [cases_io.execute_case(f"{tmp}/exec", sizes.exec_ranks, max(2, sizes.repeat))]
        if sizes.exec_fsync_delay:
            rows.append(cases_io.execute_case(f"{tmp}/exec-nfs", sizes.exec_ranks, 1, sizes.exec_fsync_delay))
        return rows

    return {
        "fingerprint": lambda: cases_plan.fingerprint_case(sizes.e2e_row_groups, min(2, sizes.repeat)),
        "plan": plan,
        "dryrun": lambda: cases_plan.dry_run_case(f"{tmp}/e2e", sizes.e2e_ranks, sizes.e2e_row_groups,
                                                  sizes.e2e_baseline_ranks, min(2, sizes.repeat)),
        "reshard": lambda: cases_plan.reshard_case(f"{tmp}/reshard", sizes.reshard_ranks, sizes.reshard_row_groups),
        "dcpkeys": lambda: [cases_io.dcp_keys_case(f"{tmp}/dcp", max(2, sizes.repeat))],
        "execute": execute,
        "sidecars": lambda: cases_sidecars.sidecar_cases(f"{tmp}/sidecars", sizes.sidecar_ranks, sizes.repeat),
        "cache": lambda: cases_io.cache_scan_case(f"{tmp}/cache", sizes.cache_entries, sizes.cache_shards,
                                                  sizes.repeat),
        "headers": lambda: cases_io.header_case(f"{tmp}/headers", max(2, sizes.repeat)),
        "scale": lambda: cases_io.scale_cases(f"{tmp}/scale", sizes.scale_cache_entries, sizes.scale_checkpoints,
                                              min(2, sizes.repeat)),
        "startup": lambda: cases_io.startup_case(f"{tmp}/startup", max(3, sizes.repeat)),
        "tui": lambda: cases_tui.tui_cases(f"{tmp}/tui", sizes.tui_ranks, sizes.tui_entries, sizes.key_presses),
        "fleet": lambda: cases_fleet.fanout_case(f"{tmp}/fleet", sizes.fleet_nodes, sizes.fleet_per_node_sample),
        "preflight": lambda: cases_preflight.preflight_case(f"{tmp}/preflight", sizes.preflight_ranks,
                                                            sizes.preflight_row_groups),
        "prune": lambda: cases_retention.prune_cases(f"{tmp}/prune", sizes.prune_checkpoints, sizes.prune_files,
                                                     min(2, sizes.repeat)),
    }


def _compile_package() -> None:
    """Compile fvconsole's bytecode first, as installing a package does (pip compiles every module).

    The fresh-interpreter cases would otherwise compile every imported module from source at
    each start where ``PYTHONDONTWRITEBYTECODE`` is set or the tree is read-only, while the
    baselines' torch was compiled when it was installed.
    """
    import compileall

    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fvconsole")
    compileall.compile_dir(package, quiet=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (about 20 s; used by the smoke test)")
    parser.add_argument("--only", nargs="+", choices=CASES, metavar="CASE", help=f"run only these: {', '.join(CASES)}")
    parser.add_argument("--json", metavar="FILE", help="also write the machine and rows as JSON")
    parser.add_argument("--tmp", metavar="DIR", help="parent of the temp dir (default: the system temp dir)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    _compile_package()
    info = machine_info()
    print(format_machine(info), flush=True)
    rows: list[Row] = []
    failed: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fvconsole-bench-", dir=args.tmp) as tmp:
        runners = _runners(sizes, tmp)
        for name in args.only or CASES:
            t0 = time.perf_counter()
            try:
                new = runners[name]()
            except Exception as exc:  # noqa: BLE001 - report and go on with the other cases
                traceback.print_exc()
                failed.append(name)
                new = [Row(f"{name}: FAILED", None, note=f"{type(exc).__name__}: {exc}"[:200])]
            rows.extend(new)
            print(f"  {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        info["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(format_machine({"load average at end": info["load average at end"]}))
        print(format_table(rows))
        print(f"total {time.perf_counter() - started:.0f} s ({'quick' if args.quick else 'full'} sizes)", flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump({"machine": info, "quick": args.quick, "rows": [r.to_json() for r in rows]}, handle,
                          indent=2)
        print("removing the temp dir …", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
