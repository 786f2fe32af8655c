"""Checkpoint discovery on real DCP checkpoints built with the fixture builders."""

from __future__ import annotations

import json
import os

import pytest

from fvconsole.core.checkpoints.dcp_metadata import read_dcp_metadata
from fvconsole.core.checkpoints.listing import (
    discover_checkpoints,
    inspect_checkpoint,
    latest_resumable,
    read_metadata,
)
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.walk import tree_size
from fvconsole.demo.builders import run_config, write_checkpoint


@pytest.fixture()
def config(tmp_path):
    return run_config(data_path=str(tmp_path / "d"), manifest_path=str(tmp_path / "m.json"),
                      output_dir=str(tmp_path / "out"), num_gpus=4)


def test_discovery_kinds_completeness_and_order(tmp_path, config) -> None:
    out = tmp_path / "out"
    write_checkpoint(out, 100, config, kind="legacy")
    write_checkpoint(out, 200, config, kind="rank-local")
    write_checkpoint(out, 300, config, kind="none")
    write_checkpoint(out, 400, config, kind="legacy", complete=False)
    write_checkpoint(out, 500, config, kind="legacy", complete=False, incomplete="dcp-metadata")
    (out / "checkpoint-abc").mkdir()
    (out / "checkpoint-600").write_text("not a dir")
    (out / "notes.txt").write_text("x")
    infos = discover_checkpoints(out)
    assert [i.step for i in infos] == [500, 400, 300, 200, 100]
    by = {i.step: i for i in infos}
    assert (by[100].kind, by[100].complete, by[100].rng_states, by[100].rank_sidecars) == ("legacy", True, 4, 0)
    assert by[100].dataloader_keys and by[100].dataloader_keys > 0
    assert (by[200].kind, by[200].complete, by[200].rank_sidecars) == ("rank-local", True, 4)
    assert (by[300].kind, by[300].complete, by[300].dataloader_keys) == ("none", True, 0)
    assert (by[400].kind, by[400].complete, by[400].rng_states) == ("legacy", False, 2)
    assert any("2 of 4 rng_state" in p for p in by[400].problems)
    assert (by[500].complete, by[500].kind, by[500].has_dcp_metadata) == (False, "unknown", False)
    assert os.path.join(by[500].path, "dcp", ".metadata") + ": missing (interrupted save)" in by[500].problems
    for info in infos:
        assert info.has_config and info.metadata_step == info.step and info.world_size == 4
        assert info.bytes == tree_size(info.path).bytes > 0
        data = info.to_json()
        json.dumps(data)
        for key in ("path", "step", "complete", "kind", "rank_sidecars", "rng_states", "has_config", "bytes"):
            assert key in data
    # FastVideo's "latest" picks the highest step with a dcp/ directory, even an interrupted one.
    assert latest_resumable(infos).step == 500


def test_single_checkpoint_dir_and_errors(tmp_path, config) -> None:
    ckpt = write_checkpoint(tmp_path / "out", 7, config)
    infos = discover_checkpoints(ckpt)
    assert len(infos) == 1 and infos[0].path == ckpt and infos[0].kind == "legacy"
    with pytest.raises(FvError, match="does not exist"):
        discover_checkpoints(tmp_path / "missing")
    with pytest.raises(FvError, match="checkpoint-<step>"):
        inspect_checkpoint(tmp_path / "out")
    assert discover_checkpoints(tmp_path / "out" / "checkpoint-7" / "dcp") == []


def test_unreadable_dcp_metadata_is_reported_not_raised(tmp_path, config) -> None:
    ckpt = write_checkpoint(tmp_path / "out", 3, config)
    with open(os.path.join(ckpt, "dcp", ".metadata"), "wb") as fh:
        fh.write(b"\x80\x04garbage, not a pickle")
    (info,) = discover_checkpoints(tmp_path / "out")
    assert info.kind == "unknown"
    assert any("unreadable DCP metadata" in p and ".metadata" in p for p in info.problems)
    with pytest.raises(FvError, match="unreadable DCP metadata"):
        read_dcp_metadata(ckpt)


