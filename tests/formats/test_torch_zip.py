"""Sidecars written without torch are torch.save files: same bytes, same objects for torch.load.

The contract (docs/formats.md §3): FastVideo loads ``dataloader_state_rank<r>.pt`` with torch and
must get the payload back. These tests compare fvconsole's torch-free writer with real
``torch.save`` byte for byte, load its files with real ``torch.load`` (``weights_only`` True and
False), run them through FastVideo's resume checks (tests/fastvideo_reference.py), and check that the
torch-free reader refuses what torch's ``weights_only`` loader would not read.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import warnings
import zipfile
from typing import Any

import pytest
import torch
from fastvideo_reference import live_loader_state, resume_sidecar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migration_runs import STEP, WORLD, build_legacy, plan_for

from fvconsole.core.formats import torch_zip
from fvconsole.core.formats.torch_zip import TorchFileError

# --------------------------------------------------------------------------- payloads

BIG = 1 << 2039  # pickle's LONG1 holds 255 bytes; torch's weights_only loader has no LONG4

ints = st.one_of(
    st.integers(-300, 300),
    st.integers(-(2**70), 2**70),
    st.integers(-BIG, BIG - 1),
    st.sampled_from([0, -1, 255, 256, 65535, 65536, 2**31 - 1, -(2**31), 2**31, 2**63, -(2**63) - 1, BIG - 1, -BIG]),
)
# Any code point, lone surrogates included (pickle writes them with surrogatepass).
texts = st.text(st.characters(codec=None, blacklist_categories=()), max_size=40)
leaves = st.one_of(st.none(), st.booleans(), ints, texts)
keys = st.one_of(texts, st.integers(-(2**40), 2**40))
plain = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.tuples(inner, inner),
        st.dictionaries(keys, inner, max_size=6),
    ),
    max_leaves=40,
)
payloads = st.dictionaries(st.text(max_size=12), plain, max_size=8)


def same(a: Any, b: Any) -> bool:
    """Equal AND of the same types all the way down (``True == 1`` would hide a bool/int swap)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(k1, k2) for k1, k2 in zip(a, b, strict=True)) and all(
            same(a[k], b[k]) for k in a
        )
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def torch_save_bytes(payload: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def torch_load(data: bytes, weights_only: bool) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=weights_only)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads)
def test_random_payloads_are_torch_save_byte_for_byte_and_load_back_equal(payload) -> None:
    ours = torch_zip.dumps(payload)
    assert ours == torch_save_bytes(payload)
    assert same(torch_load(ours, weights_only=True), payload)
    assert same(torch_load(ours, weights_only=False), payload)
    assert same(torch_zip.loads(ours), payload)


@pytest.mark.parametrize("payload", [
    {},
    {"": ""},
    {"empty": [[], {}, (), [[]], {"a": {}}]},
    {"unicode": "ü€😀\U0010ffff\x00\ud800", "key ü": 1},
    {"big": [BIG - 1, -BIG, 2**64, -(2**64), 10**600]},
    {"bool": [True, False, 1, 0], "none": None},
    {i: [i] * 3 for i in range(1500)},  # batched SETITEMS/APPENDS (1000 per batch)
    {"long": "x" * 100_000},  # record sizes beyond 64 KiB, BINUNICODE of 4-byte length
])
def test_edge_payloads(payload) -> None:
    ours = torch_zip.dumps(payload)
    assert ours == torch_save_bytes(payload)
    assert same(torch_load(ours, weights_only=True), payload)
    assert same(torch_zip.loads(ours), payload)


def test_shared_references_round_trip() -> None:
    """pickle memoises an object used twice (BINGET); both readers rebuild the sharing."""
    inner = {"x": [1, 2]}
    payload = {"a": inner, "b": inner, "s": "same"}
    ours = torch_zip.dumps(payload)
    assert ours == torch_save_bytes(payload)
    loaded = torch_zip.loads(ours)
    assert same(loaded, payload) and loaded["a"] is loaded["b"]


