"""One sanitiser for untrusted text shown to a human.

File names, symlink targets, config keys and values, dataset ids, DCP keys and node output
are data. Before any of them reaches a terminal (CLI text output, ``error:`` lines, the
console) it goes through :func:`printable`, which shows control characters escaped instead
of letting the terminal interpret them (an OSC sequence can retitle or clear the screen),
and shows invisible characters escaped so a foreign name cannot read like a cache key.
``--json`` output does not need it: JSON escaping already covers control characters.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# ASCII text (the common case) only needs the C0 controls and DEL; that regex is the fast path.
_UNSAFE_ASCII = re.compile("[\x00-\x1f\x7f]")
_UNSAFE_ASCII_KEEP_NEWLINES = re.compile("[\x00-\x09\x0b-\x1f\x7f]")
#: Unicode categories never shown raw: controls (C0, DEL, C1), format characters (bidi
#: overrides and marks, zero-width space/joiners, word joiner, BOM, soft hyphen, tag
#: characters), line and paragraph separators, private use, surrogates (undecodable bytes of
#: a file name decoded with surrogateescape, which would also break a UTF-8 stdout) and
#: unassigned code points (what a future font shows for them is anyone's guess).
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})


def _escape_code(code: int) -> str:
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not valid UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape(match: re.Match[str]) -> str:
    return _escape_code(ord(match.group()))


def _unsafe_chars(text: str, keep_newlines: bool) -> list[str]:
    """The distinct characters of ``text`` that must not be shown raw (one category look-up each)."""
    return [c for c in set(text)
            if (c < "\x20" and not (keep_newlines and c == "\n"))
            or (c >= "\x7f" and unicodedata.category(c) in UNSAFE_CATEGORIES)]


def printable(value: Any, *, keep_newlines: bool = False) -> str:
    """``str(value)`` with every control and invisible character shown escaped (``\\x1b``, ``\\u200b``).

    With ``keep_newlines`` a ``\\n`` passes through (for multi-line blocks whose line
    structure is ours); everything else that a terminal would act on, or that would not show,
    is escaped: ``\\xNN`` up to U+00FF, ``\\uNNNN`` up to U+FFFF, ``\\UNNNNNNNN`` above.
    """
    text = value if isinstance(value, str) else str(value)
    if text.isascii():
        return (_UNSAFE_ASCII_KEEP_NEWLINES if keep_newlines else _UNSAFE_ASCII).sub(_escape, text)
    unsafe = _unsafe_chars(text, keep_newlines)
    return text.translate({ord(c): _escape_code(ord(c)) for c in unsafe}) if unsafe else text


#: One visible stand-in per C0 control and DEL (the Unicode control pictures ␀ … ␟ ␡).
_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)} | {0x7F: "\u2421"}


def _picture(match: re.Match[str]) -> str:
    return _PICTURES[ord(match.group())]


def pictured(text: str) -> str:
    """``text`` with each character :func:`printable` would escape replaced by ONE visible character.

    For a value that must keep its length (an input field's cursor arithmetic): C0 controls
    and DEL become their control pictures (``␛``), every other unsafe character ``\\ufffd``.
    """
    if text.isascii():
        return _UNSAFE_ASCII.sub(_picture, text)
    unsafe = _unsafe_chars(text, keep_newlines=False)
    return text.translate({ord(c): _PICTURES.get(ord(c), "\ufffd") for c in unsafe}) if unsafe else text