def test_broken_metadata_json_is_reported(tmp_path, config) -> None:
    out = tmp_path / "out"
    bad = write_checkpoint(out, 1, config)
    with open(os.path.join(bad, "metadata.json"), "w") as fh:
        fh.write("{not json")
    write_checkpoint(out, 2, config, write_metadata=False)
    write_checkpoint(out, 3, config, embed_config=False)
    write_checkpoint(out, 4, config, metadata_step=5)
    by = {i.step: i for i in discover_checkpoints(out)}
    assert any("metadata.json" in p and "not valid JSON" in p for p in by[1].problems)
    assert not by[1].has_config and by[1].metadata_step is None
    assert any("metadata.json is missing" in p for p in by[2].problems)
    # Without a config the world size is unknown: completeness falls back to dcp/.metadata alone.
    assert by[3].complete and not by[3].has_config and by[3].world_size is None
    assert any("no embedded config" in p for p in by[3].problems)
    assert by[4].metadata_step == 5 and any("differs from directory step 4" in p for p in by[4].problems)


@pytest.mark.parametrize(
    "content, field",
    [("[]", "JSON object"), ('{"config": {}}', "'step'"), ('{"step": "12"}', "'step'"),
     ('{"step": true}', "'step'"), ('{"step": 1, "config": [1]}', "'config'"),
     # Regression: these escaped as RecursionError / ValueError (digit limit) instead of FvError.
     ("[" * 100_000 + "]" * 100_000, "not usable JSON"), ('{"step": ' + "1" * 5000 + "}", "not usable JSON")],
)
def test_read_metadata_names_file_and_field(tmp_path, content, field) -> None:
    ckpt = tmp_path / "checkpoint-1"
    ckpt.mkdir()
    (ckpt / "metadata.json").write_text(content)
    with pytest.raises(FvError) as info:
        read_metadata(ckpt)
    assert str(ckpt / "metadata.json") in str(info.value) and field in str(info.value)


def test_dcp_keys_and_summary(tmp_path, config) -> None:
    ckpt = write_checkpoint(tmp_path / "out", 9, config)
    keys = read_dcp_metadata(ckpt).keys
    assert list(keys) == sorted(keys)
    assert any(k.startswith("dataloader.") for k in keys) and any(k.startswith("model.") for k in keys)
    summary = dict(read_dcp_metadata(ckpt).key_groups)
    assert set(summary) == {"dataloader", "model", "optimizer", "scheduler"}
    assert sum(summary.values()) == len(keys)


def test_symlinks_are_not_followed_for_size(tmp_path, config) -> None:
    ckpt = write_checkpoint(tmp_path / "out", 1, config)
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 1_000_000)
    before = inspect_checkpoint(ckpt).bytes
    os.symlink(big, os.path.join(ckpt, "link.bin"))
    os.symlink(tmp_path, os.path.join(ckpt, "loop"))
    after = inspect_checkpoint(ckpt).bytes
    assert before < after < before + 1000  # only the link entries themselves count


def test_read_dcp_false_does_not_need_torch(tmp_path, config) -> None:
    ckpt = write_checkpoint(tmp_path / "out", 1, config)
    info = inspect_checkpoint(ckpt, read_dcp=False)
    assert info.kind == "unknown" and info.complete and info.dataloader_keys is None


@pytest.mark.parametrize("kind", ["legacy", "rank-local", "none"])
def test_dcp_keys_equal_torch_file_system_reader(tmp_path, config, kind) -> None:
    from torch.distributed.checkpoint import FileSystemReader

    ckpt = write_checkpoint(tmp_path / "out", 5, config, kind=kind)
    expected = sorted(FileSystemReader(os.path.join(ckpt, "dcp")).read_metadata().state_dict_metadata)
    assert list(read_dcp_metadata(ckpt).keys) == expected


