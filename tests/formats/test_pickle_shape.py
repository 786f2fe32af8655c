"""One decode of a DCP ``.metadata`` serves the other saves of its run (core/formats/pickle_shape.py, issue 19 item 9).

Every save writes a fresh ``save_id`` and its own path, so no two files are byte-identical;
the shape of a decoded file (its bytes outside the strings and integers the decode never
looked at) must give exactly the verdict a full decode gives, and anything else must miss.
Expected values come from torch's own reader, or from a full decode of each file on its own.
"""

from __future__ import annotations

import os
import random

import pytest

import fvconsole.core.checkpoints.verdicts as dcp_verdicts
from fvconsole.core.checkpoints.dcp_metadata import DCP_LIMITS, dcp_global, decode_dcp_metadata
from fvconsole.core.checkpoints.listing import discover_checkpoints
from fvconsole.core.checkpoints.verdicts import VerdictCache
from fvconsole.core.formats.inert_pickle import load_recorded
from fvconsole.core.formats.pickle_shape import Shape, Shapes
from fvconsole.core.shared.errors import FvError
from fvconsole.demo.builders import run_config, write_checkpoint


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Four real saves of one legacy run and one of a run without a loader key (torch's DCP writer)."""
    root = tmp_path_factory.mktemp("shape")
    config = run_config(data_path=str(root / "d"), manifest_path=str(root / "m.json"),
                        output_dir=str(root / "out"), num_gpus=2)
    for step in (5, 10, 100, 1000):
        write_checkpoint(root / "out", step, config, kind="legacy")
    write_checkpoint(root / "out", 7, config, kind="none")
    return root / "out"


def _meta(run, step: int) -> bytes:
    with open(os.path.join(run, f"checkpoint-{step}", "dcp", ".metadata"), "rb") as fh:
        return fh.read()


def _torch_loader_keys(path: str) -> int:
    """The verdict from torch's own reader (independent of fvconsole's VM)."""
    import torch.distributed.checkpoint as dcp

    md = dcp.FileSystemReader(path).read_metadata()
    return sum(1 for k in md.state_dict_metadata if k == "dataloader" or k.startswith("dataloader."))


def _full(data: bytes) -> int | str:
    """A full decode of ``data`` on its own: the loader key count, or the refusal."""
    try:
        keys = decode_dcp_metadata(data, ".metadata").keys
    except FvError as exc:
        return f"refused: {exc}"
    return sum(1 for k in keys if k == "dataloader" or k.startswith("dataloader."))


def _shape(data: bytes) -> Shape:
    _, spans = load_recorded(data, dcp_global, DCP_LIMITS)
    return Shape(data, spans)


def test_saves_of_one_run_differ_but_share_one_shape(run) -> None:
    files = [_meta(run, s) for s in (5, 10, 100, 1000)]
    assert len(set(files)) == 4  # fresh save_id and path each time: a content digest never repeats
    shape = _shape(files[0])
    assert all(shape.matches(f) for f in files)
    expected = _torch_loader_keys(os.path.join(run, "checkpoint-1000", "dcp"))
    assert expected > 0 and {_full(f) for f in files} == {expected}
    assert not shape.matches(_meta(run, 7))  # the run without a loader key has other keys


def test_a_listing_decodes_one_save_per_shape_and_lists_what_torch_reads(run, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(dcp_verdicts.ENV_SWITCH, raising=False)
    decoded: list[int] = []
    import fvconsole.core.checkpoints.dcp_metadata as checkpoints

    def counting(data, *args):
        decoded.append(len(data))
        return load_recorded(data, *args)

    monkeypatch.setattr(checkpoints, "load_recorded", counting)
    infos = {i.step: (i.kind, i.dataloader_keys) for i in discover_checkpoints(run)}
    assert len(decoded) == 2  # one legacy save, then the loader-less one; the other three matched
    for step, (kind, keys) in infos.items():
        torch_keys = _torch_loader_keys(os.path.join(run, f"checkpoint-{step}", "dcp"))
        assert keys == torch_keys and kind == ("legacy" if torch_keys else "none")


def _key_offsets(data: bytes, text: bytes) -> list[int]:
    found, at = [], data.find(text)
    while at >= 0:
        found.append(at)
        at = data.find(text, at + 1)
    return found


def test_a_changed_key_or_global_never_matches(run) -> None:
    data = _meta(run, 5)
    shape = _shape(data)
    for text, other in ((b"dataloader", b"dataloadeR"), (b"state_dict_metadata", b"state_dict_metadatA"),
                        (b"Metadata", b"Metadatb"), (b"torch.distributed.checkpoint.metadata",
                                                     b"torch.distributed.checkpoint.metadatb")):
        offsets = _key_offsets(data, text)
        assert offsets, text
        for n, at in enumerate(offsets):
            changed = data[:at] + other + data[at + len(text):]
            if n == 0:  # the first is a key or a global's name: its content decides
                assert not shape.matches(changed), (text, at)
            elif shape.matches(changed):  # a later copy may be an opaque value (a MetadataIndex's fqn)
                assert _full(changed) == _full(data)


def test_opaque_values_may_change_and_the_verdict_stays_torchs(run, tmp_path) -> None:
    data = _meta(run, 10)
    uuid_at = data.find(b"-", data.find(b"save_id")) - 8
    changed = data[:uuid_at] + b"00000000" + data[uuid_at + 8:]
    assert changed != data and _shape(data).matches(changed)
    path = tmp_path / "dcp"
    path.mkdir()
    (path / ".metadata").write_bytes(changed)
    assert _full(changed) == _torch_loader_keys(str(path)) > 0


def test_invalid_utf8_trailing_bytes_or_truncation_never_match(run) -> None:
    data = _meta(run, 10)
    shape = _shape(data)
    uuid_at = data.find(b"-", data.find(b"save_id")) - 8
    assert not shape.matches(data[:uuid_at] + b"\xff" + data[uuid_at + 1:])  # the VM would refuse it
    assert not shape.matches(data + b"\0")
    assert not shape.matches(data[:-1])
    assert not shape.matches(b"")


def test_random_mutations_give_the_full_decodes_verdict(run) -> None:
    """Whatever a mutated file is, the shapes' answer (when they have one) is the full decode's."""
    data = _meta(run, 100)
    shapes = Shapes()
    _, spans = load_recorded(data, dcp_global, DCP_LIMITS)
    shapes.keep(data, spans, _full(data))
    rng = random.Random(19)
    matched = 0
    for _ in range(3000):
        mutant = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 3))):
            at = rng.randrange(len(mutant))
            mutant[at] = rng.choice((rng.randrange(256), ord("x"), mutant[at] ^ 1))
        verdict = shapes.verdict(bytes(mutant))
        if verdict is not None:
            matched += 1
            assert verdict == _full(bytes(mutant))
    assert matched > 100  # opaque bytes (the uuid, the path, offsets) were hit often enough to test


def test_shapes_are_bounded(run) -> None:
    cache = VerdictCache(None)
    data = _meta(run, 5)
    for i in range(20):
        cache.shapes.keep(data + bytes([i]), [], i)
    assert len(cache.shapes._kept) <= 4