def test_layout_matches_torch_records() -> None:
    """The records, their order, storage method and 64-byte alignment are torch's."""
    data = torch_zip.dumps({"version": 1})
    archive = zipfile.ZipFile(io.BytesIO(data))
    names = [info.filename for info in archive.infolist()]
    assert names == ["archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
                     "archive/byteorder", "archive/version", "archive/.data/serialization_id"]
    assert archive.read("archive/version") == b"3\n"
    assert archive.read("archive/.storage_alignment") == b"64"
    assert archive.read("archive/data.pkl")[:2] == b"\x80\x02"  # pickle protocol 2
    for info in archive.infolist():
        assert info.compress_type == zipfile.ZIP_STORED
        name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)  # local header
        assert data[info.header_offset + 30 + name_len:][:2] == b"FB"  # torch's padding field
        assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0, info.filename
    assert torch._C.PyTorchFileReader(io.BytesIO(data)).get_all_records() == [n.split("/", 1)[1] for n in names]


@pytest.mark.parametrize("bad", [object(), 1.5, {1.5: 1}, {(1, 2): 1}, b"bytes", {"s": {1, 2}}, BIG, -BIG - 1])
def test_writer_refuses_what_is_not_plain_data(bad) -> None:
    with pytest.raises(TypeError):
        torch_zip.dumps({"x": bad} if not isinstance(bad, dict) else bad)


def test_writer_refuses_deep_nesting_iteratively() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TypeError, match="deeper"):
        torch_zip.dumps({"x": deep})


# --------------------------------------------------------------------------- FastVideo's resume checks


def fastvideo_resume(path: str, *, weights_only: bool, **checks: Any) -> dict:
    """FastVideo's resume of a rank-local sidecar file: torch.load, then its checks (the reference)."""
    return resume_sidecar(torch.load(path, map_location="cpu", weights_only=weights_only), **checks)


