"""File-system cases: executing a plan, scanning the shard cache, CLI startup."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

from benchmarks import baselines, inputs
from benchmarks.harness import Row, Timing, best_command, measure, run_command, timed
from fvconsole.core.shared.durable import ENV_DURABILITY

HEAVY = ("torch", "textual", "pyarrow")


@contextlib.contextmanager
def slow_fsync(delay: float) -> Iterator[None]:
    """Make every os.fsync cost ``delay`` more seconds, like a network filesystem's commit.

    fvconsole fsyncs each file on a network filesystem (``core.shared.durable`` trusts syncfs only
    on local ones), so the simulation also makes it choose per-file fsync here.
    """
    real = os.fsync
    forced = os.environ.get(ENV_DURABILITY)

    def fsync(fd: int) -> None:
        time.sleep(delay)
        real(fd)

    os.fsync = fsync
    os.environ[ENV_DURABILITY] = "fsync"
    try:
        yield
    finally:
        os.fsync = real
        if forced is None:
            os.environ.pop(ENV_DURABILITY, None)
        else:
            os.environ[ENV_DURABILITY] = forced


def execute_case(root: str, ranks: int, repeat: int, fsync_delay: float = 0.0) -> Row:
    """execute_migration (staging, parallel writes, verify, receipt, publish) vs the seed's loop."""
    from fvconsole.core.migration.locked import execute_migration
    from fvconsole.core.migration.plan import preview_migration

    run = inputs.migration_run(root, world_size=ranks, num_row_groups=ranks * 16, step=50)
    fv_times, base_times = [], []
    with slow_fsync(fsync_delay) if fsync_delay else contextlib.nullcontext():
        for i in range(repeat):
            out = os.path.join(root, f"fv-{i}")
            preview = preview_migration(run.request(out))
            plan = preview.plan
            if plan is None:
                raise AssertionError(f"preview refused: {[r.message for r in preview.refusals]}")
            box: dict[str, dict] = {}
            fv_times.append(measure(lambda p=plan, b=box: b.setdefault("receipt", execute_migration(p).receipt)))
            if len(box["receipt"]["sidecars"]) != ranks:
                raise AssertionError("execute_migration wrote the wrong number of sidecars")
            base_out = os.path.join(root, f"seed-{i}")
            base_times.append(measure(lambda o=base_out, p=plan: baselines.seed_write_loop(o, range(ranks),
                                                                                        p.sidecar_payload)))
            shutil.rmtree(out)
            shutil.rmtree(base_out)
    # Wall time is the point here (overlapping I/O); CPU time (all threads) is only reported.
    fv = min(t.wall for t in fv_times)
    base = min(t.wall for t in base_times)
    cpu = f"cpu {_fmt_s(min(t.cpu for t in fv_times))} vs {_fmt_s(min(t.cpu for t in base_times))}"
    label = f"execute {ranks} ranks" + (f" (fsync +{fsync_delay * 1e3:.0f} ms, simulated NFS)" if fsync_delay else "")
    note = f"{ranks / fv:,.0f} files/s vs {ranks / base:,.0f} files/s; {cpu}"
    return Row(label, fv, base, "seed loop: save, fsync, reload, sha256", ">=1.0x", base / fv >= 1.0, note)


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.2f} s"