def test_dcp_keys_when_python_pickles_an_enum_member_by_name(tmp_path, config, monkeypatch) -> None:
    """Some Python releases (Debian 12's 3.11.2) pickle an enum member as ``getattr(Class, "NAME")``:
    torch's ``TensorProperties`` memory format in every ``dcp/.metadata``. Such a save is listed as
    torch reads it, not refused (it was: "names builtins.getattr, which a DCP metadata pickle never does")."""
    import enum
    import pickletools

    from torch.distributed.checkpoint import FileSystemReader

    monkeypatch.setattr(enum.Enum, "__reduce_ex__", lambda self, proto: (getattr, (self.__class__, self._name_)))
    ckpt = write_checkpoint(tmp_path / "out", 5, config, kind="legacy")
    monkeypatch.undo()
    with open(os.path.join(ckpt, "dcp", ".metadata"), "rb") as fh:
        ops = [(op.name, arg) for op, arg, _ in pickletools.genops(fh.read())]
    assert ("GLOBAL", "builtins getattr") in ops or ("SHORT_BINUNICODE", "getattr") in ops  # the save has one
    expected = sorted(FileSystemReader(os.path.join(ckpt, "dcp")).read_metadata().state_dict_metadata)
    assert list(read_dcp_metadata(ckpt).keys) == expected
    (info,) = discover_checkpoints(tmp_path / "out")
    assert info.kind == "legacy" and not any("DCP metadata" in p for p in info.problems), info.problems


def _planted_pickle(ckpt: str, module: str, name: str, *args: str) -> None:
    """A ``.metadata`` whose unpickling calls ``module.name(*args)`` (what pickle.load would run)."""
    call = b"c" + f"{module}\n{name}\n(".encode() + b"".join(b"V" + a.encode() + b"\n" for a in args) + b"tR."
    with open(os.path.join(ckpt, "dcp", ".metadata"), "wb") as fh:
        fh.write(call)


@pytest.mark.parametrize("module, name", [("os", "system"), ("torch", "save"), ("builtins", "exec")])
def test_a_planted_dcp_metadata_runs_no_code(tmp_path, config, module, name) -> None:
    # Regression: torch's FileSystemReader.read_metadata is pickle.load, so `checkpoints ls`
    # executed whatever a planted dcp/.metadata asked for.
    ckpt = write_checkpoint(tmp_path / "out", 3, config)
    witness = tmp_path / "pwned"
    args = {"system": [f"touch {witness}"], "exec": [f"open({str(witness)!r}, 'w').close()"],
            "save": [str(witness), str(witness)]}[name]
    _planted_pickle(ckpt, module, name, *args)
    (info,) = discover_checkpoints(tmp_path / "out")
    assert not witness.exists()
    assert info.kind == "unknown" and any("unreadable DCP metadata" in p for p in info.problems)
    # The file really is hostile: a plain pickle.load (what torch's reader does) runs it.
    import pickle

    with open(os.path.join(ckpt, "dcp", ".metadata"), "rb") as fh:
        pickle.load(fh)
    assert witness.exists()


def test_fifo_metadata_files_do_not_hang_listing(tmp_path, config) -> None:
    # Regression (reliability D3): metadata.json or dcp/.metadata as a FIFO blocked forever.
    ckpt = write_checkpoint(tmp_path / "out", 3, config)
    for name in ("metadata.json", os.path.join("dcp", ".metadata")):
        os.unlink(os.path.join(ckpt, name))
        os.mkfifo(os.path.join(ckpt, name))
    (info,) = discover_checkpoints(tmp_path / "out")
    assert any("metadata.json must be a regular file, but it is a FIFO" in p for p in info.problems)
    meta = os.path.join(info.path, "dcp", ".metadata")
    assert f"{meta}: DCP metadata must be a regular file, but it is a FIFO" in info.problems  # it said "missing"
    with pytest.raises(FvError, match="DCP metadata must be a regular file"):
        read_dcp_metadata(ckpt)
    with pytest.raises(FvError, match="metadata.json must be a regular file"):
        read_metadata(ckpt)
