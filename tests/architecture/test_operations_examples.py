"""The cron example of docs/operations.md, run as documented (the Slurm epilog is in test_fleet_slurm.py).

Each command of the crontab runs through ``/bin/sh -c`` exactly as written, with the
crontab's variables set to this test's values, on a 20 MiB tmpfs whose entries and sizes
make every expected number computable by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from docs_examples import crontab_entries, doc_example
from mounts import tmpfs
from prometheus_client.parser import text_string_to_metric_families
from sized_cache import MIB, PAGE, fs_free, key_of, sized_entry

DAY = 86400.0


def test_cron_example_runs_as_documented(tmp_path: Path) -> None:
    variables, commands = crontab_entries(doc_example("cron"))
    assert set(variables) == {"FASTVIDEO_WEIGHT_SHARD_CACHE", "PATH", "TEXTFILE"} and len(commands) == 2
    with tmpfs(tmp_path / "shm", 20 * MIB) as shm:
        root = shm / "wcache"
        # W is unused for 10 days (--older-than 7d); X, Y, Z are newer. Free: 20 - 16 MiB - 4 pages.
        for name, mib, age in (("W", 2, 10 * DAY), ("X", 6, 3 * DAY), ("Y", 5, 2 * DAY), ("Z", 3, DAY)):
            sized_entry(root, name, mib, age)
        home = tmp_path / "home"
        (home / "textfile").mkdir(parents=True)
        journal = tmp_path / "journal.jsonl"
        env = {"HOME": str(home), "FASTVIDEO_WEIGHT_SHARD_CACHE": str(root), "TEXTFILE": str(home / "textfile"),
               "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "FVCONSOLE_JOURNAL": str(journal)}
        for command in commands:
            run = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=120)
            assert run.returncode == 0 and run.stdout == "" and run.stderr == "", (command, run)
        # 30% of 20 MiB = 6 MiB. W (older than 7d) brings 4 MiB - 5 pages (the lock's record is on the
        # tmpfs too) to 6 MiB - 4 pages: short, so X, next in GC order, goes too; Y and Z stay.
        assert sorted(p.name for p in root.iterdir()) == sorted([key_of("Y"), key_of("Z")])
        assert fs_free(shm) == 12 * MIB - 2 * PAGE
    log = (home / "fvconsole-cron.log").read_text()
    assert f"evicted 2 entries from {root}" in log and "free-space target 6.0 MiB (--min-free-percent 30): reached" in log
    [line] = [json.loads(x) for x in journal.read_text().splitlines()]
    assert line["items"] == [key_of("W"), key_of("X")] and line["command"].startswith("fvconsole cache evict --older-than 7d")
    metrics = {f.name: f.samples for f in text_string_to_metric_families((home / "textfile" / "fvcache.prom").read_text())}
    assert {s.labels["status"]: s.value for s in metrics["fvconsole_cache_entries"]}["complete"] == 2


def test_slurm_prolog_example_makes_room_for_the_next_write(tmp_path: Path) -> None:
    from docs_examples import with_settings

    with tmpfs(tmp_path / "shm", 20 * MIB) as shm:
        root = shm / "wcache"
        # Oldest first: A (4 MiB), B (5 MiB), C (6 MiB); plus an empty entry (a skipped write).
        for name, mib, age in (("A", 4, 3 * DAY), ("B", 5, 2 * DAY), ("C", 6, DAY)):
            sized_entry(root, name, mib, age)
        (root / key_of("skipped")).mkdir()
        os.utime(root / key_of("skipped"), (0, 0))
        log = tmp_path / "prolog.log"
        # The next write is 3 MiB; with FastVideo's 5 GiB margin scaled to 5 MiB, 8 MiB must be free.
        script = with_settings(doc_example("slurm-prolog"), FVCONSOLE=str(Path(sys.executable).parent / "fvconsole"),
                               FASTVIDEO_WEIGHT_SHARD_CACHE=str(root), NEXT_WRITE_GB=str(3 / 1024),
                               MARGIN_GB=str(5 / 1024), LOG=str(log))
        free_before = fs_free(shm)
        assert free_before < 8 * MIB  # 20 MiB - 15 MiB - a few pages
        prolog = tmp_path / "prolog.sh"
        prolog.write_text(script)
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "FVCONSOLE_JOURNAL": str(tmp_path / "j.jsonl")}
        run = subprocess.run(["/bin/sh", str(prolog)], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and run.stdout == "" and run.stderr == "", run
        # The empty entry (--invalid) and A, the oldest, go: ~5 + 4 MiB free then; B and C stay.
        assert sorted(p.name for p in root.iterdir()) == sorted([key_of("B"), key_of("C")])
        assert fs_free(shm) >= 8 * MIB
    assert "reached" in log.read_text()
