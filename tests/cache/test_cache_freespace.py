"""`cache evict --min-free-gb/--min-free-percent` on a small real tmpfs: exact victims, free space reached.

The fixture is a 20 MiB tmpfs holding six hand-made entries of known size and age (see
``sized_cache``); every expected victim list and byte count below is worked out by hand
from those numbers (sizes in MiB + one 4 KiB manifest page each), never from the planner.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mounts import tmpfs
from sized_cache import MIB, PAGE, fs_free, key_of, sized_entry

from fvconsole.cli import main

DAY = 86400.0
#: name -> (MiB, age in seconds): GC order is A (oldest) .. E; F was used a minute ago (in use).
ENTRIES = {"A": (4, 5 * DAY), "B": (2, 4 * DAY), "C": (3, 3 * DAY), "D": (1, 2 * DAY), "E": (2, DAY), "F": (1, 60)}
K = {name: key_of(name) for name in ENTRIES}
SIZE_MIB = 20
#: 20 MiB - 13 MiB of shards - six manifest pages.
FREE_BEFORE = 7 * MIB - 6 * PAGE
TWELVE_MIB_IN_GIB = "0.01171875"  # 12 MiB exactly


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE", raising=False)
    with tmpfs(tmp_path / "shm", SIZE_MIB * MIB) as mount:
        root = mount / "wcache"
        for name, (mib, age) in ENTRIES.items():
            sized_entry(root, name, mib, age)
        assert fs_free(mount) == FREE_BEFORE, "the tmpfs does not account pages as this test assumes"
        yield root


def _json(capsys, *argv: str) -> tuple[int, dict, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _left(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()}


def _keys(*names: str) -> list[str]:
    return [K[n] for n in names]


def test_min_free_gb_preview_then_execute(shm: Path, capsys) -> None:
    code, plan, err = _json(capsys, "cache", "evict", str(shm), "--min-free-gb", TWELVE_MIB_IN_GIB, "--json")
    assert code == 0 and err == ""
    # A (4 MiB + page) brings 7 MiB - 6 pages to 11 MiB - 5 pages: short; B (2 MiB + page) to 13 MiB - 4 pages.
    assert [e["key"] for e in plan["evict"]] == _keys("A", "B")
    assert plan["fs_free_bytes_before"] == FREE_BEFORE
    assert plan["fs_free_bytes_after_estimate"] == 13 * MIB - 4 * PAGE
    target = plan["free_target"]
    assert target["target_bytes"] == 12 * MIB and target["reached"] is True and target["victims"] == _keys("A", "B")
    assert _left(shm) == set(K.values()), "a dry run removed something"
    code, done, err = _json(capsys, "cache", "evict", str(shm), "--min-free-gb", TWELVE_MIB_IN_GIB, "--yes", "--json")
    assert code == 0, err
    assert [e["key"] for e in done["evict"]] == _keys("A", "B")
    assert _left(shm) == set(_keys("C", "D", "E", "F"))
    assert done["fs_free_bytes_before"] == FREE_BEFORE - PAGE  # the lock's holder record sits beside the root
    assert done["fs_free_bytes_after"] >= 12 * MIB and fs_free(shm) == 13 * MIB - 4 * PAGE
    assert done["free_target"] == {"target_bytes": 12 * MIB, "reached": True}


def test_kept_entry_is_passed_over_for_the_next(shm: Path, capsys) -> None:
    code, done, err = _json(capsys, "cache", "evict", str(shm), "--min-free-gb", TWELVE_MIB_IN_GIB,
                            "--keep", K["B"], "--yes", "--json")
    assert code == 0, err
    assert [e["key"] for e in done["evict"]] == _keys("A", "C")  # B kept: C (3 MiB) is next in GC order
    assert {s["key"]: s["reason"] for s in done["skipped"]}[K["B"]] == "kept (--keep)"
    assert fs_free(shm) == 14 * MIB - 4 * PAGE


def test_percent_target_takes_everything_up_to_it(shm: Path, capsys) -> None:
    # 90% of 20 MiB = 18 MiB: A..E bring 7 MiB - 6 pages to 19 MiB - 1 page; F (in use) is never needed.
    code, done, err = _json(capsys, "cache", "evict", str(shm), "--min-free-percent", "90", "--yes", "--json")
    assert code == 0 and err == ""
    assert [e["key"] for e in done["evict"]] == _keys("A", "B", "C", "D", "E")
    assert _left(shm) == {K["F"]}
    assert fs_free(shm) == 19 * MIB - PAGE and done["free_target"]["reached"] is True


TARGET_99 = -(-SIZE_MIB * MIB * 99 // 100)  # 99% of 20 MiB, rounded up to a byte
#: A..E gone (F is in use within --grace): 19 MiB - 1 page free at best.
BEST_99 = 19 * MIB - PAGE


def test_unreachable_target_evicts_nothing_for_it_and_says_so(shm: Path, capsys) -> None:
    # 99% of 20 MiB cannot be reached: emptying the cache would not get there, so nothing goes for it.
    code, plan, err = _json(capsys, "cache", "evict", str(shm), "--min-free-percent", "99", "--json")
    assert code == 0
    target = plan["free_target"]
    assert plan["evict"] == [] and target["victims"] == [] and target["evicted_for_target"] is False
    assert target["reached"] is False and target["free_bytes_after_estimate"] == FREE_BEFORE
    assert target["shortfall_bytes"] == TARGET_99 - FREE_BEFORE and target["free_bytes_possible"] == BEST_99
    assert target["best_effort"] is False
    assert err.startswith("warning: ") and len(err.splitlines()) == 1
    assert "cannot be reached" in err and "nothing is evicted for it" in err and "--best-effort" in err
    code = main(["cache", "evict", str(shm), "--min-free-percent", "99"])
    out, err = capsys.readouterr()
    assert code == 0 and "nothing is evicted for it" in out and "--best-effort frees what it can" in out
    code, done, err = _json(capsys, "cache", "evict", str(shm), "--min-free-percent", "99", "--yes", "--json")
    assert code == 0, err
    assert done["evict"] == [] and _left(shm) == set(K.values()), "an unreachable target emptied the cache"
    assert done["free_target"]["reached"] is False and "so nothing was evicted for it" in err


def test_unreachable_target_leaves_other_selectors_alone(shm: Path, capsys) -> None:
    # --key E still goes (2 MiB + a page); the target adds nothing beside it.
    code, done, err = _json(capsys, "cache", "evict", str(shm), "--key", K["E"], "--min-free-percent", "99",
                            "--yes", "--json")
    assert code == 0, err
    assert [e["key"] for e in done["evict"]] == _keys("E")
    assert _left(shm) == set(_keys("A", "B", "C", "D", "F"))
    assert done["free_target"]["reached"] is False


def test_best_effort_frees_what_it_can_toward_an_unreachable_target(shm: Path, capsys) -> None:
    code, plan, err = _json(capsys, "cache", "evict", str(shm), "--min-free-percent", "99", "--best-effort", "--json")
    assert code == 0
    target = plan["free_target"]
    assert target["victims"] == _keys("A", "B", "C", "D", "E") and target["best_effort"] is True
    assert target["reached"] is False and target["shortfall_bytes"] == TARGET_99 - BEST_99
    assert "cannot be reached" in err and "--best-effort: evicting toward it anyway" in err
    assert K["F"] in {s["key"] for s in plan["skipped"]}
    code, done, err = _json(capsys, "cache", "evict", str(shm), "--min-free-percent", "99", "--best-effort",
                            "--yes", "--json")
    assert code == 0 and "was not reached" in err
    assert done["free_target"]["reached"] is False and _left(shm) == {K["F"]}


def test_best_effort_needs_a_target(shm: Path, capsys) -> None:
    code = main(["cache", "evict", str(shm), "--invalid", "--best-effort"])
    _, err = capsys.readouterr()
    assert code == 2 and "--best-effort: only with --min-free-gb or --min-free-percent" in err


def test_union_with_other_selectors_counts_their_space_first(shm: Path, capsys) -> None:
    # --key E frees 2 MiB + a page first (9 MiB - 5 pages); A then reaches 13 MiB - 4 pages >= 12 MiB.
    code, plan, _ = _json(capsys, "cache", "evict", str(shm), "--key", K["E"], "--min-free-gb", TWELVE_MIB_IN_GIB,
                          "--json")
    assert code == 0
    assert [e["key"] for e in plan["evict"]] == _keys("A", "E")  # executed in GC order
    assert plan["free_target"]["victims"] == _keys("A")
    assert plan["fs_free_bytes_after_estimate"] == 13 * MIB - 4 * PAGE


def test_target_already_met_evicts_nothing(shm: Path, capsys) -> None:
    code = main(["cache", "evict", str(shm), "--min-free-gb", "0.001"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "nothing to evict" in out and "already" in out
    assert f"filesystem free {FREE_BEFORE / MIB:.1f} MiB of 20.0 MiB" in out


def test_bad_targets_are_usage_errors(tmp_path: Path, capsys) -> None:
    root = tmp_path / "wcache"
    sized_entry(root, "A", 1, DAY)
    for flag, value in (("--min-free-percent", "101"), ("--min-free-percent", "nan"), ("--min-free-percent", "-1"),
                        ("--min-free-gb", "-1"), ("--min-free-gb", "1e308"), ("--min-free-gb", "lots")):
        code = main(["cache", "evict", str(root), flag, value])
        _, err = capsys.readouterr()
        assert code == 2, (flag, value)
        assert err.startswith(f"error: {flag}: ") and err.splitlines()[1:] == ["try: fvconsole cache evict --help"]
    assert main(["cache", "evict", str(root)]) == 2
    assert "--min-free-gb, --min-free-percent" in capsys.readouterr().err


def test_hard_linked_and_sparse_files_are_credited_with_what_they_free(tmp_path: Path) -> None:
    """disk_bytes: allocated blocks of files with no other link (a hard link elsewhere frees nothing)."""
    from fvconsole.core.cache import scan_cache

    root = tmp_path / "wcache"
    key = sized_entry(root, "A", 1, DAY)
    shard = root / key / "shard0-of-1.safetensors"
    allocated = os.lstat(shard).st_blocks * 512 + os.lstat(root / key / "manifest.json").st_blocks * 512
    assert scan_cache(root).get(key).disk_bytes == allocated
    os.link(shard, tmp_path / "elsewhere")
    assert scan_cache(root).get(key).disk_bytes == os.lstat(root / key / "manifest.json").st_blocks * 512
    os.unlink(tmp_path / "elsewhere")
    with open(root / key / "sparse.bin", "wb") as handle:  # 1 GiB apparent size, nothing allocated
        handle.truncate(1 << 30)
    entry = scan_cache(root).get(key)
    assert entry.bytes >= 1 << 30 and entry.disk_bytes == allocated + os.lstat(root / key / "sparse.bin").st_blocks * 512
    assert entry.disk_bytes < 2 * MIB
