"""The one door for untrusted JSON documents: bounded, strict decoding and typed field access.

Why one module: every JSON document fvconsole reads (journal lines, lock and evictor holder
records, receipts, cache manifests, safetensors headers, ``metadata.json``, the streaming
manifest, fleet result frames and the ``reason`` inside them) is written by a process or a
user fvconsole does not control, often in a directory anyone can write (``/dev/shm``, a shared
cache root). Decoding such a document must never cost more than a small multiple of its size,
never yield a number nothing can use (NaN, ±Infinity, ``1e400`` parses to ``inf``, a 400-digit
integer overflows every ``os`` call and ``datetime``), and never hand a caller a value of the
wrong type. :func:`decode` bounds the document (size, a cheap pre-scan that caps the number
of containers and items against the size, nesting depth) and parses it strictly;
:class:`Fields` reads one object's fields by type and range. Every failure is one
:class:`UntrustedError` (an ``FvError`` and a ``ValueError``) naming the document and field,
so one damaged record is that record's problem, never the command's.

``tests/architecture/test_doors.py::test_no_module_goes_around_its_door[untrusted-documents]`` proves that no other module
calls ``json.loads``/``json.load``/``orjson.loads``.
"""

from __future__ import annotations

import json
import math
import os
from itertools import chain
from typing import Any, NoReturn

from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.reasons import KINDS, Reason, Words

#: Nesting far beyond any real fvconsole input (receipts, manifests, configs are < 10 deep),
#: far below what Python's recursive walkers (repr, ==, json.dumps, deepcopy) can take.
MAX_JSON_DEPTH = 100
#: Integers that fit in 64 bits: the range of every size, time, pid and count fvconsole reads.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: The last second a time can be shown as a date (9999-12-31T23:59:59Z): every epoch field's bound.
MAX_EPOCH = 253_402_300_799
#: The largest pid_t; a pid field beyond it made ``os.kill`` raise OverflowError.
MAX_PID = 2**31 - 1
#: Containers plus items ("{", "[" and "," in the text) allowed per byte of the document, and
#: a floor for small documents. Each costs at most ~100 bytes of memory once parsed, so a
#: document decodes in at most ~12x its size plus ~1 MiB. A real row group of a streaming
#: manifest is ~7 per 120 bytes; 40 MiB of ``{}`` is 1 per 1.5 bytes (and ~27x its size).
ITEMS_PER_BYTE = 1 / 8
MIN_ITEMS = 10_000

_CONTAINERS = frozenset((dict, list))


class UntrustedError(FvError, ValueError):
    """A document (or one field of it) that cannot be used: one line naming it and why.

    ``detail``: why, without the document's name (for a caller that names it its own way);
    ``syntax``: True when the text is not JSON at all (as opposed to JSON that cannot be used).
    """

    kind = "untrusted_document"

    def __init__(self, message: str, *, detail: str = "", syntax: bool = False) -> None:
        super().__init__(message)
        self.detail = detail or message
        self.syntax = syntax


def _fail_constant(name: str) -> NoReturn:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf
        raise ValueError(f"non-finite number {text[:20]}")
    return value


#: One strict decoder for every document (``json.loads`` with arguments builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_fail_constant, parse_float=_finite_float)


def _loads(data: bytes | str) -> Any:
    """``json.loads(data, parse_constant=..., parse_float=...)``; bytes (every file read) step for step
    with the shared decoder, text as it is (its BOM check is ``json.loads``'s own)."""
    if not isinstance(data, (bytes, bytearray)):
        return json.loads(data, parse_constant=_fail_constant, parse_float=_finite_float)
    if data[:1] == b"{" and data[1:2] != b"\0":  # what detect_encoding says of it (no BOM starts with "{")
        return _DECODER.decode(data.decode("utf-8", "surrogatepass"))
    return _DECODER.decode(data.decode(json.detect_encoding(data), "surrogatepass"))


_SCAN = _DECODER.scan_once
_JSON_SPACE = " \t\n\r"


