"""core.shared.untrusted: the one decoder of untrusted JSON documents (bounds, strictness, typed fields)."""

from __future__ import annotations

import contextlib
import json
import math
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.untrusted import INT64_MAX, Fields, UntrustedError, decode, decode_object

HOSTILE = [
    ('{"a": NaN}', "non-finite"),
    ('{"a": Infinity}', "non-finite"),
    ('{"a": -Infinity}', "non-finite"),
    ('{"a": 1e400}', "non-finite"),
    ('{"a": -1e400}', "non-finite"),
    ('{"a": ' + "9" * 5000 + "}", "not usable JSON"),
    ("[" * 200 + "]" * 200, "nested more than 100"),
    ("[" * 100_000 + "]" * 100_000, "too many items"),
    ("[" + "{}," * 100_000 + "{}]", "too many items"),
    ("{", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    ("", "not valid JSON"),
]


@pytest.mark.parametrize(("text", "fragment"), HOSTILE)
def test_hostile_documents_are_one_error_naming_the_document(text: str | bytes, fragment: str) -> None:
    with pytest.raises(UntrustedError) as info:
        decode(text, "/x/doc.json", "holder record")
    message = str(info.value)
    assert message.startswith("/x/doc.json: holder record ") and fragment in message
    assert "\n" not in message and len(message) < 400
    assert isinstance(info.value, FvError) and isinstance(info.value, ValueError)


def test_size_cap_is_checked_before_parsing() -> None:
    with pytest.raises(UntrustedError, match="larger than 10 bytes"):
        decode(b'{"a": "0123456789"}', "f", "doc", max_bytes=10)


def test_real_documents_pass() -> None:
    row_groups = [{"file": f"part-{i:05d}.parquet", "file_mtime_ns": 1_700_000_000_000_000_000 + i,
                   "file_size": 123_456, "row_group": i % 4, "rows": 100, "sample_start": 100 * i}
                  for i in range(50_000)]
    doc = {"version": 2, "row_groups": row_groups, "pi": 3.25, "neg": -5, "big": INT64_MAX}
    assert decode(json.dumps(doc), "m", "manifest") == doc
    assert decode_object(b'{"a": [1, 2.5, "x", null, true]}', "f", "doc") == {"a": [1, 2.5, "x", None, True]}


def test_decode_object_refuses_other_documents() -> None:
    with pytest.raises(UntrustedError, match="must be a JSON object \\(got list\\)"):
        decode_object("[1]", "f", "doc")


def test_memory_is_bounded_against_the_size() -> None:
    """The worst document the pre-scan lets through costs a bounded multiple of its size."""
    # Just under the cap: one container per 8 bytes, the rest padding inside strings.
    n = 40_000
    text = "[" + ",".join(['{"k":"abcdefgh"}'] * n) + "]"
    tracemalloc.start()
    value = decode(text, "f", "doc")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(value) == n
    assert peak < 30 * len(text) + (1 << 20)
    # Twenty-seven times its size when parsed: refused before parsing (the peak stays near
    # the size of the text itself).
    bomb = "[" + "{}," * 1_000_000 + "{}]"
    tracemalloc.start()
    with pytest.raises(UntrustedError):
        decode(bomb, "f", "doc")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * len(bomb) + (1 << 20)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_arbitrary_bytes_never_escape_as_another_error(data: bytes | str) -> None:
    with contextlib.suppress(UntrustedError):
        decode(data, "f", "doc")


finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | finite | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_every_finite_document_round_trips(value: object) -> None:
    text = json.dumps(value)
    assert decode(text, "f", "doc") == value


# --------------------------------------------------------------------------- Fields


def _fields(**doc: object) -> Fields:
    return Fields(doc, "/x/lock", "lock record")


@pytest.mark.parametrize(
    ("getter", "value", "kwargs"),
    [
        ("int", -1, {}),
        ("int", 2**63, {}),
        ("int", 10**400, {}),
        ("int", True, {}),
        ("int", 1.0, {}),
        ("int", "1", {}),
        ("int", [1], {}),
        ("int", 0, {"min": 1}),
        ("number", -0.5, {}),
        ("number", math.inf, {}),
        ("number", math.nan, {}),
        ("number", 10**400, {}),
        ("number", False, {}),
        ("number", "3", {}),
        ("str", 3, {}),
        ("str", ["code"], {}),
        ("str", "x" * 20, {"max_len": 10}),
        ("bool", 1, {}),
        ("object", [], {}),
        ("list", {}, {}),
        ("strings", ["a", 1], {}),
        ("str_map", {"code": ["x"]}, {}),
    ],
)
def test_a_field_of_the_wrong_type_or_range_is_invalid(getter: str, value: object, kwargs: dict) -> None:
    fields = _fields(f=value)
    with pytest.raises(UntrustedError) as info:
        getattr(fields, getter)("f", **kwargs)
    assert str(info.value).startswith("/x/lock: lock record field 'f' ")


def test_fields_return_good_values_and_defaults() -> None:
    fields = _fields(i=7, n=2, t=1.5, s="x", b=False, o={"a": 1}, l=[1], ss=["a"], m={"code": "c"}, z=None)
    assert fields.int("i") == 7 and fields.number("n") == 2.0 and fields.number("t") == 1.5
    assert fields.str("s") == "x" and fields.bool("b") is False and fields.object("o") == {"a": 1}
    assert fields.list("l") == [1] and fields.strings("ss") == ("a",) and fields.str_map("m") == {"code": "c"}
    assert fields.int("absent", None) is None and fields.int("z", 5) == 5
    with pytest.raises(UntrustedError, match="field 'absent' is missing"):
        fields.int("absent")
    with pytest.raises(UntrustedError, match="field 'z' is null"):
        fields.str("z")


def test_fields_need_an_object() -> None:
    with pytest.raises(UntrustedError, match="must be a JSON object \\(got list\\)"):
        Fields([], "f", "doc")


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_NESTED = st.recursive(st.one_of(st.integers(), st.text("{}[],\"\\a", max_size=6)),
                       lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text("{[a", max_size=3), kids,
                                                                                   max_size=3), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_NESTED, st.integers(min_value=0, max_value=8))