def test_fastvideo_resumes_the_same_state_from_torch_free_and_torch_save_files(tmp_path) -> None:
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    with open(legacy.run.manifest_path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    ours_dir, torch_dir = tmp_path / "ours", tmp_path / "torch"
    ours_dir.mkdir()
    torch_dir.mkdir()
    for cursor in plan.ranks:
        payload = plan.sidecar_payload(cursor.rank)
        name = f"dataloader_state_rank{cursor.rank}.pt"
        (ours_dir / name).write_bytes(torch_zip.dumps(payload))
        torch.save(payload, str(torch_dir / name))  # a path: torch names the archive after the file
        want = live_loader_state(legacy.run.config, manifest, rank=cursor.rank, step=STEP)
        live = want["topology"]
        for weights_only in (True, False):
            kwargs = dict(rank=cursor.rank, world_size=WORLD, step=STEP, live_topology=live,
                          fingerprint=manifest["fingerprint"], weights_only=weights_only)
            ours = fastvideo_resume(str(ours_dir / name), **kwargs)
            theirs = fastvideo_resume(str(torch_dir / name), **kwargs)
            assert ours == theirs
            assert (ours["row_group_position"], ours["row_offset"], ours["yielded_samples"]) == (
                want["row_group_position"], want["row_offset"], want["yielded_samples"])
        with pytest.raises(ValueError, match="rank"):
            fastvideo_resume(str(ours_dir / name), rank=cursor.rank + 1, world_size=WORLD, step=STEP,
                             live_topology=live, fingerprint=manifest["fingerprint"], weights_only=True)


def test_reader_reads_files_torch_saved_to_a_path(tmp_path) -> None:
    """A path gives the archive torch's other prefix (the file's stem); the reader follows it."""
    payload = {"version": 1, "state": {"a": [1, 2, 3]}}
    path = tmp_path / "dataloader_state_rank7.pt"
    torch.save(payload, str(path))
    data = path.read_bytes()
    assert zipfile.ZipFile(io.BytesIO(data)).namelist()[0] == "dataloader_state_rank7/data.pkl"
    assert same(torch_zip.loads(data), payload)


# --------------------------------------------------------------------------- the reader refuses


def rebuild(pkl: bytes = pickle.dumps({"a": 1}, protocol=2), version: bytes = b"3\n",
            extra: list[tuple[str, bytes]] | None = None, compress: bool = False) -> bytes:
    """A torch-style zip with chosen records (Python's zipfile: an independent writer)."""
    buffer = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in [("data.pkl", pkl), ("version", version), *(extra or [])]:
            # A fixed timestamp: the bytes are the test's id, and two xdist workers collecting
            # a second apart must see the same ids.
            info = zipfile.ZipInfo(f"archive/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            archive.writestr(info, data)
    return buffer.getvalue()


def torch_refuses(data: bytes) -> bool:
    try:
        torch_load(data, weights_only=True)
    except Exception:  # noqa: BLE001 - any refusal
        return True
    return False


@pytest.mark.parametrize("case, data, reason", [
    ("legacy bare pickle", pickle.dumps({"a": 1}, protocol=2), "no zip header"),
    ("no version", None, "no version record"),
    ("version 11", rebuild(version=b"11\n"), "version record"),
    ("version text", rebuild(version=b"abc"), "version record"),
    ("byteorder", rebuild(extra=[("byteorder", b"middle")]), "byteorder record"),
    ("alignment", rebuild(extra=[(".storage_alignment", b"sixty-four")]), "storage_alignment record"),
    ("os.system", rebuild(pickle.dumps({"f": os.system}, protocol=2)), "names posix.system"),
    ("protocol 4", rebuild(pickle.dumps({"a": [1]}, protocol=4)), "opcode"),
    ("LONG4", rebuild(pickle.dumps({"a": BIG}, protocol=2)), "LONG4"),
    ("bytes", rebuild(pickle.dumps({"a": b"x"}, protocol=3)), "opcode"),
    ("tensor", None, "names torch._utils._rebuild_tensor_v2"),
])
def test_reader_refuses_with_one_line(case, data, reason) -> None:
    if case == "no version":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("archive/data.pkl", pickle.dumps({}, protocol=2))
        data = buffer.getvalue()
    if case == "tensor":
        data = torch_save_bytes({"t": torch.zeros(2)})
    with pytest.raises(TorchFileError, match=reason) as info:
        torch_zip.loads(data)
    assert "\n" not in str(info.value)
    if case not in ("os.system", "tensor"):  # torch reads those; sidecars never hold them
        assert torch_refuses(data), f"{case}: torch reads it, so refusing it would be a false alarm"


def test_reader_refuses_compressed_records_without_expanding_them() -> None:
    data = rebuild(pickle.dumps({"a": "x" * 1_000_000}, protocol=2), compress=True)
    assert len(data) < 10_000
    with pytest.raises(TorchFileError, match="compressed"):
        torch_zip.loads(data)


@pytest.mark.parametrize("cut", [10, 100, 500, -30, -1])
def test_truncated_files_are_refused(cut) -> None:
    data = torch_zip.dumps({"version": 1, "rank": 3})
    with pytest.raises(TorchFileError):
        torch_zip.loads(data[:cut])


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_data_pkl_is_refused() -> None:
    data = rebuild(extra=[("data.pkl", pickle.dumps({"b": 2}, protocol=2))])
    with pytest.raises(TorchFileError, match="appears more than once"):
        torch_zip.loads(data)



def _outcome(data: bytes) -> Any:
    try:
        return ("payload", torch_zip.loads(data))
    except TorchFileError:
        return "refused"


@settings(max_examples=400, deadline=None)
@given(payload=payloads, where=st.integers(min_value=0), value=st.integers(min_value=0, max_value=255))
def test_record_reads_refuse_what_zipfile_read_refuses(payload, where: int, value: int) -> None:
    """The reader takes each record's bytes from the buffer itself (no ZipExtFile per record).
    On any one-byte corruption of a real sidecar it reads the same payload, or refuses, exactly
    as the same reader does with ``ZipFile.read`` taking the records."""
    data = bytearray(torch_zip.dumps(payload))
    data[where % len(data)] = value
    data = bytes(data)
    fast = _outcome(data)
    with pytest.MonkeyPatch.context() as patch:  # (hypothesis cannot take the monkeypatch fixture)
        patch.setattr(torch_zip, "_stored_bytes",
                      lambda buffer, info: zipfile.ZipFile(io.BytesIO(buffer)).read(info))
        oracle = _outcome(data)
    assert fast == oracle, (where % len(data), value)