def cache_scan_case(root: str, entries: int, shards: int, repeat: int) -> list[Row]:
    """scan_cache over ``entries`` x ``shards`` small files vs ``du -sb`` (one lstat per file)."""
    from fvconsole.core.cache import scan_cache

    t_build, _ = timed(lambda: inputs.cache_root(root, entries, shards))
    scan = scan_cache(root)
    complete = sum(1 for e in scan.entries if e.status == "complete")
    if complete != entries:
        raise AssertionError(f"scan found {complete} complete entries, expected {entries}")
    baselines.du_bytes(root)  # warm the dentry/inode cache for both sides
    du = best_command(["du", "-sb", root], repeat)
    fv = measure(lambda: scan_cache(root), repeat)
    files = entries * (shards + 1)
    rows = [Row(f"cache scan {entries:,} entries x {shards} shards (in-process)", fv.wall, du.wall, "du -sb",
                "<=1.5x du", fv.cpu <= 1.5 * du.cpu, f"{files:,} files; root built in {t_build:.0f} s",
                fv.cpu, du.cpu)]
    stat_only = measure(lambda: scan_cache(root, check_headers=False), repeat)
    rows.append(Row(f"cache scan {entries:,} x {shards} (check_headers=False)", stat_only.wall, du.wall, "du -sb",
                    "<=1.5x du", stat_only.cpu <= 1.5 * du.cpu, "stat only, no safetensors header reads",
                    stat_only.cpu, du.cpu))
    floor = measure(lambda: python_stat_floor(root), repeat)
    rows.append(Row(f"python floor: scandir + lstat of {files:,} files", floor.wall, du.wall, "du -sb", "", None,
                    "the least any Python scan can do (no parsing, no classification)", floor.cpu, du.cpu))
    cli = best_command([sys.executable, "-m", "fvconsole", "cache", "ls", root, "--json"], repeat)
    rows.append(Row(f"`fvconsole cache ls --json` {entries:,} entries (CLI)", cli.wall, du.wall, "du -sb", "", None,
                    "includes interpreter start and JSON output", cli.cpu, du.cpu))
    return rows


def python_stat_floor(root: str) -> int:
    """Total size of the regular files two levels down: one scandir per dir, one lstat per file."""
    total = 0
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                with os.scandir(entry.path) as files:
                    for item in files:
                        total += item.stat(follow_symlinks=False).st_size
    return total


def _keys_in_fresh_interpreter(code: str, out_file: str, repeat: int) -> tuple[Timing, list[str]]:
    """Fastest of ``repeat`` fresh interpreters running ``code``, and the JSON keys it printed."""
    runs = []
    for _ in range(max(1, repeat)):
        with open(out_file, "wb") as handle:
            timing, code_ = run_command([sys.executable, "-c", code], stdout=handle)
        if code_ != 0:
            raise AssertionError(f"reading the DCP keys exited {code_}")
        runs.append(timing)
    with open(out_file, encoding="utf-8") as handle:
        keys = json.loads(handle.read().strip().splitlines()[-1])
    return Timing(min(t.wall for t in runs), min(t.cpu for t in runs)), keys


def dcp_keys_case(root: str, repeat: int) -> Row:
    """Reading dcp/.metadata keys in a fresh interpreter: the core's reader vs torch's FileSystemReader."""
    from fvconsole.demo.builders import build_run

    fixture = build_run(os.path.join(root, "run"), num_gpus=4)
    ckpt = fixture.checkpoints[0]
    dcp = os.path.join(ckpt, "dcp")
    core_way = ("import json, sys; from fvconsole.core.checkpoints import read_dcp_metadata;"
                f" k = list(read_dcp_metadata({ckpt!r}).keys); assert k and 'torch' not in sys.modules;"
                " print(json.dumps(k))")
    torch_way = ("import json; from torch.distributed.checkpoint import FileSystemReader;"
                 f" k = sorted(FileSystemReader({dcp!r}).read_metadata().state_dict_metadata); print(json.dumps(k))")
    fast, core_keys = _keys_in_fresh_interpreter(core_way, os.path.join(root, "core.json"), repeat)
    slow, torch_keys = _keys_in_fresh_interpreter(torch_way, os.path.join(root, "torch.json"), repeat)
    if core_keys != torch_keys:
        raise AssertionError("the core's DCP reader and torch's FileSystemReader read different keys")
    return Row("DCP .metadata keys, fresh interpreter", fast.wall, slow.wall,
               "import torch.distributed.checkpoint + FileSystemReader", "", None,
               f"core.checkpoints.read_dcp_metadata, no torch import; same {len(core_keys)} keys",
               fast.cpu, slow.cpu)


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
    floor = best_command([sys.executable, "-c", "pass"], repeat)
    rows = []
    for label, args in (("fvconsole --help", ["--help"]), ("fvconsole cache ls --json", ["cache", "ls", cache, "--json"])):
        t = best_command([sys.executable, "-m", "fvconsole", *args], repeat)
        heavy = _heavy_imports(args)
        rows.append(Row(f"startup: {label}", t.wall, floor.wall, "python -c pass", "no torch/textual/pyarrow",
                        not heavy, f"imports {', '.join(heavy)}" if heavy else "no torch/textual/pyarrow imported",
                        t.cpu, floor.cpu))
    return rows


