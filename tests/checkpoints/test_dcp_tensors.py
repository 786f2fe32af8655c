"""`checkpoints show --tensors` on real DCP checkpoints: expected values from torch's own reader.

torch's ``FileSystemReader.read_metadata`` (a plain pickle.load) is the independent oracle
here: key, dtype, global shape, ``numel * itemsize``; the code under test never imports torch.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest

from fvconsole.core.checkpoints.dcp_metadata import read_dcp_metadata
from fvconsole.core.formats.inert_pickle import load
from fvconsole.core.shared.errors import FvError
from fvconsole.demo.builders import run_config, write_checkpoint


def _torch_view(ckpt: str, skip: frozenset[str] = frozenset()) -> tuple[list[dict], dict[str, int]]:
    """Every tensor of ``dcp/.metadata`` (but ``skip``) and the bytes per first key component, as torch reads it."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    meta = FileSystemReader(os.path.join(ckpt, "dcp")).read_metadata()
    tensors, totals = [], {}
    for key in sorted(meta.state_dict_metadata):
        item = meta.state_dict_metadata[key]
        if key in skip or not isinstance(item, TensorStorageMetadata):
            continue
        size = item.size.numel() * item.properties.dtype.itemsize
        tensors.append({"key": key, "dtype": str(item.properties.dtype).removeprefix("torch."),
                        "shape": list(item.size), "bytes": size, "problem": None})
        totals[key.split(".", 1)[0]] = totals.get(key.split(".", 1)[0], 0) + size
    return tensors, totals


def _mixed_dtype_checkpoint(tmp_path) -> str:
    """A DCP save with bf16, fp16, int64, uint8 and bool tensors, an EMA and a scalar, via torch."""
    import torch
    import torch.distributed.checkpoint as dcp

    ckpt = tmp_path / "out" / "checkpoint-7"
    (ckpt / "dcp").mkdir(parents=True)
    (ckpt / "metadata.json").write_text(json.dumps({"step": 7}))
    state = {
        "model": {"w": torch.zeros(3, 5, dtype=torch.bfloat16), "b": torch.zeros(5, dtype=torch.float16)},
        "optimizer": {"state": {"w": {"step": torch.tensor(7.0), "exp_avg": torch.zeros(3, 5)}},
                      "param_groups": [{"lr": 1e-4}]},
        "ema": {"w": torch.zeros(3, 5, dtype=torch.float64), "mask": torch.ones(2, 2, 2, dtype=torch.bool)},
        "counters": {"ids": torch.arange(11, dtype=torch.int64), "codes": torch.zeros(0, 4, dtype=torch.uint8)},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, storage_writer=dcp.FileSystemWriter(str(ckpt / "dcp"), sync_files=False), no_dist=True)
    return str(ckpt)


@pytest.fixture()
def config(tmp_path):
    return run_config(data_path=str(tmp_path / "d"), manifest_path=str(tmp_path / "m.json"),
                      output_dir=str(tmp_path / "out"), num_gpus=2)


@pytest.mark.parametrize("kind", ["legacy", "rank-local", "none"])
def test_tensors_equal_torch_reader_on_demo_checkpoints(tmp_path, config, kind) -> None:
    ckpt = write_checkpoint(tmp_path / "out", 5, config, kind=kind)
    expected, totals = _torch_view(ckpt)
    got = read_dcp_metadata(ckpt).tensors
    assert [t.to_json() for t in got.tensors] == expected
    assert got.totals_json() == totals and got.total_bytes == sum(totals.values())


def test_tensors_equal_torch_reader_on_mixed_dtypes(tmp_path) -> None:
    ckpt = _mixed_dtype_checkpoint(tmp_path)
    expected, totals = _torch_view(ckpt)
    got = read_dcp_metadata(ckpt).tensors
    assert [t.to_json() for t in got.tensors] == expected
    assert got.totals_json() == totals
    assert {t["dtype"] for t in expected} >= {"bfloat16", "float16", "float64", "bool", "int64", "uint8"}
    assert set(totals) == {"model", "optimizer", "ema", "counters"} and got.unknown_size == 0


