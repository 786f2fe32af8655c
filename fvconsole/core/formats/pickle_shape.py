"""Pickles of one shape: a verdict decoded once serves every file that differs only in opaque values.

Why: every save of a training run writes a ``dcp/.metadata`` that differs from the previous
one only in a few strings and integers nothing reads for the listing (torch's fresh
``save_id``, the checkpoint's path, byte offsets in the storage table), so content digests
never repeat, yet decoding each file in the inert VM (``core/formats/inert_pickle.py``) is most of a
first ``checkpoints ls``. :func:`core.formats.inert_pickle.load_recorded` reports the spans of a
decoded pickle whose content the VM never looked at (string and integer pushes that were never
a key nor a global's name, FRAME lengths). A :class:`Shape` keeps the bytes between them; a
file that equals those bytes exactly, with a complete string or integer opcode (valid UTF-8
for strings) in each span, runs the VM through the same opcodes on values of the same types,
so every check, cap and key decides the same: its verdict is the decoded file's, exactly.
Anything else (a different opcode, a key, a length, trailing bytes) is no match and is decoded.
"""

from __future__ import annotations

import struct

from fvconsole.core.formats.inert_pickle import SPAN_FRAME, SPAN_INT, SPAN_STR

#: Shapes kept per listing, most recent first, and the largest pickle kept as one (its bytes are held).
MAX_SHAPES = 4
MAX_SHAPE_BYTES = 64 * 2**20

_UINT32 = struct.Struct("<I").unpack_from
#: Opcode byte -> bytes after it, for the fixed-width integer pushes.
_INT_WIDTH = {0x4B: 1, 0x4D: 2, 0x4A: 4}


class Shape:
    """One decoded pickle's bytes and the spans of it whose content its decode never looked at."""

    __slots__ = ("view", "spans")

    def __init__(self, data: bytes, spans: list[tuple[int, int, str]]) -> None:
        kept: list[tuple[int, int, str]] = []
        at = 0
        for start, end, kind in spans:
            if start < at or end > len(data):  # not in order, or past the end: leave it fixed
                continue
            kept.append((start, end, kind))
            at = end
        self.view = memoryview(bytes(data))
        self.spans = tuple(kept)

    def matches(self, data: bytes) -> bool:
        """True when ``data`` equals these bytes outside the spans, with one complete opcode of the same
        kind in each span (valid UTF-8 for a string), and nothing after the end.

        Where ``data`` differs from the decoded bytes in only a few spans (as saves of one run do),
        the identical stretches are found by binary search over the spans (C-speed compares).
        """
        view, spans = self.view, self.spans
        size, total, count = len(data), len(view), len(spans)
        p = q = i = 0  # positions in the decoded bytes and in data; the next span
        while True:
            if size - q == total - p and data.startswith(view[p:], q):
                return True
            lo, hi = i, count  # the first span whose stretch (up to its end) is not identical
            while lo < hi:
                mid = (lo + hi) // 2
                if data.startswith(view[p:spans[mid][1]], q):
                    lo = mid + 1
                else:
                    hi = mid
            if lo == count:
                return False  # the bytes after the last span differ
            if lo > i:
                end = spans[lo - 1][1]
                q += end - p
                p = end
            start, end, kind = spans[lo]
            if not data.startswith(view[p:start], q):
                return False
            q = _skip(data, q + start - p, kind, size)
            if q < 0:
                return False
            p, i = end, lo + 1


def _skip(data: bytes, pos: int, kind: str, size: int) -> int:
    """The end of the span's opcode at ``pos``, or -1 when it is not a complete one of ``kind``."""
    if kind == SPAN_FRAME:
        return pos + 8 if pos + 8 <= size else -1
    if pos >= size:
        return -1
    op = data[pos]
    if kind == SPAN_STR:
        if op == 0x8C and pos + 2 <= size:  # SHORT_BINUNICODE
            start, end = pos + 2, pos + 2 + data[pos + 1]
        elif op == 0x58 and pos + 5 <= size:  # BINUNICODE
            start = pos + 5
            end = start + _UINT32(data, pos + 1)[0]
        else:
            return -1
        if end > size:
            return -1
        try:
            data[start:end].decode("utf-8", "surrogatepass")  # as the VM decodes it
        except UnicodeDecodeError:
            return -1
        return end
    if kind == SPAN_INT:
        width = _INT_WIDTH.get(op)
        if width is not None:
            end = pos + 1 + width
        elif op == 0x8A and pos + 2 <= size:  # LONG1
            end = pos + 2 + data[pos + 1]
        else:
            return -1
        return end if end <= size else -1
    return -1


class Shapes:
    """A listing's shapes, each with the verdict its decode gave (bounded: :data:`MAX_SHAPES`)."""

    def __init__(self) -> None:
        self._kept: list[tuple[Shape, object]] = []

    def verdict(self, data: bytes) -> object | None:
        """The verdict of a kept shape ``data`` matches, or None."""
        for i, (shape, verdict) in enumerate(self._kept):
            if shape.matches(data):
                if i:
                    self._kept.insert(0, self._kept.pop(i))
                return verdict
        return None

    def keep(self, data: bytes, spans: list[tuple[int, int, str]], verdict: object) -> None:
        """Remember the shape of a cleanly decoded ``data`` and what its decode gave."""
        if len(data) > MAX_SHAPE_BYTES:
            return
        self._kept.insert(0, (Shape(data, spans), verdict))
        del self._kept[MAX_SHAPES:]