#: Runs argv[2:] with stdout to argv[1] and prints its wall time, CPU time, peak RSS and exit code. A small
#: process in between, because a child's peak RSS counts the memory of the process it was forked from.
_MEASURE = """
import json, os, resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    start = time.perf_counter()
    code = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL, check=False).returncode
    wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, code]))
"""


def _run_measured(cmd: list[str], out_file: str, env: dict[str, str] | None = None) -> tuple[Timing, int, int]:
    """(wall and CPU time, peak RSS in bytes, exit code) of one child writing its stdout to ``out_file``."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, out_file, *cmd], capture_output=True, text=True,
                          check=True, env=env)
    wall, cpu, rss, code = json.loads(proc.stdout)
    return Timing(wall, cpu), rss, code


def _best_measured(cmd: list[str], out_file: str, repeat: int, env: dict[str, str] | None = None,
                   before: Callable[[], object] | None = None) -> tuple[Timing, int]:
    """Best of ``repeat`` runs; ``before`` runs ahead of each (e.g. emptying a cache for a cold run)."""
    runs = []
    for _ in range(max(1, repeat)):
        if before is not None:
            before()
        timing, rss, code = _run_measured(cmd, out_file, env)
        if code != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {code}")
        runs.append((timing, rss))
    return Timing(min(t.wall for t, _ in runs), min(t.cpu for t, _ in runs)), min(r for _, r in runs)


def scale_cases(root: str, cache_entries: int, checkpoints: int, repeat: int) -> list[Row]:
    """The listings at scale (issue 28 item 6): `cache ls --json` of 20,000 entries, serially (time and peak
    memory, output checked entry for entry) and `checkpoints ls` of many real checkpoints."""
    os.makedirs(root, exist_ok=True)
    # On tmpfs where there is one, as FastVideo's node-local caches are (/dev/shm): a root on a
    # disk measures the page cache (many directories fall out of it under memory pressure).
    with inputs.tmpfs_dir() as shm:
        cache = os.path.join(shm or root, "cache")
        medium = "tmpfs" if shm else "the temp dir's filesystem"
        t_build, _ = timed(lambda: inputs.cache_root(cache, cache_entries, 1))
        out = os.path.join(root, "ls.json")
        ls, rss = _best_measured([sys.executable, "-m", "fvconsole", "cache", "ls", cache, "--json"], out, repeat)
    with open(out, encoding="utf-8") as handle:
        doc = json.load(handle)
    if doc["entry_count"] != cache_entries or {e["status"] for e in doc["entries"]} != {"complete"}:
        raise AssertionError("cache ls --json did not list every entry as complete")
    mib = rss / 2**20
    # Judged on wall time, what the operator waits for; the listing is serial (one process).
    rows = [Row(f"`fvconsole cache ls --json` {cache_entries:,} entries (CLI)", ls.wall, None, "", "<3 s",
                ls.wall < 3, f"wall; one serial listing process; peak RSS "
                f"{mib:.0f} MB; {os.path.getsize(out) / 2**20:.0f} MB of JSON; root on {medium}, built in {t_build:.0f} s", ls.cpu)]
    t_build, ckpts = timed(lambda: inputs.checkpoints_dir(os.path.join(root, "ckpts"), checkpoints))
    listing = os.path.join(root, "checkpoints.json")
    # The DCP verdict cache (core/checkpoints/verdicts.py) in a dir of this case's own: "first" empties
    # it before each run (every .metadata decoded), "again" lists with what the first run kept.
    xdg = os.path.join(root, "xdg-cache")
    env = {**os.environ, "XDG_CACHE_HOME": xdg}
    env.pop("FVCONSOLE_DCP_CACHE", None)
    cmd = [sys.executable, "-m", "fvconsole", "checkpoints", "ls", ckpts, "--json"]
    for label, before in (("first listing", lambda: shutil.rmtree(xdg, ignore_errors=True)), ("listed again", None)):
        ck, rss = _best_measured(cmd, listing, repeat, env, before)
        with open(listing, encoding="utf-8") as handle:
            found = json.load(handle)["checkpoints"]
        if len(found) != checkpoints or {c["kind"] for c in found} != {"legacy"}:
            raise AssertionError("checkpoints ls did not list every checkpoint as legacy")
        rows.append(Row(f"`fvconsole checkpoints ls --json` {checkpoints:,} checkpoints (CLI, {label})", ck.wall, None,
                        "", "<5 s", ck.cpu < 5, f"peak RSS {rss / 2**20:.0f} MB; real DCP checkpoints (2 ranks), each .metadata with its own path and save_id; "
                        f"built in {t_build:.0f} s", ck.cpu))
    return rows


def _hostile_shard(entry: str, shard: str, header: dict) -> int:
    """Replace ``shard``'s header by ``header`` (its tensor data kept); the header's size in bytes."""
    path = os.path.join(entry, shard)
    with open(path, "rb") as handle:
        data = handle.read()
    length = int.from_bytes(data[:8], "little")
    raw = json.dumps(header).encode()
    with open(path, "wb") as handle:
        handle.write(len(raw).to_bytes(8, "little") + raw + data[8 + length:])
    return len(raw)


def header_case(root: str, repeat: int) -> list[Row]:
    """`cache verify` of one entry whose shard has a ~1 MB hostile header, vs safetensors' own
    (Rust) reader refusing the same file (issue 29 item 2: linear in the header's size)."""
    from safetensors import safe_open

    from fvconsole.core.cache.verify import verify_entry
    from fvconsole.demo.cache_builders import write_cache_entry

    cases = {
        "80,000 dims of 2^62": {"w": {"dtype": "F32", "shape": [2**62] * 80_000, "data_offsets": [0, 4]}},
        "6,000 tensors x 8 dims": {f"t{i}": {"dtype": "F32", "shape": [2**40] * 8, "data_offsets": [4 * i, 4 * i + 4]}
                                   for i in range(6_000)},
    }
    rows = []
    for label, header in cases.items():
        entry = write_cache_entry(os.path.join(root, label.split()[0].replace(",", "")), num_shards=2, seed=1)
        size = _hostile_shard(entry, "shard1-of-2.safetensors", header)
        key = os.path.basename(entry)
        result = verify_entry(entry, key)
        if result.ok:
            raise AssertionError(f"{label}: a hostile header verified")

        def refuse(path: str = os.path.join(entry, "shard1-of-2.safetensors"), label: str = label) -> None:
            try:
                with safe_open(path, framework="np") as handle:
                    list(handle.keys())
            except Exception:  # noqa: BLE001 - safetensors raises its own SafetensorError
                return
            raise AssertionError(f"{label}: safetensors read a hostile header")

        fv = measure(lambda entry=entry, key=key: verify_entry(entry, key), repeat)
        base = measure(refuse, repeat)
        rows.append(Row(f"`cache verify` of a {size / 2**20:.1f} MB header: {label}", fv.wall, base.wall,
                        "safetensors safe_open refusing it", "<0.5 s", fv.cpu < 0.5,
                        f"{len(result.problems)} problem(s) reported; every number typed and range-checked",
                        fv.cpu, base.cpu))
    return rows
