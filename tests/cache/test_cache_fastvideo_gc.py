"""What FastVideo's own GC will do to a root: empty entries and foreign directories in `cache ls`.

The expected set of what FastVideo's ``_gc_cache_root`` counts comes from
``fastvideo_reference.gc_cache_root_candidates``, a transcription of upstream's loop.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from fastvideo_reference import gc_cache_root_candidates

from fvconsole.cli import main
from fvconsole.core.cache import scan_cache
from fvconsole.demo.cache_builders import make_key, write_cache_entry

HOUR = 3600.0
GC_NOTE = "FastVideo's GC counts this and may delete it"


def _root(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "wcache"
    now = time.time()
    keys = {"complete": os.path.basename(write_cache_entry(root, status="complete", last_used=now - 5 * HOUR, seed=1))}
    empty = make_key("skipped write")
    os.mkdir(root / empty)  # FastVideo's mkdir before its free-space check, then the write skipped
    os.utime(root / empty, (now - 2 * HOUR, now - 2 * HOUR))
    keys["empty"] = empty
    (root / "old-run").mkdir()
    (root / "old-run" / "weights.bin").write_bytes(b"x" * 1000)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "linked-dir")
    (root / "README.txt").write_text("a file: FastVideo's GC skips it")
    (root / f".evicting-{make_key('gone')}-123").mkdir()
    return root, keys


def test_empty_entries_and_foreign_dirs_as_fastvideos_gc_sees_them(tmp_path) -> None:
    root, keys = _root(tmp_path)
    upstream = gc_cache_root_candidates(root)
    counted = {name for _, _, name in upstream}
    scan = scan_cache(root)
    by_key = {e.key: e for e in scan.entries}
    assert by_key[keys["empty"]].status == "empty"
    assert "FastVideo creates it before checking free space" in by_key[keys["empty"]].explanation
    assert by_key[keys["complete"]].status == "complete"
    # fvconsole's entries, leftovers and flagged foreign dirs are exactly what upstream counts.
    ours = set(by_key) | {x.name for x in scan.leftovers} | set(scan.foreign_gc_counted)
    assert ours == counted
    assert set(scan.foreign_gc_counted) == {"old-run", "linked-dir"}
    assert "README.txt" in scan.foreign and "README.txt" not in counted
    # Without a manifest, upstream's mtime is 0.0: the empty entry and the foreign dirs go first.
    assert [name for _, _, name in upstream][-1] == keys["complete"]


def test_cache_ls_shows_empty_and_flags_foreign_dirs(tmp_path, capsys) -> None:
    root, keys = _root(tmp_path)
    assert main(["cache", "ls", str(root)]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.startswith(keys["empty"])]
    assert " empty " in f" {line} "
    assert f"  old-run  ({GC_NOTE})" in out and f"  linked-dir  ({GC_NOTE})" in out
    assert f"  README.txt  ({GC_NOTE})" not in out and "  README.txt" in out
    assert main(["cache", "ls", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["foreign_gc_counted"] == ["linked-dir", "old-run"]
    assert {e["key"]: e["status"] for e in doc["entries"]}[keys["empty"]] == "empty"


def test_invalid_selects_an_empty_entry(tmp_path, capsys) -> None:
    root, keys = _root(tmp_path)
    assert main(["cache", "evict", str(root), "--invalid", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    selected = {e["key"] for e in doc["evict"]} - {make_key("gone")}  # the leftover is cleaned up anyway
    assert selected == {keys["empty"]}
    assert main(["cache", "evict", str(root), "--invalid", "--yes"]) == 0
    assert not (root / keys["empty"]).exists()
    assert (root / "old-run" / "weights.bin").exists() and (root / "linked-dir").is_symlink()
