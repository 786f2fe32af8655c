"""The fast manifest fingerprint is byte-identical to FastVideo's stdlib fingerprint."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fvconsole.core.formats import fastjson


def _reference(row_groups: object) -> str:
    payload = json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(payload).hexdigest()


def _row_groups(names: list[str], rows: list[int], mtime: int = 1_700_000_000_123_456_789) -> list[dict]:
    out, start = [], 0
    for i, (name, n) in enumerate(zip(names, rows, strict=True)):
        out.append(
            {"file": name, "row_group": i, "rows": n, "sample_start": start, "file_size": 4096 + i, "file_mtime_ns": mtime}
        )
        start += n
    return out


HUGE_INTS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**40, 10**400, -(10**400)]),
)
NAMES = st.text(st.characters(exclude_categories=()), max_size=12)  # any code point, lone surrogates included
VALUES = st.one_of(HUGE_INTS, NAMES)

ROW_GROUP = st.fixed_dictionaries(
    {
        "file": NAMES,
        "row_group": HUGE_INTS,
        "rows": HUGE_INTS,
        "sample_start": HUGE_INTS,
        "file_size": HUGE_INTS,
        "file_mtime_ns": HUGE_INTS,
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ROW_GROUP, min_size=1, max_size=8))
@pytest.mark.parametrize("use_orjson", [True, False])
def test_manifest_shaped_row_groups_match(use_orjson: bool, row_groups: list[dict]) -> None:
    fast = fastjson.canonical_bytes(row_groups, use_orjson=use_orjson)
    assert fast == json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode()
    assert fastjson.fingerprint(row_groups, use_orjson=use_orjson) == _reference(row_groups)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.text(max_size=6),
            st.one_of(VALUES, st.booleans(), st.none(), st.floats(allow_nan=False), st.lists(HUGE_INTS, max_size=3)),
            max_size=7,
        ),
        max_size=5,
    )
)
def test_arbitrary_shapes_fall_back_to_identical_bytes(row_groups: list[dict]) -> None:
    assert fastjson.fingerprint(row_groups) == _reference(row_groups)
    assert fastjson.fingerprint(row_groups, use_orjson=False) == _reference(row_groups)


@pytest.mark.parametrize(
    "name",
    ["plain.parquet", "vidéo/ç.parquet", "日本語/データ.parquet", "emoji-😀.parquet", "lone-\ud800", "del-\x7f",
     'quote"back\\slash', "ctl-\x00\x1f\n\t", "per%cent%d%s.parquet", "{}.parquet"],
)
@pytest.mark.parametrize("use_orjson", [True, False])
def test_awkward_file_names(name: str, use_orjson: bool) -> None:
    row_groups = _row_groups([name, name, "b.parquet"], [3, 5, 7])
    assert fastjson.fingerprint(row_groups, use_orjson=use_orjson) == _reference(row_groups)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda rg: rg[0].__setitem__("rows", True),  # bool encodes as true
        lambda rg: rg[0].__setitem__("rows", 3.0),  # float encodes as 3.0
        lambda rg: rg[0].__setitem__("rows", "3"),  # str in an int field
        lambda rg: rg[0].__setitem__("file", 7),  # int in the str field
        lambda rg: rg[1].__setitem__("file_size", "4097"),  # head field of a cached file prefix
        lambda rg: rg[1].__setitem__("file_mtime_ns", 1),  # same file, different mtime
        lambda rg: rg[0].__setitem__("extra", 1),  # seven keys
        lambda rg: rg[0].pop("rows") and rg[0].__setitem__("Rows", 3),  # six keys, different names
        lambda rg: rg[2].__setitem__("sample_start", 2**64 + 1),  # beyond orjson's range
        lambda rg: rg[2].__setitem__("sample_start", None),
        lambda rg: rg[0].pop("rows") and rg[0].__setitem__(7, 3),  # six keys, one not a str (unsortable)
        lambda rg: [d.pop("rows") and d.__setitem__(7, 3) for d in rg],  # int keys everywhere
        lambda rg: rg[0].pop("rows") and rg[0].__setitem__("rowś", 3),  # six keys, one non-ASCII
    ],
)
def test_shapes_outside_the_fast_path_still_match(mutate) -> None:
    row_groups = _row_groups(["a.parquet", "a.parquet", "b.parquet"], [3, 5, 7])
    mutate(row_groups)
    try:
        expected = _reference(row_groups)
    except TypeError:  # e.g. int and str keys cannot be sorted: FastVideo fails, so must we
        for use_orjson in (True, False):
            with pytest.raises(TypeError):
                fastjson.fingerprint(row_groups, use_orjson=use_orjson)
        return
    assert fastjson.fingerprint(row_groups) == expected
    assert fastjson.fingerprint(row_groups, use_orjson=False) == expected


def test_large_manifest_matches_and_takes_a_fast_path() -> None:
    names = [f"shard-{i // 50:04d}/part-{i // 50:05d}.parquet" for i in range(20_000)]
    row_groups = _row_groups(names, [100 + i % 7 for i in range(20_000)])
    expected = _reference(row_groups)
    assert fastjson.fingerprint(row_groups, use_orjson=False) == expected
    assert fastjson.fingerprint(row_groups) == expected
    # The specialised encoder itself (not a fallback) produced those bytes.
    assert fastjson._stdlib_fast_bytes(row_groups) == fastjson.stdlib_canonical_bytes(row_groups)
    try:
        import orjson  # noqa: F401 - optional accelerator
    except ImportError:
        return
    assert fastjson._orjson_bytes(row_groups) == fastjson.stdlib_canonical_bytes(row_groups)


def test_empty_and_non_list_inputs_fall_back() -> None:
    for value in ([], (), [{}], {"a": 1}):
        assert fastjson.fingerprint(value) == _reference(value)
