"""One sanitiser for untrusted text shown to a human.

File names, symlink targets, config keys and values, dataset ids, DCP keys and node output
are data. Before any of them reaches a terminal (CLI text output, ``error:`` lines, the
console) it goes through :func:`printable`, which shows control characters escaped instead
of letting the terminal interpret them (an OSC sequence can retitle or clear the screen).
``--json`` output does not need it: JSON escaping already covers control characters.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL, C1 controls; bidi overrides/isolates and marks (text that reads
# differently from what it is); lone surrogates (undecodable bytes of a file name decoded
# with surrogateescape, which would also break a UTF-8 stdout).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not valid UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def printable(value: Any, *, keep_newlines: bool = False) -> str:
    """``str(value)`` with every control character shown escaped (``\\x1b``, ``\\u202e``).

    With ``keep_newlines`` a ``\\n`` passes through (for multi-line blocks whose line
    structure is ours); everything else that a terminal would act on is escaped.
    """
    text = value if isinstance(value, str) else str(value)
    pattern = _UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE
    return pattern.sub(_escape, text)
