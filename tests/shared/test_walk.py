"""Bounded walks (issue 19 item 9, D37): sizes never follow a symlink and stop at a bound."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fvconsole.core.checkpoints.listing import discover_checkpoints
from fvconsole.core.shared import walk
from fvconsole.core.shared.walk import tree_size
from fvconsole.demo.builders import run_config, write_checkpoint

MIB = 2**20


def _output_dir(tmp_path: Path) -> Path:
    config = run_config(data_path=str(tmp_path / "d"), manifest_path=str(tmp_path / "m.json"),
                        output_dir=str(tmp_path / "out"), num_gpus=2)
    write_checkpoint(tmp_path / "out", 100, config, kind="legacy")
    return tmp_path / "out"


def test_a_symlinked_checkpoint_is_not_walked_for_its_size(tmp_path: Path, cli) -> None:
    out = _output_dir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "big.bin").write_bytes(b"\0" * MIB)  # what following the link would count
    os.symlink(elsewhere, out / "checkpoint-999")  # as `checkpoint-999 -> /` did
    by_step = {i.step: i for i in discover_checkpoints(out)}
    linked = by_step[999]
    assert (linked.bytes, linked.size_complete) == (0, False)
    assert "size unknown: a symlink (not followed)" in linked.problems
    assert by_step[100].size_complete and by_step[100].bytes > 0
    code, stdout, _ = cli(["checkpoints", "ls", str(out), "--json"])
    assert code == 0
    doc = {c["step"]: c for c in json.loads(stdout)["checkpoints"]}
    assert (doc[999]["bytes"], doc[999]["size_complete"]) == (0, False) and doc[100]["size_complete"] is True
    code, stdout, _ = cli(["checkpoints", "ls", str(out)])
    row = next(line for line in stdout.splitlines() if line.rstrip().endswith("checkpoint-999"))
    assert " ? " in row and "1.0 MiB" not in stdout


def test_a_walk_stops_at_its_bound_and_says_size_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         cli) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    for i in range(30):
        (tree / "sub" / f"f{i}").write_bytes(b"x" * 10)
    assert tree_size(tree) == walk.TreeSize(300, 30)
    capped = tree_size(tree, max_entries=10)
    assert not capped.complete and capped.note == "size unknown: over 10 files" and capped.bytes <= 100
    assert tree_size(tree, max_depth=0).note == "size unknown: deeper than 0 directories"
    out = _output_dir(tmp_path)
    monkeypatch.setattr(walk, "MAX_ENTRIES", 3)
    [info] = discover_checkpoints(out)
    assert not info.size_complete and "size unknown: over 3 files" in info.problems
    code, _, stderr = cli(["checkpoints", "ls", str(out)])
    assert code == 0 and "size unknown: over 3 files" in stderr  # a warning: on stderr


def test_symlinks_inside_count_as_themselves_and_a_file_top_is_its_size(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "big.bin").write_bytes(b"\0" * MIB)
    os.symlink(tmp_path / "big.bin", tree / "link")
    os.symlink(tmp_path, tree / "loop")
    size = tree_size(tree)
    assert size.complete and size.files == 2
    assert size.bytes == os.lstat(tree / "link").st_size + os.lstat(tree / "loop").st_size < 4096
    assert tree_size(tmp_path / "big.bin") == walk.TreeSize(MIB, 1)
    assert tree_size(tmp_path / "absent") == walk.TreeSize(0, 0)


def test_find_files_lists_what_os_walk_lists(tmp_path) -> None:
    """FastVideo's rescan uses os.walk: a symlinked directory is not entered, a symlinked file is listed."""
    from fvconsole.core.shared.walk import find_files

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    for rel in ("x.parquet", "a/y.parquet", "a/b/z.parquet", "a/notes.txt", "outside/w.parquet"):
        (tmp_path / rel).write_bytes(b"")
    top = tmp_path / "a"
    (top / "linked-dir").symlink_to(tmp_path / "outside")
    (top / "linked.parquet").symlink_to(tmp_path / "x.parquet")
    (top / "dangling.parquet").symlink_to(tmp_path / "gone")
    (top / "dir.parquet").mkdir()
    expected = sorted(os.path.join(d, n) for d, _, names in os.walk(top) for n in names if n.endswith(".parquet"))
    found = find_files(top, ".parquet")
    assert found.complete and sorted(found.paths) == expected
    assert len(expected) == 4  # y, z, linked, dangling: not w (behind a symlinked dir), not dir.parquet
    capped = find_files(top, ".parquet", max_entries=2)
    assert not capped.complete and "over 2 entries" in capped.note


def test_checkpoints_ls_leaves_the_atimes_of_what_it_lists_alone(tmp_path, cli) -> None:
    """Listing must not change what it lists: no directory's atime moves (relatime would move an
    atime older than the mtime on the first read)."""
    out = tmp_path / "output"
    for step in (1, 2):
        (out / f"checkpoint-{step}" / "dcp").mkdir(parents=True)
        (out / f"checkpoint-{step}" / "metadata.json").write_text("{}")
    dirs = [out, out / "checkpoint-1", out / "checkpoint-2"]
    for d in dirs:
        mtime = os.stat(d).st_mtime_ns
        os.utime(d, ns=(mtime - 10**10, mtime))
    before = {d: os.stat(d).st_atime_ns for d in dirs}
    code, listed, _ = cli(["checkpoints", "ls", str(out)])
    assert code == 0 and "checkpoint-2" in listed
    assert {d: os.stat(d).st_atime_ns for d in dirs} == before
