"""Resume preflight at scale (issue 36 item 6): 1,024 ranks resuming over a 1,000,000-row-group manifest,
with every rank's sidecar (a published migration set in the override dir) and RNG snapshot read."""

from __future__ import annotations

import json
import os
import sys

from benchmarks import inputs
from benchmarks.harness import Row, run_command, timed


def preflight_case(root: str, ranks: int, row_groups: int) -> list[Row]:
    """``fvconsole preflight --json`` of a legacy checkpoint whose migrated set is the override dir: < 10 s."""
    t_setup, run = timed(lambda: inputs.migration_run(root, world_size=ranks, num_row_groups=row_groups))
    state_dir = os.path.join(root, "state")
    with open(os.devnull, "wb") as sink:
        migrate, code = run_command([sys.executable, "-m", "fvconsole", *run.cli_args(state_dir), "--yes", "--json"],
                                    stdout=sink)
    if code != 0:
        raise AssertionError(f"migrate --yes exited {code}")
    out_file = os.path.join(root, "preflight.json")
    with open(out_file, "wb") as handle:
        timing, code = run_command([sys.executable, "-m", "fvconsole", "preflight", "--config", run.config_path,
                                    "--resume", run.checkpoint, "--dataloader-state-dir", state_dir, "--json"],
                                   stdout=handle)
    with open(out_file, encoding="utf-8") as handle:
        report = json.load(handle)
    if code != 0 or report["go"] is not True:
        raise AssertionError(f"preflight exited {code}: {report.get('problems')}")
    ranked = [c for c in report["checks"] if c["check"] in ("dataloader", "rng") and c["status"] == "ok"
              and c.get("ranks") == list(range(ranks))]
    if len(ranked) != 2:
        raise AssertionError("preflight did not judge every rank's sidecar and RNG snapshot ok")
    return [Row(f"`fvconsole preflight --json` {ranks:,} ranks x {row_groups:,} rg, sidecars + RNG files (CLI)",
                timing.wall, None, "", "<10 s", timing.cpu < 10,
                f"GO; every rank's sidecar and RNG snapshot read, the manifest checked, the published set verified; "
                f"inputs built in {t_setup:.0f} s, migrated in {migrate.wall:.0f} s", timing.cpu)]
