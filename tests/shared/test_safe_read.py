"""core.shared.safe_read and core.formats.bounded_yaml: the bounded readers every input goes through."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from fvconsole.core.formats.bounded_yaml import YamlBoundsError, load_yaml, require_bounded_tree
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.safe_read import (
    open_regular,
    read_regular_file,
    sha256_regular_file,
    short_repr,
)
from fvconsole.core.shared.untrusted import json_depth_exceeds
from fvconsole.core.shared.untrusted import load_file as load_json


def _nest(depth: int, kind: str = "list") -> object:
    value: object = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("depth", [0, 1, 5, 99, 100, 101, 5000])
def test_json_depth_is_measured_iteratively(kind: str, depth: int) -> None:
    value = _nest(depth, kind)
    assert json_depth_exceeds(value, 100) is (depth > 100)


def test_json_depth_finds_the_deepest_branch_among_flat_ones() -> None:
    doc = {"row_groups": [{"a": 1, "b": "x"} for _ in range(1000)], "columns": ["id", _nest(40)]}
    assert not json_depth_exceeds(doc, 42)
    assert json_depth_exceeds(doc, 41)


def test_non_regular_files_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (tmp_path, "a directory"), ("/dev/zero", "a character device")):
        with pytest.raises(FvError, match=kind):
            read_regular_file(path, "thing", 10)
        with pytest.raises(FvError, match=kind):
            sha256_regular_file(path)


def test_size_cap_and_handoff(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    with pytest.raises(FvError, match="larger than 10 bytes"):
        read_regular_file(path, "thing", 10)
    assert read_regular_file(path, "thing", 11) == b"x" * 11
    with open_regular(path, "thing") as handle:
        assert not handle.closed and os.get_blocking(handle.fileno())
        assert handle.read() == b"x" * 11
    assert handle.closed


def test_load_json_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    for text, fragment in (("[" * 100_000 + "]" * 100_000, "too many items"), (json.dumps(_nest(150)), "nested"),
                           ("{", "not valid JSON"), ("1" * 5000, "not usable JSON"), ("\xff", "not valid JSON")):
        path.write_text(text, encoding="latin-1")
        with pytest.raises(FvError) as info:
            load_json(path, "doc", 2**20)
        assert str(path) in str(info.value) and fragment in str(info.value)
    path.write_text(json.dumps({"a": _nest(90)}))
    assert load_json(path, "doc", 2**20)["a"] == _nest(90)


def test_short_repr_bounds_length() -> None:
    assert short_repr(10**400) == "<integer of about 401 digits>"
    assert short_repr(-(10**400)) == "<negative integer of about 401 digits>"
    assert short_repr(2**63) == str(2**63)
    assert len(short_repr("x" * 10_000)) <= 80
    assert len(short_repr(list(range(10**5)))) <= 80
    assert short_repr(_nest(500)) == "[[[[...]]]]"  # three levels shown, then elided


# --------------------------------------------------------------------------- bounded YAML


def test_plain_anchors_aliases_and_merges_load_like_safe_load() -> None:
    text = (
        "base: &base {lr: 0.1, betas: [0.9, 0.99]}\n"
        "a: {<<: *base, lr: 0.2}\n"
        "b: *base\n"
        "c: [*base, *base, &s seven, *s]\n"
        "d: {<<: [*base, {extra: 1}]}\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)


def test_expansion_is_counted_through_aliases() -> None:
    # 4 levels of 10 aliases: 1 + 10 + 100 + 1000 + 10000 (+ the top mapping's keys and itself).
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 4)]
    text = "\n".join(lines) + "\n"
    expanded = 1 + 4 + (11 + 111 + 1111 + 11111)
    assert load_yaml(text, max_values=expanded) == yaml.safe_load(text)
    with pytest.raises(YamlBoundsError, match="alias bomb"):
        load_yaml(text, max_values=expanded - 1)


@pytest.mark.parametrize("text", ["a: &x [*x]\n", "a: &x {b: [1, *x]}\n"])
def test_recursive_aliases_are_refused(text: str) -> None:
    with pytest.raises(YamlBoundsError, match="recursive YAML alias"):
        load_yaml(text)


def test_depth_counts_what_aliases_add() -> None:
    deep = "[" * 60 + "]" * 60
    assert load_yaml(f"a: &d {deep}\n", max_depth=62) is not None
    with pytest.raises(YamlBoundsError, match="nesting deeper than 100"):
        load_yaml(f"a: &d {deep}\nb: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*d]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n")
    with pytest.raises(YamlBoundsError, match="nested deeper than 100"):
        load_yaml("[" * 5000 + "]" * 5000)


def test_require_bounded_tree_stops_early_on_shared_subtrees() -> None:
    shared: list = [1] * 10
    for _ in range(12):
        shared = [shared] * 10  # 10**13 values when expanded, 120 objects in memory
    with pytest.raises(FvError, match="more than 1000 values"):
        require_bounded_tree({"a": shared}, "run.yaml", "run config", max_values=1000)
    with pytest.raises(FvError, match="nested more than 100 levels"):
        require_bounded_tree(_nest(101, "dict"), "run.yaml", "run config")
    require_bounded_tree(_nest(99, "dict"), "run.yaml", "run config")


# --------------------------------------------------------------------------- atime
# Listing must not change what it lists: the input door opens with O_NOATIME where the
# kernel allows it (the owner, or CAP_FOWNER), so strict-atime and relatime mounts alike keep
# the file's access time. A time two days back is one relatime would update on any read.

TWO_DAYS_AGO = 1_700_000_000


def test_reading_through_the_door_keeps_the_access_time(tmp_path) -> None:
    path = tmp_path / "metadata.json"
    path.write_text('{"step": 100}')
    os.utime(path, (TWO_DAYS_AGO, TWO_DAYS_AGO))
    read_regular_file(path, "metadata.json", 1 << 20)
    assert os.stat(path).st_atime == TWO_DAYS_AGO


def test_checkpoints_ls_keeps_every_access_time(migration_workspace, cli) -> None:
    ws = migration_workspace(private=True)
    files = [p for p in ws.checkpoint.rglob("*") if p.is_file() and not p.is_symlink()]
    for p in files:
        os.utime(p, (TWO_DAYS_AGO, os.stat(p).st_mtime))
    result = cli(["checkpoints", "ls", str(ws.checkpoint.parent)])
    assert result.returncode == 0, result.describe()
    touched = [str(p) for p in files if os.stat(p).st_atime != TWO_DAYS_AGO]
    assert touched == []
