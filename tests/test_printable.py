"""The untrusted-text sanitiser: nothing a terminal acts on passes through raw."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from fvconsole.core.printable import printable


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
