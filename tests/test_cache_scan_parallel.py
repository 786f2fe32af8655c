"""A large root listed by forked workers (core/cache/parallel.py) gives the serial scan's value.

The scans run in a subprocess of their own: pytest's xdist workers have threads, and a process
with threads never forks workers. In it the size threshold is lowered (a root of a few dozen
entries stands for 200,000) and four CPUs are allowed, so three workers take a share each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fvconsole.demo.cache_builders import make_key, write_cache_entry

REPO = Path(__file__).resolve().parent.parent
STATUSES = ["complete", "partial", "incomplete", "writing", "invalid-manifest", "invalid-shard", "empty"]

SCRIPT = textwrap.dedent("""
    import json, os, sys, threading
    from fvconsole.core.cache import parallel, scan_cache
    from fvconsole.core.process_use import ProcessUse

    root, mode = sys.argv[1], sys.argv[2]
    forks = []
    real_fork = os.fork
    def counting_fork():
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid
    os.fork = counting_fork
    parallel.MIN_PARALLEL_ENTRIES = 0
    parallel.allowed_cpus = lambda: 4
    if mode == "failing-worker":
        parallel._worker_main = lambda *args: os._exit(3)
    use = ProcessUse()
    if mode == "interrupted":  # the parent (only) is interrupted at its third entry
        from fvconsole.core.cache import scan as scan_module
        parent, real_scan_entry, seen = os.getpid(), scan_module.scan_entry, []
        def interrupted(*args, **kwargs):
            seen.append(1)
            if os.getpid() == parent and len(seen) == 3:
                raise KeyboardInterrupt
            return real_scan_entry(*args, **kwargs)
        scan_module.scan_entry = interrupted
        fds = len(os.listdir("/proc/self/fd"))
        try:
            scan_cache(root, now=2e9, processes=use)
        except KeyboardInterrupt:
            pass
        try:
            os.waitpid(-1, 0)
            left = "a child is left"
        except ChildProcessError:
            left = None
        print(json.dumps({"forks": len(forks), "left": left, "fds_added": len(os.listdir("/proc/self/fd")) - fds}))
        sys.exit(0)
    forked = scan_cache(root, now=2e9, processes=use)
    forked_count = len(forks)
    try:
        os.waitpid(-1, os.WNOHANG)
        left = "a child is left"
    except ChildProcessError:
        left = None
    hold = threading.Event()
    thread = threading.Thread(target=hold.wait)
    thread.start()
    serial = scan_cache(root, now=2e9, processes=use)
    hold.set()
    thread.join()
    print(json.dumps({"forks": forked_count, "serial_forks": len(forks) - forked_count, "left": left,
                      "forked": forked.to_json(), "serial": serial.to_json()}))
""")


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Entries of every state with keys ending in every hex digit, and the other kinds of child."""
    root = tmp_path_factory.mktemp("parallel") / "cache"
    expected: dict[str, str] = {}
    for i in range(48):
        status = STATUSES[i % len(STATUSES)]
        path = write_cache_entry(root, make_key(f"entry-{i}"), status=status, num_shards=2, seed=i)
        expected[os.path.basename(path)] = {"writing": "incomplete", "invalid-manifest": "invalid",
                                           "invalid-shard": "invalid"}.get(status, status)
    (root / "notes.txt").write_text("an operator's file")
    (root / ("ab" * 8)).write_text("a key-shaped regular file")  # foreign, in a worker's share
    os.symlink("/etc", root / ("cd" * 8))  # a symlink entry, in a worker's share
    (root / f".evicting-{'ef' * 8}-123").mkdir()
    return root, expected


def _run(root: Path, mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root), mode], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _comparable(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("fs_free_bytes", "fs_total_bytes")}


def test_workers_list_the_same_root_as_one_process(mixed_root):
    root, expected = mixed_root
    got = _run(root, "ok")
    assert got["forks"] == 3 and got["serial_forks"] == 0 and got["left"] is None
    forked, serial = _comparable(got["forked"]), _comparable(got["serial"])
    assert forked == serial
    statuses = {e["key"]: e["status"] for e in forked["entries"]}
    assert {k: v for k, v in statuses.items() if k != "cd" * 8} == expected
    assert statuses["cd" * 8] == "invalid" and forked["entries"][0]["key"] < forked["entries"][-1]["key"]
    assert forked["foreign"] == sorted(["notes.txt", "ab" * 8])
    assert [x["key"] for x in forked["leftovers"]] == ["ef" * 8]
    assert {k[-1] for k in statuses} == set("0123456789abcdef")


def test_a_failed_worker_share_is_listed_by_the_parent(mixed_root):
    root, expected = mixed_root
    got = _run(root, "failing-worker")
    assert got["forks"] == 3 and got["left"] is None
    assert _comparable(got["forked"]) == _comparable(got["serial"])
    assert len(got["forked"]["entries"]) == len(expected) + 1


def test_an_interrupted_scan_leaves_no_worker_and_no_fd(mixed_root):
    root, _ = mixed_root
    got = _run(root, "interrupted")
    assert got == {"forks": 3, "left": None, "fds_added": 0}