def test_the_depth_cap_holds_exactly_whatever_the_braces_in_strings(value: object, cap: int) -> None:
    """The pre-scan skips the depth walk only when the text cannot nest past the cap (issue 19 item 9)."""
    text = json.dumps(value)
    if _depth(value) > cap:
        with pytest.raises(UntrustedError, match=f"nested more than {cap} levels"):
            decode(text, "d.json", "doc", max_depth=cap)
    else:
        assert decode(text, "d.json", "doc", max_depth=cap) == value


@pytest.mark.parametrize("data", [
    b'\xef\xbb\xbf{"a": 1}', '\ufeff{"a": 1}', '{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-32-le"),
    b'{"a": "\\ud800"}', b'{"a": "\xed\xa0\x80"}', bytearray(b"[1, 2.5]"), b"[1.0e5, -0.0]", b'"x"',
])
def test_the_shared_decoder_decodes_as_json_loads(data: bytes | str) -> None:
    """One decoder for every document reads every encoding, BOM and surrogate as ``json.loads`` does."""
    try:
        expected: object = json.loads(data)
    except ValueError:
        with pytest.raises(UntrustedError):
            decode(data, "d.json", "doc")
    else:
        assert decode(data, "d.json", "doc") == expected


# ----------------------------------------------------------------- the small-document fast path

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30)
_tails = st.sampled_from(["", " ", "\n\t\r ", "x", "\x1c", "\u2028", "{}", ",", "]", "NaN", "\x00"])
_inserts = st.sampled_from(["", "NaN", "Infinity", "-Infinity", "1e400", "-1e999", "[" * 120, "\ud800", "\\ud800",
                            "\x01", "tru", "\"", "01"])


def _reference(data: bytes):
    """What the strict decoder says of ``data``: its value, or None when it refuses (hand-written from
    the json module's documented hooks, not from fvconsole)."""
    def refuse(name):
        raise ValueError(name)

    def finite(text):
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(text)
        return value

    try:
        value = json.loads(data, parse_constant=refuse, parse_float=finite)
    except (ValueError, RecursionError):
        return None
    depth, level = 0, [value]
    while level:
        depth += 1
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else ())
                 if isinstance(c, (dict, list))]
    return None if depth > 100 else (value,)


@settings(max_examples=600, deadline=None)
@given(value=st.dictionaries(st.text(max_size=6), _json_values, max_size=5), tail=_tails, insert=_inserts,
       at=st.integers(0, 200))
def test_small_objects_decode_as_the_strict_decoder_says(value, tail, insert, at) -> None:
    text = json.dumps(value)
    text = text[:at] + insert + text[at:] if insert and at < len(text) else text
    data = (text + tail).encode("utf-8", "surrogatepass")
    expected = _reference(data)
    try:
        got = (decode(data, "f.json", "doc"),)
    except UntrustedError:
        got = None
    if expected is None:
        assert got is None
    else:
        assert got is not None and json.dumps(got[0]) == json.dumps(expected[0])


# ---------------------------------------------------------------- shapes (issue 29 item 2)

_DIMS = st.lists(st.one_of(st.integers(0, 2**70), st.booleans(), st.floats(allow_nan=False), st.text(max_size=2)),
                 max_size=12)


@given(_DIMS, st.sampled_from([list, tuple]))
@settings(max_examples=300, deadline=None)
def test_a_shape_is_64_bit_sizes_and_its_count_is_the_product_or_none(dims: list, kind: type) -> None:
    """The oracle is math.prod of what Python itself calls ints in range; bools are never sizes."""
    from fvconsole.core.shared.untrusted import byte_count, element_count, int64_dims

    value = kind(dims)
    usable = all(type(d) is int and 0 <= d <= INT64_MAX for d in dims)
    assert int64_dims(value) == (tuple(dims) if usable else None)
    assert int64_dims(value, max_dims=3) == (tuple(dims) if usable and len(dims) <= 3 else None)
    if usable:
        product = math.prod(dims)
        count = element_count(tuple(dims))
        assert count == (product if product <= INT64_MAX else None)
        for size in (1, 2, 8, 16) if count is not None else ():
            assert byte_count(count, size) == (product * size if product * size <= INT64_MAX else None)


def test_a_shape_that_is_not_a_list_is_none() -> None:
    from fvconsole.core.shared.untrusted import int64_dims

    assert [int64_dims(v) for v in ("12", {"0": 1}, 3, None, b"\x01")] == [None] * 5


def test_the_element_count_of_60000_huge_dims_is_none_and_cheap() -> None:
    """The plain product of these is a 3.7-million-bit integer (over a minute to build); the
    count stops at the first product past 64 bits, and a zero dim anywhere makes it 0."""
    from fvconsole.core.shared.untrusted import element_count

    dims = (2**62,) * 60_000
    assert element_count(dims) is None
    assert element_count((*dims, 0)) == 0
    assert element_count(()) == 1
