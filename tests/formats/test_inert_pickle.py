"""The inert pickle reader: same values as pickle for plain data, stand-ins for classes, hard caps.

Expected values come from the standard library's own ``pickle.loads`` (plain data) and from
real torch DCP dataclasses pickled by ``pickle.dumps``; the reader never imports or calls them.
"""

from __future__ import annotations

import pickle
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fvconsole.core.formats import inert_pickle as ip
from fvconsole.core.formats.inert_pickle import (
    AS_DICT,
    AS_GLOBAL,
    InertGlobal,
    InertObject,
    Limits,
    PickleRefused,
)


def anything(module: str, name: str) -> str:
    return AS_DICT if (module, name) == ("collections", "OrderedDict") else AS_GLOBAL


small_ints = st.integers(-(2**59), 2**59)
keys = st.one_of(st.text(max_size=10), small_ints, st.booleans(), st.none())
leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text())


def plain(extra_leaves=None):
    return st.recursive(
        st.one_of(leaves, extra_leaves) if extra_leaves is not None else leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner), st.tuples(inner),
                                st.tuples(inner, inner, inner), st.lists(inner, max_size=5).map(tuple),
                                st.dictionaries(keys, inner, max_size=5)),
        max_leaves=30,
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=plain(), protocol=st.integers(1, 5))
def test_plain_data_equals_pickle_loads(value, protocol) -> None:
    data = pickle.dumps(value, protocol=protocol)
    assert ip.load(data) == pickle.loads(data)


@settings(max_examples=100, deadline=None)
@given(value=plain(st.one_of(st.binary(max_size=10), st.frozensets(small_ints, max_size=4))), protocol=st.integers(4, 5))
def test_bytes_and_sets_with_protocol_4_and_5(value, protocol) -> None:
    data = pickle.dumps(value, protocol=protocol)
    assert ip.load(data) == pickle.loads(data)


def test_dcp_dataclasses_become_inert_objects() -> None:
    """A real DCP Metadata (torch dataclasses) reads as stand-ins with their fields as state."""
    torch = pytest.importorskip("torch")
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata,
        Metadata,
        TensorProperties,
        TensorStorageMetadata,
    )

    table = {
        f"model.layer{i}.weight": TensorStorageMetadata(
            TensorProperties(dtype=torch.bfloat16), torch.Size([8, 4]),
            [ChunkStorageMetadata(torch.Size([r * 2, 0]), torch.Size([2, 4])) for r in range(4)])
        for i in range(50)
    }
    data = pickle.dumps(Metadata(state_dict_metadata=table), protocol=4)
    meta = ip.load(data, anything)
    assert isinstance(meta, InertObject) and meta.cls.name == "Metadata"
    state = meta.state if isinstance(meta.state, dict) else meta.state[0]
    assert sorted(state["state_dict_metadata"]) == sorted(pickle.loads(data).state_dict_metadata)
    entry = state["state_dict_metadata"]["model.layer3.weight"]
    assert entry.cls.module == "torch.distributed.checkpoint.metadata" and entry.cls.name == "TensorStorageMetadata"
    # Each distinct global is one stand-in, shared by every use.
    size_classes = {id(c.cls) for c in _walk(meta) if isinstance(c, InertObject) and c.cls.name == "Size"}
    assert len(size_classes) == 1


def _walk(value):
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, InertObject):
            stack.extend([item.args, item.state])


def test_nothing_named_is_imported_or_called() -> None:
    data = b"\x80\x02cnot_a_real_module_fv\nboom\nX\x03\x00\x00\x00argq\x00\x85R."
    obj = ip.load(data, anything)
    assert isinstance(obj, InertObject) and obj.args == ("arg",)
    assert "not_a_real_module_fv" not in sys.modules
    data = pickle.dumps({"f": print}, protocol=2)
    with pytest.raises(PickleRefused, match=r"names __builtin__\.print"):
        ip.load(data)


@pytest.mark.parametrize("data, limits, message", [
    (b"\x80\x02" + b"N0" * 1000 + b"N.", Limits(max_ops=500), "more than 500 opcodes"),
    (b"\x80\x02" + b"".join(b"Nq%c0" % i for i in range(10)) + b"N.", Limits(max_memo=5), "more than 5 memo entries"),
    (b"\x80\x02](" + b"".join(b"cm\nC%d\n" % i for i in range(20)) + b"e.", Limits(max_globals=10),
     "more than 10 distinct"),
    (b"\x80\x02]q\x00(" + b"K\x00N\x86" * 100 + b"e0](" + b"ccollections\nOrderedDict\nh\x00\x85R" * 20 + b"e.",
     Limits(max_work=1000), "copying/hashing work"),
])
def test_limits_refuse(data, limits, message) -> None:
    with pytest.raises(PickleRefused, match=message):
        ip.load(data, anything, limits)


def test_repeated_globals_are_interned() -> None:
    data = b"\x80\x02](" + b"cm\nC\n" * 10_000 + b"e."
    items = ip.load(data, anything, Limits(max_globals=1))
    assert len(items) == 10_000 and all(item is items[0] for item in items)
    assert isinstance(items[0], InertGlobal)


@pytest.mark.parametrize("key, message", [
    (b"\x8a\x09" + (2**64).to_bytes(9, "little"), "integer dict key"),
    (b"G" + b"\x3f\xf0" + b"\x00" * 6, "float as a dict key"),
    (b"K\x01K\x02\x86\x85", "nested tuple"),
])
def test_dict_keys_that_hash_slowly_or_collide_are_refused(key, message) -> None:
    with pytest.raises(PickleRefused, match=message):
        ip.load(b"\x80\x02}" + key + b"Ns.")


@pytest.mark.parametrize("data", [
    b"", b"\x80\x02", b"\x80\x02N", b"\x80\x02h\x05.", b"\x80\x02X\xff\xff\xff\x00ab.", b"\x80\x09N.",
    b"\x80\x02(N.", b"\x80\x02NN.", b"\x80\x02Q.", b"\x80\x02\x82\x01.", b"\x80\x02\xff.",
])
def test_malformed_pickles_are_one_line_refusals(data) -> None:
    with pytest.raises(PickleRefused) as info:
        ip.load(data)
    assert "\n" not in str(info.value)
    # callers word it "<file>: unreadable DCP metadata: the pickle <reason>": a predicate
    assert str(info.value).split()[0] in {"is", "uses", "names", "has", "holds", "needs", "nests", "refers"}, str(info.value)


def test_check_tree_finds_cycles_depth_and_size() -> None:
    cyclic = ip.load(b"\x80\x02]q\x00h\x00a.")  # a list that contains itself
    assert cyclic[0] is cyclic
    with pytest.raises(PickleRefused, match="cycle"):
        ip.check_tree(cyclic)
    deep = ip.load(b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".")
    with pytest.raises(PickleRefused, match="deeper than 100"):
        ip.check_tree(deep)
    ip.check_tree(deep, ip.TreeLimits(max_depth=6000, max_nodes=10_000))
    # 40 levels of (x, x): 40 containers in memory, 2**40 values when walked.
    wide = ip.load(b"\x80\x02](K\x01q\x00" + b"".join(b"h%ch%c\x86q%c" % (i, i, i + 1) for i in range(40)) + b"e.")
    with pytest.raises(PickleRefused, match="more than 1000000 values"):
        ip.check_tree(wide)
    ip.check_tree({"a": [1, 2, (3, 4)], "b": {"c": None}})
