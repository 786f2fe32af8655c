"""The DCP verdict cache of `checkpoints ls` (issue 19 item 9): used only for the identity it was stored under."""

from __future__ import annotations

import json
import os
import pickle

import pytest

import fvconsole.core.checkpoints.verdicts as dcp_verdicts
from fvconsole.core.checkpoints.listing import discover_checkpoints
from fvconsole.demo.builders import run_config, write_checkpoint


@pytest.fixture()
def out(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(dcp_verdicts.ENV_SWITCH, raising=False)
    config = run_config(data_path=str(tmp_path / "d"), manifest_path=str(tmp_path / "m.json"),
                        output_dir=str(tmp_path / "out"), num_gpus=2)
    write_checkpoint(tmp_path / "out", 10, config, kind="legacy")
    write_checkpoint(tmp_path / "out", 20, config, kind="none")
    return tmp_path / "out"


def _cache_file(tmp_path) -> str:
    return str(tmp_path / "xdg" / "fvconsole" / "dcp-verdicts.json")


def _snapshot(root) -> dict[str, tuple[int, ...]]:
    """What a write below ``root`` would change (atimes are not this cache's business)."""
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            st = os.lstat(os.path.join(dirpath, name))
            found[os.path.join(dirpath, name)] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return found


def test_verdicts_are_kept_outside_the_checkpoints_and_reused(tmp_path, out) -> None:
    before = _snapshot(out)
    first = {i.step: (i.kind, i.dataloader_keys) for i in discover_checkpoints(out)}
    assert _snapshot(out) == before  # nothing written into the checkpoints
    with open(_cache_file(tmp_path), encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["version"] == 1
    legacy_meta = str(out / "checkpoint-10" / "dcp" / ".metadata")
    st = os.lstat(legacy_meta)
    key = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{legacy_meta}"
    assert doc["entries"][key] == first[10][1] > 0
    assert len(doc["entries"]) == 2
    # The listing believes the cache for that identity (a planted count shows through) ...
    doc["entries"][key] = 12345
    with open(_cache_file(tmp_path), "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    again = {i.step: (i.kind, i.dataloader_keys) for i in discover_checkpoints(out)}
    assert again == {10: ("legacy", 12345), 20: first[20]}


def test_a_rewrite_that_restores_size_and_mtime_is_decoded_again(tmp_path, out) -> None:
    meta = out / "checkpoint-10" / "dcp" / ".metadata"
    assert {i.step: i.kind for i in discover_checkpoints(out)}[10] == "legacy"
    st = os.lstat(meta)
    other = (out / "checkpoint-20" / "dcp" / ".metadata").read_bytes()  # no dataloader keys
    assert len(other) < st.st_size
    # A pickle ends at STOP: padding after it keeps the size without changing what it holds.
    meta.write_bytes(other + b"\0" * (st.st_size - len(other)))
    os.utime(meta, ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = os.lstat(meta)
    assert (st2.st_size, st2.st_mtime_ns, st2.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    info = {i.step: i for i in discover_checkpoints(out)}[10]
    assert (info.kind, info.dataloader_keys) == ("none", 0)


@pytest.mark.parametrize("content", [
    b"not json", b"[]", b'{"version": 2, "entries": {}}', b'{"version": 1, "entries": []}',
    b'{"version": 1, "entries": {"x": -1, "y": "3", "z": true}}', b'{"version": 1, "entries": ' + b"[" * 5000,
])
def test_a_damaged_cache_changes_nothing_but_the_time(tmp_path, out, content) -> None:
    expected = [i.to_json() for i in discover_checkpoints(out)]
    with open(_cache_file(tmp_path), "wb") as fh:
        fh.write(content)
    assert [i.to_json() for i in discover_checkpoints(out)] == expected
    with open(_cache_file(tmp_path), encoding="utf-8") as fh:
        assert len(json.load(fh)["entries"]) == 2  # rewritten whole


def test_a_damaged_dcp_metadata_is_never_remembered(tmp_path, out) -> None:
    meta = out / "checkpoint-10" / "dcp" / ".metadata"
    meta.write_bytes(pickle.dumps({"not": "a Metadata"}))
    info = {i.step: i for i in discover_checkpoints(out)}[10]
    assert info.kind == "unknown" and any("unreadable DCP metadata" in p for p in info.problems)
    with open(_cache_file(tmp_path), encoding="utf-8") as fh:
        assert [k for k in json.load(fh)["entries"] if k.endswith(str(meta))] == []


def test_switched_off_or_unwritable_writes_nothing_and_lists_the_same(tmp_path, out, monkeypatch) -> None:
    expected = [i.to_json() for i in discover_checkpoints(out)]
    os.remove(_cache_file(tmp_path))
    monkeypatch.setenv(dcp_verdicts.ENV_SWITCH, "off")
    assert [i.to_json() for i in discover_checkpoints(out)] == expected
    assert not os.path.exists(_cache_file(tmp_path))
    monkeypatch.delenv(dcp_verdicts.ENV_SWITCH)
    os.makedirs(_cache_file(tmp_path))  # a directory where the file would go: refused, not raised
    assert [i.to_json() for i in discover_checkpoints(out)] == expected
