"""Human durations (``90s``, ``30m``, ``12h``, ``7d``, ``1w``, ``1d12h``) for cache selectors."""

from __future__ import annotations

import math
import re

from fvconsole.core.shared.errors import UsageError

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
#: Longer than any cache has existed; beyond it a duration is a typo (``99999999999w``), and
#: its day count would be hundreds of digits long in every plan reason.
MAX_SECONDS = 100 * 365.25 * 86400.0


def is_duration(text: str) -> bool:
    """Whether ``text`` has the form of a duration (its size is parse_duration's to judge)."""
    value = str(text).strip().lower()
    return value == "0" or _WHOLE.fullmatch(value) is not None


def parse_duration(text: str, flag: str = "duration") -> float:
    """Seconds in ``text``; a unit is required so ``7`` is never silently 7 seconds or 7 days.

    Raises UsageError naming ``flag`` (exit 2) on anything else.
    """
    value = str(text).strip().lower()
    if value == "0":
        return 0.0
    if not is_duration(value):
        raise UsageError(
            f"{flag}: invalid duration {quote_input(text)} (use e.g. 90s, 30m, 12h, 7d, 1w or 1d12h)"
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(value))
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        raise UsageError(f"{flag}: duration {quote_input(text)} is too large (at most 100 years)")
    return seconds


def quote_input(text: str, limit: int = 40) -> str:
    """A user's value quoted for an error line, shortened: a 5000-digit number stays readable."""
    text = str(text)
    return repr(text if len(text) <= limit else text[:limit] + "...")

