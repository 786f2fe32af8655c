"""Human formatting shared by the CLI and the console (expected values worked out by hand)."""

from __future__ import annotations

import pytest

from fvconsole.core.shared.errors import UsageError
from fvconsole.core.shared.humanize import (
    age_since,
    format_duration,
    head_tail,
    human_age,
    human_bytes,
    is_duration,
    parse_duration,
)


def test_human_bytes_binary_units() -> None:
    assert human_bytes(None) == "-"
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1024) == "1.0 KiB"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(300 * 2**30) == "300.0 GiB"
    assert human_bytes(2**70) == "1024.0 EiB"


def test_ages_and_durations() -> None:
    assert human_age(None) == "-"
    assert human_age(-5) == "0s"
    assert human_age(59.9) == "59s"
    assert human_age(60) == "1m 0s"
    assert human_age(119) == "1m 59s"
    assert human_age(3 * 3600 + 12 * 60 + 59) == "3h 12m"  # two units: the seconds no longer matter
    assert human_age(7200) == "2h 0m"
    assert human_age(9 * 86400 + 26) == "9d 0h"  # was "9d26s" in plan reasons
    assert human_age(3 * 86400 + 23 * 3600) == "3d 23h"
    assert age_since(1000.0, now=1090.0) == "1m 30s"
    assert format_duration(0) == "0s"
    assert format_duration(600) == "10m"
    assert format_duration(129600) == "1d12h"


def test_head_tail() -> None:
    assert head_tail(list(range(5))) == ([0, 1, 2, 3, 4], 0, [])
    assert head_tail(list(range(20)), head=2, tail=1) == ([0, 1], 17, [19])


def test_a_size_beyond_any_file_is_words_not_an_overflow() -> None:
    """A float division of a 2000-bit count overflowed (issue 29 item 2); no such size is ever real."""
    assert human_bytes(2**2000) == "more than 2^128 B"
    assert human_bytes(-(2**2000)) == "-more than 2^128 B"
    assert human_bytes(2**100) == f"{2**100 / 2**60:.1f} EiB"


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("1w", 604800), ("1d12h", 129600),
    ("1.5h", 5400), ("0", 0),
])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "h", "1x", "-1d", "1d 2h", "1dd"])
def test_bad_durations_are_usage_errors_naming_the_flag(text):
    with pytest.raises(UsageError, match="--older-than"):
        parse_duration(text, "--older-than")


@pytest.mark.parametrize("text", ["0", "90s", "1d12h", " 7D "])
def test_a_duration_has_units(text):
    assert is_duration(text)
    assert not is_duration("7") and not is_duration("12 h")