def test_show_tensors_json_and_text(tmp_path, cli) -> None:
    ckpt = _mixed_dtype_checkpoint(tmp_path)
    expected, totals = _torch_view(ckpt)
    code, out, err = cli(["checkpoints", "show", ckpt, "--tensors", "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["tensors"] == expected and data["totals"] == totals
    code, out, err = cli(["checkpoints", "show", ckpt, "--tensors"])
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()}
    for t in expected:
        assert rows[t["key"]][1:3] == [t["dtype"], "x".join(map(str, t["shape"])) or "scalar"]
    assert "totals per top-level key:" in out and rows["ema"][0] == "ema"


def test_show_tensors_decodes_the_metadata_once(tmp_path, cli, monkeypatch) -> None:
    """The listing's kind, the key summary and the tensors: one decode of one read (it was two)."""
    import fvconsole.core.checkpoints.dcp_metadata as reader

    ckpt = _mixed_dtype_checkpoint(tmp_path)
    decoded: list[int] = []

    def counting(data, *args):
        decoded.append(len(data))
        return load(data, *args)

    monkeypatch.setattr(reader, "load", counting)
    code, out, err = cli(["checkpoints", "show", ckpt, "--tensors", "--json"])
    assert code == 0 and json.loads(out)["tensors"], err
    assert len(decoded) == 1


def test_show_without_tensors_has_no_tensor_fields(tmp_path, cli) -> None:
    ckpt = _mixed_dtype_checkpoint(tmp_path)
    code, out, _ = cli(["checkpoints", "show", ckpt, "--json"])
    assert code == 0 and "tensors" not in json.loads(out)


def test_unreadable_metadata_is_one_line_naming_the_file(tmp_path, cli) -> None:
    ckpt = _mixed_dtype_checkpoint(tmp_path)
    meta = os.path.join(ckpt, "dcp", ".metadata")
    with open(meta, "wb") as fh:
        fh.write(b"cos\nsystem\n(Vtouch /tmp/x\ntR.")
    with pytest.raises(FvError, match=r"\.metadata: unreadable DCP metadata"):
        read_dcp_metadata(ckpt)
    code, out, _ = cli(["checkpoints", "show", ckpt, "--tensors", "--json"])
    data = json.loads(out)
    assert data["tensors"] is None and ".metadata" in data["tensors_error"]


def test_reading_tensors_does_not_import_torch(tmp_path) -> None:
    import subprocess
    import sys

    ckpt = _mixed_dtype_checkpoint(tmp_path)
    code = ("import sys; from fvconsole.core.checkpoints import read_dcp_metadata; t = read_dcp_metadata(sys.argv[1]).tensors; "
            "assert t.tensors; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code, ckpt], check=True, env=dict(os.environ))


async def test_console_checkpoint_detail_shows_the_totals(tmp_path) -> None:
    from tour import settle, started

    from fvconsole.core.shared.humanize import human_bytes
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState

    ckpt = _mixed_dtype_checkpoint(tmp_path)
    _, totals = _torch_view(ckpt)
    app = FvConsoleApp(ConsoleState(checkpoints_path=str(tmp_path / "out")))
    async with app.run_test(size=(140, 42)) as pilot:
        await started(app, pilot)
        await settle(app, pilot)
        detail = str(app.query_one("#ckpt-detail").render())
    assert f"DCP tensor bytes: {human_bytes(sum(totals.values()))}" in detail, detail
    lines = [line.split() for line in detail.splitlines()]
    for top, size in totals.items():
        assert [top, *human_bytes(size).split()] in lines, (top, detail)


def _hostile_sizes(ckpt: str, sizes: dict) -> None:
    """Rewrite ``dcp/.metadata`` with torch's own pickle of it, some tensors' ``size`` replaced."""
    import pickle

    from torch.distributed.checkpoint import FileSystemReader

    meta = FileSystemReader(os.path.join(ckpt, "dcp")).read_metadata()
    for key, size in sizes.items():
        meta.state_dict_metadata[key].size = size
    with open(os.path.join(ckpt, "dcp", ".metadata"), "wb") as fh:
        pickle.dump(meta, fh)


def test_one_hostile_tensor_size_is_that_tensors_problem(tmp_path, cli) -> None:
    """Issue 29 item 2: sizes beyond 64 bits, element or byte counts past int64, too many dims."""
    import torch

    ckpt = _mixed_dtype_checkpoint(tmp_path)
    hostile = {
        "model.w": (2**64, 1),                      # a dim no torch.Size can hold
        "model.b": torch.Size([2**40, 2**40]),      # 2**80 elements
        "ema.w": torch.Size([2**61]),               # float64: 2**64 bytes
        "ema.mask": (2**62,) * 60_000,              # the product torch would take a minute to build
        "counters.ids": tuple([1] * 65),            # more dims than torch allows
    }
    _hostile_sizes(ckpt, hostile)
    expected, totals = _torch_view(ckpt, skip=frozenset(hostile))  # torch's Size.numel cannot take those
    got = read_dcp_metadata(ckpt).tensors
    by_key = {t.key: t for t in got.tensors}
    assert set(hostile) <= set(by_key) and got.damaged == len(hostile)
    for key in hostile:
        assert by_key[key].problem and by_key[key].bytes is None, key
    assert [t.to_json() for t in got.tensors if t.key not in hostile] == expected
    assert got.totals_json() == totals
    code, out, err = cli(["checkpoints", "show", ckpt, "--tensors", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["tensors_error"] is None and {t["key"] for t in doc["tensors"] if t["problem"]} == set(hostile)
    code, out, err = cli(["checkpoints", "show", ckpt, "--tensors"])
    assert code == 0 and "internal error" not in err
    assert "left out of the totals: 5 tensors with a problem:" in out
    assert max(map(len, out.splitlines())) < 400


def test_one_hostile_tensor_is_one_tensor_left_out_of_the_totals(tmp_path, cli) -> None:
    """Issue 28 item 3: "1 tensor", never "tensor(s)"."""
    ckpt = _mixed_dtype_checkpoint(tmp_path)
    _hostile_sizes(ckpt, {"model.w": (2**64, 1)})
    code, out, err = cli(["checkpoints", "show", ckpt, "--tensors"])
    assert code == 0, err
    assert "left out of the totals: 1 tensor with a problem:" in out

