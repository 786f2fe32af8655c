"""Fast, byte-exact manifest fingerprint (docs/formats.md §4) for million-row-group manifests.

FastVideo fingerprints a manifest as::

    sha256(json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode())

The stdlib encoder needs ~1.5-1.8 s of CPU per million row groups (it re-escapes the six key
names and the file name of every row group and sorts each dict's keys). ``fingerprint`` returns the
same digest faster, taking a fast path only when it can prove the bytes are identical:

1. the row groups are a ``list`` of plain ``dict`` with six values each, every value an exact
   ``int`` or ``str`` (no bool, float, None, subclass or nesting, which encode differently);
2. then, if the optional ``orjson`` package is importable, its sorted-key output is used when
   it is pure ASCII without DEL (orjson writes non-ASCII as UTF-8 and DEL raw, where the
   stdlib writes ``\\uXXXX``; ints beyond 64 bits make orjson raise): ~3x faster;
3. otherwise a specialised stdlib encoder builds each row group's text from a per-file prefix
   (escaped once per file with the same C routine ``json.dumps`` uses) and three integers
   (~1.3x faster);
4. anything else falls back to ``json.dumps`` itself.
"""

from __future__ import annotations

import hashlib
import json
from itertools import chain
from json.encoder import encode_basestring_ascii
from typing import Any

from fvconsole.core.shared.optional import optional

#: The row-group keys of a version-2 manifest, in sorted (canonical) order.
ROW_GROUP_KEYS = ("file", "file_mtime_ns", "file_size", "row_group", "rows", "sample_start")
_ALLOWED_VALUE_TYPES = frozenset((int, str))


def stdlib_canonical_bytes(row_groups: Any) -> bytes:
    """The reference encoding, exactly as FastVideo computes it."""
    return json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode("utf-8")


def stdlib_fingerprint(row_groups: Any) -> str:
    """The reference fingerprint (slow on large manifests; the fallback of ``fingerprint``)."""
    return hashlib.sha256(stdlib_canonical_bytes(row_groups)).hexdigest()


def _shape_is_flat(row_groups: Any) -> bool:
    """A non-empty list of plain six-item dicts whose values are exact ints or strs."""
    if type(row_groups) is not list or not row_groups:
        return False
    if set(map(type, row_groups)) != {dict} or set(map(len, row_groups)) != {len(ROW_GROUP_KEYS)}:
        return False
    value_types = set(map(type, chain.from_iterable(map(dict.values, row_groups))))
    return value_types <= _ALLOWED_VALUE_TYPES


def _orjson_bytes(row_groups: list[dict[str, Any]]) -> bytes | None:
    """orjson's sorted compact output when it provably equals the stdlib's, else None."""
    orjson = optional("orjson")
    if orjson is None:
        return None
    try:
        out = orjson.dumps(row_groups, option=orjson.OPT_SORT_KEYS)
    except (TypeError, ValueError):  # e.g. ints beyond 64 bits, non-str keys, surrogates
        return None
    # ASCII output means every key and string was ASCII, so key order and escapes agree,
    # except DEL, which only the stdlib escapes.
    if not out.isascii() or b"\x7f" in out:
        return None
    return out


def _file_prefix(name: Any, mtime: Any, size: Any) -> str:
    """Canonical text of one row group up to ``"row_group":`` (shared by a file's groups)."""
    if type(name) is not str or type(mtime) is not int or type(size) is not int:
        raise TypeError("row group head is not (str, int, int)")
    return f'{{"file":{encode_basestring_ascii(name)},"file_mtime_ns":{mtime:d},"file_size":{size:d},"row_group":'


def _stdlib_fast_bytes(row_groups: list[dict[str, Any]]) -> bytes:
    """Specialised encoder for the six-key shape; raises KeyError/TypeError/ValueError otherwise."""
    heads: dict[str, tuple[int, int, str]] = {}
    parts: list[str] = []
    append = parts.append
    for item in row_groups:
        name = item["file"]
        mtime = item["file_mtime_ns"]
        size = item["file_size"]
        head = heads.get(name)
        if head is None or head[0] != mtime or head[1] != size:
            head = heads[name] = (mtime, size, _file_prefix(name, mtime, size))
        # ":d" rejects a str in an int field; _shape_is_flat already excluded bool/float.
        append(f'{head[2]}{item["row_group"]:d},"rows":{item["rows"]:d},"sample_start":{item["sample_start"]:d}}}')
    return ("[" + ",".join(parts) + "]").encode("ascii")


def canonical_bytes(row_groups: Any, *, use_orjson: bool = True) -> bytes:
    """``json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode()``, fast when possible."""
    if _shape_is_flat(row_groups):
        if use_orjson:
            out = _orjson_bytes(row_groups)
            if out is not None:
                return out
        try:
            return _stdlib_fast_bytes(row_groups)
        except (KeyError, TypeError, ValueError):
            pass
    return stdlib_canonical_bytes(row_groups)


def fingerprint(row_groups: Any, *, use_orjson: bool = True) -> str:
    """sha256 hex of the canonical row-group JSON: byte-identical to FastVideo's fingerprint."""
    return hashlib.sha256(canonical_bytes(row_groups, use_orjson=use_orjson)).hexdigest()

