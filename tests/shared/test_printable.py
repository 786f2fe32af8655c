"""The untrusted-text sanitiser: nothing a terminal acts on passes through raw."""

from __future__ import annotations

import os
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fvconsole.core.shared.terminal_text import printable


def test_escapes_osc_title_sequence() -> None:
    hostile = "ckpt\x1b]0;pwned\x07\x1b[2J"
    assert printable(hostile) == "ckpt\\x1b]0;pwned\\x07\\x1b[2J"


def test_plain_text_and_unicode_pass_unchanged() -> None:
    assert printable("checkpoint-300/dcp ünïcode 模型 [/]s52") == "checkpoint-300/dcp ünïcode 模型 [/]s52"


def test_newlines_escaped_unless_kept() -> None:
    assert printable("a\nb") == "a\\x0ab"
    assert printable("a\nb\rc", keep_newlines=True) == "a\nb\\x0dc"


def test_c1_bidi_and_undecodable_bytes() -> None:
    assert printable("\x9b31m") == "\\x9b31m"
    assert printable("abc\u202edcba") == "abc\\u202edcba"
    name = os.fsdecode(b"bad\xffname")
    assert printable(name) == "bad\\xffname"


def test_non_strings_are_converted() -> None:
    assert printable(42) == "42"


@given(st.text())
def test_output_has_no_control_characters_and_encodes_as_utf8(text: str) -> None:
    out = printable(text)
    out.encode("utf-8")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in out)


# D31: invisible characters (Unicode Cf, Zl, Zp, Co, Cn) are escaped too, in the same style.
@pytest.mark.parametrize(("hostile", "shown"), [
    ("0123\u200b4567", "0123\\u200b4567"),  # zero-width space (Cf)
    ("ab\u200c\u200dcd", "ab\\u200c\\u200dcd"),  # zero-width non-joiner / joiner (Cf)
    ("key\u2060", "key\\u2060"),  # word joiner (Cf)
    ("\ufeffkey", "\\ufeffkey"),  # BOM / zero-width no-break space (Cf)
    ("soft\u00adhyphen", "soft\\xadhyphen"),  # soft hyphen (Cf)
    ("k\U000e0041\U000e007f", "k\\U000e0041\\U000e007f"),  # tag characters (Cf, outside the BMP)
    ("line\u2028sep", "line\\u2028sep"),  # line separator (Zl)
    ("para\u2029sep", "para\\u2029sep"),  # paragraph separator (Zp)
    ("pua\ue000\U000f0000", "pua\\ue000\\U000f0000"),  # private use (Co)
    ("unassigned\u0378", "unassigned\\u0378"),  # unassigned (Cn)
    ("nonchar\uffff", "nonchar\\uffff"),  # noncharacter (Cn)
])
def test_invisible_format_separator_private_and_unassigned_are_escaped(hostile: str, shown: str) -> None:
    assert printable(hostile) == shown
    assert printable(hostile, keep_newlines=True) == shown


def test_visible_non_ascii_still_passes_next_to_escapes() -> None:
    assert printable("é\u200b模型\u2066", keep_newlines=True) == "é\\u200b模型\\u2066"
    assert printable("naïve café 😀 e\u0301") == "naïve café 😀 e\u0301"  # combining accent (Mn) is visible


_NEVER_RAW = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"}


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)))
def test_output_shows_no_invisible_character(text: str) -> None:
    out = printable(text)
    assert not [c for c in out if unicodedata.category(c) in _NEVER_RAW]
