"""Sizes, ages, durations and UTC stamps for humans, both ways: the one place both front ends take them from.

Rich-free on purpose (the core imports no UI library), so the CLI, the console and core
messages (plan reasons) word sizes and times identically. Durations are read here too
(``parse_duration``: ``--grace``, ``--older-than``, ``--since``), beside the function that
writes them back (``format_duration``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from fvconsole.core.shared.errors import UsageError

_T = TypeVar("_T")
_R = TypeVar("_R")
_BINARY_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
#: Longer than any cache or run has existed; beyond it a duration is a typo (``99999999999w``),
#: and its day count would be hundreds of digits long in every plan reason.
MAX_DURATION_SECONDS = 100 * 365.25 * 86400.0


def human_bytes(n: int | float | None) -> str:
    """Binary units (GiB), which is how caps and tmpfs sizes are expressed: ``1.5 GiB``."""
    if n is None:
        return "-"
    value = int(n)
    if abs(value) < 1024:
        return f"{value} B"
    if value.bit_length() > 128:  # no file is this large; a float division would overflow
        return f"{'-' if value < 0 else ''}more than 2^128 B"
    unit = 1024
    for suffix in _BINARY_UNITS:
        if abs(value) < unit * 1024 or suffix == _BINARY_UNITS[-1]:
            return f"{value / unit:.1f} {suffix}"
        unit *= 1024
    raise AssertionError("unreachable")


def human_age(seconds: float | None) -> str:
    """An age in its two largest units, so it reads at a glance: ``42s``, ``5m 3s``, ``3h 12m``, ``9d 0h``.

    The one way both front ends and the core's reasons word how long ago something was
    (``format_duration`` is for limits a user typed, exactly: ``1d12h``).
    """
    if seconds is None:
        return "-"
    whole = int(max(0.0, float(seconds)))
    for big, size, small, unit in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if whole >= size:
            return f"{whole // size}{big} {whole % size // unit}{small}"
    return f"{whole}s"


def age_since(epoch_seconds: float | None, now: float | None = None) -> str:
    """``human_age`` of the time elapsed since ``epoch_seconds``."""
    if epoch_seconds is None:
        return "-"
    return human_age((now if now is not None else time.time()) - epoch_seconds)


def utc_text(epoch: float) -> str:
    """``2026-11-18T12:00:00Z``: how journal lines, lock holders, exports and logs stamp a time."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(seconds: float) -> str:
    """Compact and exact enough for reasons in plans (``10m``, ``1d12h``); parse_duration's inverse."""
    seconds = int(round(seconds))
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def is_duration(text: str) -> bool:
    """Whether ``text`` has the form of a duration (its size is parse_duration's to judge)."""
    value = str(text).strip().lower()
    return value == "0" or _DURATION.fullmatch(value) is not None


def parse_duration(text: str, flag: str = "duration") -> float:
    """Seconds in ``text`` (``90s``, ``30m``, ``12h``, ``7d``, ``1w``, ``1d12h``); a unit is required, so
    ``7`` is never silently 7 seconds or 7 days.

    Raises UsageError naming ``flag`` (exit 2) on anything else.
    """
    value = str(text).strip().lower()
    if value == "0":
        return 0.0
    if not is_duration(value):
        raise UsageError(
            f"{flag}: invalid duration {quote_input(text)} (use e.g. 90s, 30m, 12h, 7d, 1w or 1d12h)"
        )
    seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(value))
    if not math.isfinite(seconds) or seconds > MAX_DURATION_SECONDS:
        raise UsageError(f"{flag}: duration {quote_input(text)} is too large (at most 100 years)")
    return seconds


def quote_input(text: str, limit: int = 40) -> str:
    """A user's value quoted for an error line, shortened: a 5000-digit number stays readable."""
    text = str(text)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 entry`` / ``3 entries``: a count with its noun, so summaries read as sentences.

    ``many`` defaults to ``one`` + "s"; the one spelling of a plural in fvconsole.
    """
    return f"{count} {one if count == 1 else (one + 's' if many is None else many)}"


def clipped(text: str, width: int) -> str:
    """``text`` if it fits in ``width`` characters, else its start ending with ``…`` (never cut without a mark)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def head_tail(items: Sequence[_T], head: int = 8, tail: int = 4) -> tuple[list[_T], int, list[_T]]:
    """Split a long list into (head, number omitted, tail) for readable summaries."""
    if len(items) <= head + tail + 1:
        return list(items), 0, []
    return list(items[:head]), len(items) - head - tail, list(items[-tail:])


def elided(items: Sequence[_T], row: Callable[[_T], _R], more: Callable[[int], _R], head: int = 8,
           tail: int = 4) -> list[_R]:
    """``row`` of the first ``head`` and last ``tail`` items (:func:`head_tail`), ``more(n)`` between when n are left out."""
    first, omitted, last = head_tail(items, head, tail)
    return [*map(row, first), *([more(omitted)] if omitted else []), *map(row, last)]


__all__: Any = ["age_since", "clipped", "elided", "format_duration", "head_tail", "human_age", "human_bytes",
               "is_duration", "parse_duration", "quote_input", "utc_text"]
