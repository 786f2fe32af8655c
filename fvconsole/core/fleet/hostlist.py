"""Slurm hostlist expressions in pure Python: ``n[1-3,5]`` <-> ``n1,n2,n3,n5``.

Pure Python rather than ``scontrol show hostnames`` so node selection works (and is
testable) on machines without Slurm, and costs no process per call. Supported syntax is
what Slurm accepts in ``--nodelist``: comma-separated items, each a name with any number
of bracket groups (``rack[1-2]-n[01-04]``, expanded as a cartesian product, leftmost
group slowest), ranges keeping the zero padding of their lower bound.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

from fvconsole.core.shared.errors import FvError

#: Refuse expressions that would expand to more names than any GPU cluster has.
MAX_HOSTS = 100_000
#: Digits in one range bound: node numbers fit a machine integer (a 5000-digit bound is a typo
#: or an attack, and int() of it raises beyond Python's 4300-digit limit).
MAX_DIGITS = 18
#: Longest node name (Linux host names are at most 64 bytes; Slurm's are shorter still).
MAX_NAME = 255
#: Longest expression accepted (100,000 names written out one by one fit in well under 1 MiB).
MAX_TEXT = 1 << 20
_TRAILING_DIGITS = re.compile(r"^(.*?)([0-9]+)$")
_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")


def _shown(text: str) -> str:
    """The expression as quoted in an error line: repr, cut short (one readable line)."""
    return repr(text) if len(text) <= 80 else repr(text[:77]) + "..."


def _split_top_level(text: str, field: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise FvError(f"{field}: nested '[' in hostlist {_shown(text)}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise FvError(f"{field}: unbalanced ']' in hostlist {_shown(text)}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise FvError(f"{field}: unbalanced '[' in hostlist {_shown(text)}")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _range_values(group: str, field: str, text: str) -> list[str]:
    """``1-3,07`` -> ['1', '2', '3', '07'] (padding from each range's lower bound)."""
    values: list[str] = []
    for part in group.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise FvError(f"{field}: bad range {_shown(part)} in hostlist {_shown(text)}")
        lo_text, hi_text = match.group(1), match.group(2)
        if max(len(lo_text), len(hi_text or "")) > MAX_DIGITS:
            raise FvError(f"{field}: range {_shown(part.strip())} has a bound of more than {MAX_DIGITS} digits "
                          f"in hostlist {_shown(text)}")
        lo, hi = int(lo_text), int(hi_text if hi_text is not None else lo_text)
        if hi < lo:
            raise FvError(f"{field}: range {_shown(part)} runs backwards in hostlist {_shown(text)}")
        if len(values) + hi - lo + 1 > MAX_HOSTS:
            raise FvError(f"{field}: hostlist {_shown(text)} expands to more than {MAX_HOSTS} names")
        width = len(lo_text)
        values.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
    return values


def _expand_item(item: str, field: str, text: str) -> Iterator[str]:
    """Expand one comma-free item such as ``rack[1-2]-n[1-2]``."""
    pieces: list[list[str]] = []
    for literal, group in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", item):
        if literal:
            pieces.append([literal])
        if group:
            pieces.append(_range_values(group, field, text))
    if "[]" in item:
        raise FvError(f"{field}: empty brackets in hostlist {_shown(text)}")
    total = 1
    for options in pieces:
        total *= len(options)
    if total > MAX_HOSTS:
        raise FvError(f"{field}: hostlist {_shown(text)} expands to more than {MAX_HOSTS} names")
    for parts in itertools.product(*pieces):  # iterative: any number of bracket groups
        yield "".join(parts)


def expand_hostlist(text: str, field: str = "hostlist") -> tuple[str, ...]:
    """All names of a hostlist expression, in order, duplicates dropped.

    ``field`` names the option in error messages (e.g. ``--nodes``).
    """
    if len(text) > MAX_TEXT:
        raise FvError(f"{field}: hostlist is {len(text)} characters long (at most {MAX_TEXT})")
    names: dict[str, None] = {}
    for item in _split_top_level(text.strip(), field):
        for name in _expand_item(item, field, text):
            if len(name) > MAX_NAME:
                raise FvError(f"{field}: node name {_shown(name)} is longer than {MAX_NAME} characters")
            if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
                raise FvError(f"{field}: invalid node name {_shown(name)} in hostlist {_shown(text)}")
            names[name] = None
            if len(names) > MAX_HOSTS:
                raise FvError(f"{field}: hostlist {_shown(text)} expands to more than {MAX_HOSTS} names")
    return tuple(names)


def _runs(numbers: list[tuple[int, str]]) -> list[str]:
    """Consecutive numbers -> ``lo-hi`` ranges, keeping each range's zero padding exact."""
    out: list[str] = []
    start_num, start_text, prev = numbers[0][0], numbers[0][1], numbers[0][0]
    width = len(start_text)
    for num, digits in numbers[1:]:
        if num == prev + 1 and f"{num:0{width}d}" == digits:
            prev = num
            continue
        out.append(start_text if prev == start_num else f"{start_text}-{prev:0{width}d}")
        start_num, start_text, prev, width = num, digits, num, len(digits)
    out.append(start_text if prev == start_num else f"{start_text}-{prev:0{width}d}")
    return out


def compress_hostlist(names: Iterable[str]) -> str:
    """The shortest usual form: ``n1,n2,n3,n5,gpu01`` -> ``gpu01,n[1-3,5]`` (sorted, deduplicated)."""
    groups: dict[str, set[tuple[int, str]]] = {}
    plain: set[str] = set()
    for name in names:
        match = _TRAILING_DIGITS.match(name)
        if match and len(match.group(2)) <= MAX_DIGITS:
            groups.setdefault(match.group(1), set()).add((int(match.group(2)), match.group(2)))
        else:
            plain.add(name)
    parts: list[tuple[str, str]] = [(name, name) for name in plain]
    for prefix, numbers in groups.items():
        ordered = sorted(numbers, key=lambda item: (item[0], len(item[1])))
        ranges = _runs(ordered)
        if len(ordered) == 1:
            parts.append((prefix, prefix + ordered[0][1]))
        else:
            parts.append((prefix, f"{prefix}[{','.join(ranges)}]"))
    return ",".join(text for _, text in sorted(parts))