def _small_object(data: bytes, max_depth: int | None) -> Any:
    """The usual small document (a cache manifest, a shard header: 400,000 of them in one listing),
    decoded with the strict decoder's own scanner and no pre-scan; None when it needs the full path.

    No pre-scan is needed: ``data`` holds at most MIN_ITEMS bytes, so it cannot hold more containers
    and items than the bound allows. Anything unusual (not UTF-8, a syntax error, trailing text, a
    bad number, deep enough to need the depth walk) is None, and :func:`decode` then decodes it
    step by step, words the error its own way or walks the depth.
    """
    if max_depth is not None and len(data) > max_depth and data.count(b"{") + data.count(b"[") > max_depth:
        return None
    try:
        text = data.decode("utf-8", "surrogatepass")
        value, end = _SCAN(text, 0)
    except (ValueError, StopIteration, RecursionError, MemoryError):
        return None
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return None
    return value


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def _pre_scan(data: bytes | str, per_byte: float, floor: int) -> tuple[int, int | None]:
    """(``{`` plus ``[`` in ``data``, the item count when it exceeds what the size allows, else None).

    Counts ``{``, ``[`` and ``,`` at C speed (braces inside strings count too: an upper bound).

    The first is a bound on the nesting depth (every container opens with one of them; those
    inside strings only raise the bound), so a document with fewer than the depth cap needs
    no depth walk: the cache listing decodes 400,000 small documents.
    """
    if isinstance(data, str):
        brace, bracket, comma = "{", "[", ","
    else:
        brace, bracket, comma = b"{", b"[", b","
    allowed = int(len(data) * per_byte) + floor
    count = data.count(brace)
    if count <= allowed:
        count += data.count(bracket)
        opens = count
        if count <= allowed:
            count += data.count(comma)
    else:
        opens = count
    return opens, (count if count > allowed else None)


