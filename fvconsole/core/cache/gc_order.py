"""FastVideo's GC order, written once: what ``cache ls``, ``--max-gb``, the fleet view and the console sort by.

FastVideo's ``_gc_cache_root`` deletes entries by manifest mtime (0.0 without a manifest),
ties by size then path, until the root's total is at most the cap; it passes over the key it
just wrote. :func:`gc_sort_key` is that order and :func:`lru_walk` that loop, over anything
with an entry's ``key``, ``path``, ``bytes`` and ``last_used`` (a scanned :class:`CacheEntry`,
also one a fleet node sent, read back by ``CacheEntry.from_json``). :data:`LISTING_ORDERS` are the
orders ``cache ls --sort`` offers, and :func:`listing_order` applies one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar


class Sized(Protocol):
    """What the GC order reads of an entry."""

    @property
    def key(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    @property
    def last_used(self) -> float | None: ...


T = TypeVar("T", bound=Sized)

#: ``cache ls --sort``: FastVideo's GC order (next victim first), largest first, by key.
LISTING_ORDERS = ("lru", "size", "key")


def gc_sort_key(entry: Sized) -> tuple[float, int, str]:
    """FastVideo ``_gc_cache_root`` order: manifest mtime (0.0 without a manifest), size, path."""
    return (entry.last_used if entry.last_used is not None else 0.0, entry.bytes, entry.path)


def lru_walk(entries: Sequence[T], cap: float, skip: Iterable[str] = ()) -> tuple[list[T], list[T]]:
    """(victims, passed over): FastVideo's GC loop, recording what it had to skip.

    Mirrors the upstream loop: walk the gc order, stop once total <= cap, pass over the
    skipped keys (upstream: the key it just wrote) without counting them as freed.
    """
    skip = set(skip)
    total = sum(e.bytes for e in entries)
    victims: list[T] = []
    passed: list[T] = []
    for entry in sorted(entries, key=gc_sort_key):
        if total <= cap:
            break
        if entry.key in skip:
            passed.append(entry)
            continue
        victims.append(entry)
        total -= entry.bytes
    return victims, passed


def listing_order(entries: Iterable[T], order: str) -> list[T]:
    """``entries`` in one of :data:`LISTING_ORDERS` (size: largest first, ties by key)."""
    if order == "size":
        return sorted(entries, key=lambda e: (-e.bytes, e.key))
    if order == "key":
        return sorted(entries, key=lambda e: e.key)
    return sorted(entries, key=gc_sort_key)
