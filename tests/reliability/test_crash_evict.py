"""Acceptance 2: SIGKILL during `fvconsole cache evict --yes`.

The eviction path has no fault hook, so kills are injected at the syscall level with
strace: on entry to the N-th ``rename`` (hiding an entry) or the N-th ``unlinkat``
(removing a file or directory), for every rename and for unlinkat points spread over the
whole run. After each kill: every entry still under its key is byte-identical to before
(never half-deleted under its original name), anything half-removed is a visible
``.evicting-*`` leftover in `cache ls`, and the next eviction cleans it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .harness import (
    assert_no_traceback,
    count_syscalls,
    run_cli_killed_at_syscall,
    run_inproc,
    strace_available,
    tree_digest,
)

ENTRIES = 6
SHARDS = 4
UNLINK_POINTS = 16
KEY_RE = re.compile(r"^[0-9a-f]{16}$")
LEFTOVER_RE = re.compile(r"^\.evicting-([0-9a-f]{16})-\d+$")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache root of complete entries last used an hour ago (never written to again)."""
    reason = strace_available()
    if reason:
        pytest.skip(reason)
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path_factory.mktemp("evict-template") / "cache"
    for seed in range(ENTRIES):
        write_cache_entry(root, seed=seed, num_shards=SHARDS, tensor_bytes=2048)
    return root


def entry_digests(root: Path) -> dict[str, dict]:
    return {p.name: tree_digest(p) for p in root.iterdir() if KEY_RE.match(p.name)}


def spread(total: int, n: int) -> list[int]:
    if total <= n:
        return list(range(1, total + 1))
    return sorted({1 + round(i * (total - 1) / (n - 1)) for i in range(n)})


def check_after_kill(root: Path, original: dict[str, dict], capsys: pytest.CaptureFixture[str]) -> str:
    """No entry half-deleted under its key; leftovers listed by `cache ls`; returns the outcome."""
    names = sorted(p.name for p in root.iterdir())
    intact, leftovers = [], []
    for name in names:
        if KEY_RE.match(name):
            assert tree_digest(root / name) == original[name], f"entry {name} changed under its original name"
            intact.append(name)
        elif name != ".fvconsole-evictor.lock":  # the killed evictor's lock file (the kernel dropped its lock)
            match = LEFTOVER_RE.match(name)
            assert match, f"unexpected name in the cache root after a kill: {name}"
            assert match.group(1) not in intact and match.group(1) in original
            leftovers.append(name)
    assert len(leftovers) <= 1, f"one evictor killed once left several leftovers: {leftovers}"
    ls = run_inproc(["cache", "ls", str(root), "--json"], capsys)
    assert ls.returncode == 0, ls.describe()
    assert_no_traceback(ls)
    import json

    payload = json.loads(ls.stdout)
    assert sorted(e["key"] for e in payload["entries"]) == intact
    assert sorted(x["name"] for x in payload["leftovers"]) == leftovers
    if leftovers:
        return "leftover listed by `cache ls`"
    return "entries intact" if len(intact) == len(original) else "entries evicted whole"


def next_eviction_cleans(root: Path, original: dict[str, dict], capsys: pytest.CaptureFixture[str]) -> None:
    """An eviction selecting nothing still removes leftovers and leaves live entries alone."""
    before = entry_digests(root)
    again = run_inproc(["cache", "evict", str(root), "--older-than", "3650d", "--yes"], capsys)
    assert again.returncode == 0, again.describe()
    assert [p.name for p in root.iterdir() if not KEY_RE.match(p.name)] == []
    assert entry_digests(root) == before
    assert all(before[k] == original[k] for k in before)


def _trial(template: Path, work: Path, syscall: str, n: int, capsys, original) -> str:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(template, work)
    assert entry_digests(work) == original
    result = run_cli_killed_at_syscall(["cache", "evict", str(work), "--max-gb", "0", "--yes"], syscall, n)
    assert result.returncode in (-9, 137), f"{syscall} #{n} not reached:\n{result.describe()}"
    outcome = check_after_kill(work, original, capsys)
    next_eviction_cleans(work, original, capsys)
    # The next eviction also removed the killed one's lock record and temp (nothing else lives beside the root).
    assert [p.name for p in work.parent.iterdir() if p.name.startswith(".cache.fvconsole-evictor")] == []
    return outcome


@pytest.mark.slow
@pytest.mark.fault("crash: evict", "SIGKILL before the N-th rename (hiding an entry)")
def test_kill_before_each_rename(template: Path, tmp_path: Path, capsys, trials) -> None:
    original = entry_digests(template)
    counts = count_syscalls(["cache", "evict", str(template), "--max-gb", "0"], ["rename"])
    assert counts["rename"] == 0, "a dry run renamed something"
    probe = tmp_path / "probe"
    shutil.copytree(template, probe)
    counts = count_syscalls(["cache", "evict", str(probe), "--max-gb", "0", "--yes"], ["rename", "unlinkat"])
    assert list(probe.iterdir()) == []
    assert counts["rename"] == ENTRIES + 1  # the root lock's holder record (beside the root), then each entry
    for n in range(1, counts["rename"] + 1):
        trials.add(_trial(template, tmp_path / "cache", "rename", n, capsys, original))
    assert trials.count == ENTRIES + 1


@pytest.mark.slow
@pytest.mark.fault("crash: evict", "SIGKILL before the N-th unlinkat (removing files)")
def test_kill_before_unlinks_spread(template: Path, tmp_path: Path, capsys, trials) -> None:
    original = entry_digests(template)
    probe = tmp_path / "probe"
    shutil.copytree(template, probe)
    counts = count_syscalls(["cache", "evict", str(probe), "--max-gb", "0", "--yes"], ["unlinkat"])
    assert counts["unlinkat"] >= ENTRIES * (SHARDS + 2)
    for n in spread(counts["unlinkat"], UNLINK_POINTS):
        trials.add(_trial(template, tmp_path / "cache", "unlinkat", n, capsys, original))
    assert trials.outcomes["leftover listed by `cache ls`"] >= UNLINK_POINTS - 1


@pytest.mark.fault("crash: evict", "SIGKILL mid-removal of the first entry (quick check)")
def test_kill_mid_first_entry(template: Path, tmp_path: Path, capsys, trials) -> None:
    original = entry_digests(template)
    trials.add(_trial(template, tmp_path / "cache", "unlinkat", 2, capsys, original))
    assert trials.outcomes == {"leftover listed by `cache ls`": 1}