def json_depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when ``value`` nests lists/objects more than ``max_depth`` deep.

    Iterative and level by level with C-speed helpers (a million-row-group manifest is
    checked in a fraction of its parse time); never recurses, so any depth is safe to ask.
    """
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return True
        kinds = set(map(type, level))
        dicts = level if kinds == {dict} else [c for c in level if type(c) is dict]
        lists = level if kinds == {list} else [c for c in level if type(c) is list]
        values = chain.from_iterable(map(dict.values, dicts)) if dicts else ()
        items = chain.from_iterable(lists) if lists else ()
        if _CONTAINERS.isdisjoint(map(type, values)) and _CONTAINERS.isdisjoint(map(type, items)):
            return False
        children = chain(chain.from_iterable(map(dict.values, dicts)), chain.from_iterable(lists))
        level = [c for c in children if type(c) in _CONTAINERS]
    return False


def decode(
    data: bytes | str,
    shown: str,
    what: str,
    *,
    max_bytes: int | None = None,
    max_depth: int | None = MAX_JSON_DEPTH,
    items_per_byte: float = ITEMS_PER_BYTE,
) -> Any:
    """Parse one untrusted JSON document; every way it is unusable is one UntrustedError naming ``shown``.

    Refused: more than ``max_bytes``; more containers and items than the size allows (memory);
    NaN, ±Infinity and floats beyond the double range; integers beyond Python's digit limit;
    nesting deeper than ``max_depth`` (``None`` leaves that check to a caller that knows a
    cheaper way, e.g. the manifest's million flat row groups); invalid UTF-8 or JSON.
    Integer *ranges* are the fields' business (:class:`Fields`).
    """
    if max_bytes is not None and len(data) > max_bytes:
        raise UntrustedError(f"{shown}: {what} is larger than {max_bytes} bytes; refusing to read it",
                             detail=f"larger than {max_bytes} bytes")
    if type(data) is bytes and len(data) <= MIN_ITEMS and data[:1] == b"{" and items_per_byte >= 0:
        value = _small_object(data, max_depth)
        if value is not None:
            return value
    opens, count = _pre_scan(data, items_per_byte, MIN_ITEMS)
    if count is not None:
        why = f"too many items for its size: {count} in {len(data)} bytes"
        raise UntrustedError(f"{shown}: {what} is not usable JSON ({why})", detail=why)
    try:
        value = _loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UntrustedError(f"{shown}: {what} is not valid JSON ({_one_line(exc)})", detail=_one_line(exc),
                             syntax=True) from None
    except RecursionError:
        raise UntrustedError(f"{shown}: {what} is not usable JSON (nested too deeply)", detail="nested too deeply") from None
    except MemoryError:
        raise UntrustedError(f"{shown}: {what} is too large to load into memory", detail="too large to load into memory") from None
    except ValueError as exc:  # a non-finite number, or an integer beyond int_max_str_digits
        raise UntrustedError(f"{shown}: {what} is not usable JSON ({_one_line(exc)})", detail=_one_line(exc)) from None
    if max_depth is not None and opens > max_depth and json_depth_exceeds(value, max_depth):
        why = f"nested more than {max_depth} levels deep"
        raise UntrustedError(f"{shown}: {what} is not usable JSON ({why})", detail=why)
    return value


def decode_object(data: bytes | str, shown: str, what: str, **bounds: Any) -> dict[str, Any]:
    """:func:`decode`, and the document must be a JSON object."""
    value = decode(data, shown, what, **bounds)
    if type(value) is not dict:
        raise UntrustedError(f"{shown}: {what} must be a JSON object (got {type_name(value)})")
    return value


def load_file(path: str | os.PathLike[str], what: str, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Read (bounded, regular files only, ``core.shared.safe_read``) and decode a JSON file.

    OSError propagates for the caller to word; everything else is an FvError naming the file.
    """
    from fvconsole.core.shared.safe_read import read_regular_file

    data = read_regular_file(path, what, max_bytes)
    return decode(data, os.fspath(path), what, max_depth=max_depth)


def int64_dims(value: Any, max_dims: int | None = None) -> tuple[int, ...] | None:
    """A shape read from an untrusted document (a safetensors header, a pickled ``torch.Size``):
    a list or tuple of ints in ``0..INT64_MAX`` (never a bool), at most ``max_dims`` of them; else None.

    Why here: a dim beyond 64 bits is one no tensor library can hold, and every size computed
    from it (elements, bytes) is a number nothing downstream can use or print.
    """
    if type(value) not in (list, tuple) or (max_dims is not None and len(value) > max_dims):
        return None
    for d in value:
        if type(d) is not int or not 0 <= d <= INT64_MAX:
            return None
    return tuple(value)


def element_count(dims: tuple[int, ...] | list[int]) -> int | None:
    """The product of ``dims`` (each in ``0..INT64_MAX``), or None when it exceeds INT64_MAX.

    Linear in ``len(dims)``: it stops at the first product past the bound, so no step multiplies
    numbers of more than 128 bits (the plain product of 60,000 dims of 2**62 is a 3.7-million-bit
    integer built by 60,000 ever longer multiplications: over a minute, then unprintable).
    A shape with a zero dim has no elements, whatever the others are.
    """
    if 0 in dims:
        return 0
    total = 1
    for d in dims:
        total *= d
        if total > INT64_MAX:
            return None
    return total


def byte_count(elements: int, element_bytes: int) -> int | None:
    """``elements * element_bytes``, or None when it exceeds INT64_MAX (no file holds more bytes)."""
    total = elements * element_bytes
    return total if 0 <= total <= INT64_MAX else None


def type_name(value: Any) -> str:
    """A JSON value's type in JSON's words ("object", "list", "string", ...)."""
    return {dict: "object", list: "list", str: "string", int: "integer", float: "number", bool: "boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


_MISSING = object()


class Fields:
    """Typed, range-checked reads of one untrusted JSON object's fields.

    Each getter returns the value, or raises UntrustedError "<shown>: <what> field 'k' ...";
    ``default`` (when given) is returned for an absent field or null. Booleans are never numbers.
    """

    def __init__(self, doc: Any, shown: str, what: str) -> None:
        if type(doc) is not dict:
            raise UntrustedError(f"{shown}: {what} must be a JSON object (got {type_name(doc)})")
        self.doc = doc
        self.shown = shown
        self.what = what

    def fail(self, key: str, problem: str) -> NoReturn:
        raise UntrustedError(f"{self.shown}: {self.what} field '{key}' {problem}")

    def _get(self, key: str, default: Any) -> Any:
        value = self.doc.get(key)
        if value is None:
            if default is _MISSING:
                self.fail(key, "is missing" if key not in self.doc else "is null")
            return default
        return value

    def _typed(self, key: str, default: Any, kind: type, what: str) -> Any:
        """The field if its type is exactly ``kind`` (``what`` names it in the message), or ``default``."""
        value = self._get(key, default)
        if (value is default and default is not _MISSING) or type(value) is kind:
            return value
        self.fail(key, f"must be {what} (got {type_name(value)})")

    def str(self, key: str, default: Any = _MISSING, *, max_len: int = 1 << 16) -> Any:
        value = self._typed(key, default, str, "a string")
        if value is not default and len(value) > max_len:
            self.fail(key, f"is longer than {max_len} characters")
        return value

    def int(self, key: str, default: Any = _MISSING, *, min: int = 0, max: int = INT64_MAX) -> Any:
        value = self._typed(key, default, int, "an integer")
        if value is not default and not min <= value <= max:
            self.fail(key, f"is out of range (must be {min}..{max})")
        return value

    def number(self, key: str, default: Any = _MISSING, *, min: float = 0.0, max: float = float(INT64_MAX)) -> Any:
        """An int or finite float in ``[min, max]``, as a float (times, durations, fractions)."""
        value = self._get(key, default)
        if value is default and default is not _MISSING:
            return value
        if type(value) not in (int, float):
            self.fail(key, f"must be a number (got {type_name(value)})")
        if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
            self.fail(key, f"is out of range (must be {min:g}..{max:g})")
        number = float(value)
        if not (math.isfinite(number) and min <= number <= max):
            self.fail(key, f"is out of range (must be {min:g}..{max:g})")
        return number

    def bool(self, key: str, default: Any = _MISSING) -> Any:
        return self._typed(key, default, bool, "true or false")

    def object(self, key: str, default: Any = _MISSING) -> Any:
        return self._typed(key, default, dict, "an object")

    def list(self, key: str, default: Any = _MISSING) -> Any:
        return self._typed(key, default, list, "a list")

    def strings(self, key: str, default: Any = _MISSING, *, max_len: int = 1 << 16) -> Any:
        """A list of strings, as a tuple."""
        value = self.list(key, default)
        if value is default and default is not _MISSING:
            return value
        if not all(type(v) is str and len(v) <= max_len for v in value):
            self.fail(key, "must be a list of strings")
        return tuple(value)

    def str_map(self, key: str, default: Any = _MISSING, *, max_len: int = 1 << 16) -> Any:
        """An object whose values are all strings (e.g. a reason's ``values``), as a new dict."""
        value = self.object(key, default)
        if value is default and default is not _MISSING:
            return value
        if not all(type(v) is str and len(v) <= max_len for v in value.values()):
            self.fail(key, "must map names to strings")
        return dict(value)


def parse_reason(doc: Any, shown: str = "result", what: str = "reason") -> Reason | None:
    """A reason another process sent (:meth:`Reason.to_json`), re-worded here.

    Untrusted: UntrustedError naming the field when it is damaged (``code`` a list raised
    TypeError; ``values`` holding a key named ``code`` or ``field`` crashed the run as
    duplicate keyword arguments); None for a code this side does not know or a template
    value it lacks (another version). Both texts and the remedy come from this side's
    :data:`KINDS`, never from the sender.
    """
    f = Fields(doc, shown, what)
    code, field, values = f.str("code", max_len=200), f.str("field", max_len=4096), f.str_map("values")
    kind = KINDS.get(code)
    if kind is None:
        return None
    named = tuple(values.items())
    try:
        detail = kind.detail.format_map(Words(named))
    except (KeyError, IndexError, ValueError):  # a value the template needs is missing
        return None
    return Reason(code, field, named, detail, kind.remedy)
