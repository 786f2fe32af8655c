"""File-system cases: executing a plan, scanning the shard cache, CLI startup."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

from benchmarks import baselines, inputs
from benchmarks.harness import Row, best_of, timed

HEAVY = ("torch", "textual", "pyarrow")


@contextlib.contextmanager
def slow_fsync(delay: float) -> Iterator[None]:
    """Make every os.fsync cost ``delay`` more seconds, like a network filesystem's commit."""
    real = os.fsync

    def fsync(fd: int) -> None:
        time.sleep(delay)
        real(fd)

    os.fsync = fsync
    try:
        yield
    finally:
        os.fsync = real


def execute_case(root: str, ranks: int, repeat: int, fsync_delay: float = 0.0) -> Row:
    """execute_plan (staging, parallel writes, verify, receipt, publish) vs the seed's loop."""
    from fvconsole.core.migration import preview_migration
    from fvconsole.core.sidecars import execute_plan

    run = inputs.migration_run(root, world_size=ranks, num_row_groups=ranks * 16, step=50)
    fv_times, base_times = [], []
    with slow_fsync(fsync_delay) if fsync_delay else contextlib.nullcontext():
        for i in range(repeat):
            out = os.path.join(root, f"fv-{i}")
            preview = preview_migration(run.request(out))
            plan = preview.plan
            if plan is None:
                raise AssertionError(f"preview refused: {[r.message for r in preview.refusals]}")
            t, receipt = timed(lambda p=plan: execute_plan(p))
            if len(receipt["sidecars"]) != ranks:
                raise AssertionError("execute_plan wrote the wrong number of sidecars")
            fv_times.append(t)
            base_out = os.path.join(root, f"seed-{i}")
            t, _ = timed(lambda o=base_out, p=plan: baselines.seed_write_loop(o, range(ranks), p.sidecar_payload))
            base_times.append(t)
            shutil.rmtree(out)
            shutil.rmtree(base_out)
    fv, base = min(fv_times), min(base_times)
    label = f"execute {ranks} ranks" + (f" (fsync +{fsync_delay * 1e3:.0f} ms, simulated NFS)" if fsync_delay else "")
    note = f"{ranks / fv:,.0f} files/s vs {ranks / base:,.0f} files/s"
    return Row(label, fv, base, "seed loop: save, fsync, reload, sha256", ">=1.0x", base / fv >= 1.0, note)


def cache_scan_case(root: str, entries: int, shards: int, repeat: int) -> list[Row]:
    """scan_cache over ``entries`` x ``shards`` small files vs ``du -sb`` (one lstat per file)."""
    from fvconsole.core.cache import scan_cache

    t_build, _ = timed(lambda: inputs.cache_root(root, entries, shards))
    scan = scan_cache(root)
    complete = sum(1 for e in scan.entries if e.status == "complete")
    if complete != entries:
        raise AssertionError(f"scan found {complete} complete entries, expected {entries}")
    baselines.du_bytes(root)  # warm the dentry/inode cache for both sides
    fv = best_of(lambda: scan_cache(root), repeat)
    base = best_of(lambda: baselines.du_bytes(root), repeat)
    files = entries * (shards + 1)
    rows = [Row(f"cache scan {entries:,} entries x {shards} shards (in-process)", fv, base, "du -sb",
                "<=1.5x du", fv <= 1.5 * base, f"{files:,} files; root built in {t_build:.0f} s")]
    headerless = best_of(lambda: scan_cache(root, check_headers=False), repeat)
    rows.append(Row(f"cache scan {entries:,} x {shards} (check_headers=False)", headerless, base, "du -sb",
                    "<=1.5x du", headerless <= 1.5 * base, "stat only, no safetensors header reads"))
    cli = best_of(lambda: _run([sys.executable, "-m", "fvconsole", "cache", "ls", root, "--json"]), repeat)
    rows.append(Row(f"`fvconsole cache ls --json` {entries:,} entries (CLI)", cli, base, "du -sb", "", None,
                    "includes interpreter start and JSON output"))
    return rows


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def _heavy_imports(cli_args: list[str]) -> list[str]:
    """Heavy modules loaded by running the CLI in-process in a fresh interpreter."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from fvconsole.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({cli_args!r})\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def startup_case(root: str, repeat: int) -> list[Row]:
    """Wall time of `fvconsole --help` and `cache ls --json` next to `python -c pass`."""
    cache = inputs.cache_root(os.path.join(root, "small-cache"), 8, 4)
    floor = best_of(lambda: _run([sys.executable, "-c", "pass"]), repeat)
    rows = []
    for label, args in (("fvconsole --help", ["--help"]), ("fvconsole cache ls --json", ["cache", "ls", cache, "--json"])):
        t = best_of(lambda a=args: _run([sys.executable, "-m", "fvconsole", *a]), repeat)
        heavy = _heavy_imports(args)
        rows.append(Row(f"startup: {label}", t, floor, "python -c pass", "no torch/textual/pyarrow",
                        not heavy, f"imports {', '.join(heavy)}" if heavy else "no torch/textual/pyarrow imported"))
    return rows
