"""Hypothesis strategies that turn a valid file into a hostile one.

Two levels: byte-level damage (truncation, bit flips, garbage) for any file, and
structure-level damage (a key removed, a value of the wrong type, hostile numbers and
paths) for JSON/YAML documents, so parsers and validators are both exercised.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from hypothesis import strategies as st

#: Values that are wrong for almost any field: types, signs, sizes, encodings, paths.
HOSTILE_SCALARS: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    -(2**63),
    2**64,
    10**40,
    1.5,
    float("inf"),
    "",
    "abc",
    "12",
    "ünïcødé-名前",
    "\x00",
    "../../../../etc/passwd",
    "/etc/passwd",
    [],
    [1, 2],
    {},
    {"a": 1},
)

HOSTILE_PATHS: tuple[str, ...] = (
    "../escape.parquet",
    "../../../../etc/passwd",
    "/etc/passwd",
    "/",
    "",
    ".",
    "a/../../b.parquet",
    "ünïcødé/名前.parquet",
    "nul\x00byte.parquet",
    "a" * 5000,
)

HOSTILE_COUNTS: tuple[Any, ...] = (0, -1, -(2**63), 2**63, 10**40, 1.0, "7", None, True)


def corrupted_bytes(original: bytes) -> st.SearchStrategy[bytes]:
    """Byte-level damage: truncation, 1-8 bit flips, garbage, empty, or spliced junk."""

    def truncate(n: int) -> bytes:
        return original[: n % max(1, len(original))]

    def flip(positions: list[tuple[int, int]]) -> bytes:
        data = bytearray(original)
        for pos, bit in positions:
            if data:
                data[pos % len(data)] ^= 1 << bit
        return bytes(data)

    def splice(args: tuple[int, bytes]) -> bytes:
        pos, junk = args
        pos = pos % (len(original) + 1)
        return original[:pos] + junk + original[pos:]

    index = st.integers(min_value=0, max_value=max(0, len(original) * 2))
    return st.one_of(
        st.just(b""),
        index.map(truncate),
        st.lists(st.tuples(index, st.integers(0, 7)), min_size=1, max_size=8).map(flip),
        st.binary(min_size=1, max_size=256),
        st.tuples(index, st.binary(min_size=1, max_size=16)).map(splice),
    )


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path in a JSON-like document (containers and leaves)."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(doc, list):
        # Lists can be long (row groups): only the first, second and last items.
        for i in sorted({0, 1, len(doc) - 1} & set(range(len(doc)))):
            out.append((*prefix, i))
            out.extend(_paths(doc[i], (*prefix, i)))
    return out


def _get_parent(doc: Any, path: tuple) -> Any:
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node


def set_path(doc: Any, path: tuple, value: Any) -> Any:
    """A deep copy of ``doc`` with ``path`` set to ``value``."""
    new = copy.deepcopy(doc)
    _get_parent(new, path)[path[-1]] = value
    return new


def delete_path(doc: Any, path: tuple) -> Any:
    """A deep copy of ``doc`` without ``path`` (list items are removed)."""
    new = copy.deepcopy(doc)
    parent = _get_parent(new, path)
    del parent[path[-1]]
    return new


def mutated_document(doc: Any, *, extra_values: tuple[Any, ...] = ()) -> st.SearchStrategy[tuple[tuple, Any]]:
    """One structural mutation of ``doc``: ``(path, new_doc)``; path ``()`` = whole document.

    Either a key/item is removed or a value is replaced by a hostile scalar or container,
    or the whole document is replaced by a non-mapping.
    """
    paths = _paths(doc)
    values = st.sampled_from(HOSTILE_SCALARS + tuple(extra_values))
    whole = st.sampled_from([None, [], "text", 42, [doc]]).map(lambda v: ((), v))
    if not paths:
        return whole
    path = st.sampled_from(paths)
    removed = path.map(lambda p: (p, delete_path(doc, p)))
    replaced = st.tuples(path, values).map(lambda pv: (pv[0], set_path(doc, pv[0], pv[1])))
    return st.one_of(removed, replaced, replaced, whole)


def fingerprint(row_groups: Any) -> str:
    """docs/formats.md §4 fingerprint, so structural mutations can get past the checksum."""
    blob = json.dumps(row_groups, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def mutated_manifest(manifest: dict) -> st.SearchStrategy[tuple[str, dict]]:
    """Manifest-specific damage, re-fingerprinted so the validator (not the checksum) must catch it."""
    groups = manifest["row_groups"]
    n = len(groups)
    index = st.integers(0, n - 1)

    def with_group(i: int, key: str, value: Any) -> tuple[str, dict]:
        new = set_path(manifest, ("row_groups", i, key), value)
        new["fingerprint"] = fingerprint(new["row_groups"])
        return f"row_groups[{i}].{key}={value!r:.40}", new

    def total(value: Any) -> tuple[str, dict]:
        return f"total_rows={value!r:.40}", set_path(manifest, ("total_rows",), value)

    def drop_key(args: tuple[int, str]) -> tuple[str, dict]:
        i, key = args
        new = delete_path(manifest, ("row_groups", i, key))
        new["fingerprint"] = fingerprint(new["row_groups"])
        return f"row_groups[{i}] without {key}", new

    def swap(i: int) -> tuple[str, dict]:
        new = copy.deepcopy(manifest)
        j = (i + 1) % n
        new["row_groups"][i], new["row_groups"][j] = new["row_groups"][j], new["row_groups"][i]
        new["fingerprint"] = fingerprint(new["row_groups"])
        return f"row_groups[{i}] swapped with [{j}]", new

    keys = st.sampled_from(["file", "row_group", "rows", "sample_start", "file_size", "file_mtime_ns"])
    return st.one_of(
        st.builds(with_group, index, st.just("rows"), st.sampled_from(HOSTILE_COUNTS)),
        st.builds(with_group, index, st.just("sample_start"), st.sampled_from(HOSTILE_COUNTS)),
        st.builds(with_group, index, st.just("file"), st.sampled_from(HOSTILE_PATHS)),
        st.builds(total, st.sampled_from(HOSTILE_COUNTS)),
        st.tuples(index, keys).map(drop_key),
        index.map(swap) if n > 1 else st.nothing(),
        st.sampled_from(["fingerprint", "version", "dataset_root", "row_groups", "total_rows"]).map(
            lambda k: (f"without {k}", delete_path(manifest, (k,)))
        ),
        st.just(("fingerprint stale", set_path(manifest, ("fingerprint",), "0" * 64))),
    )


def same_document(a: Any, b: Any) -> bool:
    """Equality that tells ``True`` from ``1`` and ``1.0`` (Python's ``==`` does not)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def json_text(doc: Any) -> bytes:
    """Serialise a (possibly hostile) document as JSON, NaN/Infinity allowed as Python does."""
    return json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8")


#: Hand-picked broken YAML texts (syntax, types, and a small alias bomb).
BROKEN_YAML: tuple[tuple[str, str], ...] = (
    ("empty", ""),
    ("only a comment", "# nothing\n"),
    ("a list", "- 1\n- 2\n"),
    ("a scalar", "42\n"),
    ("unclosed bracket", "training: {distributed: [1, 2\n"),
    ("tab indentation", "training:\n\tdata: 1\n"),
    ("duplicate anchors undefined alias", "training: *nope\n"),
    ("python tag", "training: !!python/object/apply:os.system ['true']\n"),
    ("binary junk", "\x00\x01\x02\xff"),
    ("training is a string", "training: nope\n"),
    ("training.distributed null", "training:\n  distributed:\n"),
    (
        "alias bomb",
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "training: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
    ),
)
