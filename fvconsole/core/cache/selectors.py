"""What an eviction selects, as one value: ``cache evict``, ``fleet cache evict`` and the console build it.

The selectors combine as a union (``--max-gb``, ``--min-free-gb/--min-free-percent``,
``--key``, ``--invalid``, ``--older-than``); ``--keep`` takes entries out of it. Protections
that change the re-check but never what is selected (``--force``, ``--grace``) are not part
of it. A fleet node gets the same value as its argv (:meth:`EvictionSelectors.argv`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from fvconsole.core.cache import flags
from fvconsole.core.cache.freespace import FreeTarget
from fvconsole.core.shared.errors import UsageError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.reasons import reason

#: The statuses ``--invalid`` selects: entries FastVideo can never load from (an empty one is a
#: skipped write). An entry still being written (within ``--grace``) is skipped unless ``--force``.
RECLAIMABLE_STATUSES = ("invalid", "incomplete", "empty")
#: What ``--invalid`` (the console's ``i``) selects, in words: the one wording of both commands'
#: helps, the console's keys and docs/console.md's keys table.
INVALID_SELECTS = f"{', '.join(RECLAIMABLE_STATUSES[:-1])} and {RECLAIMABLE_STATUSES[-1]} entries"
#: The same statuses as the sum a fleet's RECLAIMABLE column is.
RECLAIMABLE_SUM = " + ".join(RECLAIMABLE_STATUSES)


@dataclass(frozen=True)
class EvictionSelectors:
    """The selectors of one eviction, validated (values in GiB, seconds, cache keys)."""

    #: ``--max-gb N``: FastVideo's GC order until the total is at most N GiB.
    max_gb: float | None = None
    #: ``--max-gb`` without a value where it cannot be resolved here (a fleet: each node's
    #: $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB); the planner resolves it where it runs.
    max_gb_from_env: bool = False
    keys: tuple[str, ...] = ()
    invalid: bool = False
    #: ``--invalid --verify``: also the usable-looking entries whose shards fail ``cache verify``
    #: (the planner verifies them on the scan it plans from).
    verify: bool = False
    #: ``--older-than D`` in seconds.
    older_than: float | None = None
    free_target: FreeTarget | None = None
    keep: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing is selected (``--keep`` alone selects nothing)."""
        return (self.max_gb is None and not self.max_gb_from_env and not self.keys and not self.invalid
                and self.older_than is None and self.free_target is None)

    @property
    def sized(self) -> bool:
        """A size policy is selected (``--max-gb`` or a free-space target): symlinks are noted as outside it."""
        return self.max_gb is not None or self.max_gb_from_env or self.free_target is not None

    def require(self) -> EvictionSelectors:
        """Itself, or the usage error every front end gives when nothing is selected."""
        if self.empty:
            raise UsageError.of(reason("evict.nothing_selected", "selection"))
        if self.verify and not self.invalid:
            raise UsageError(f"{flags.VERIFY}: only with {flags.INVALID} (it adds the entries that fail verification)")
        return self

    def argv(self) -> tuple[str, ...]:
        """The ``cache evict`` arguments that select exactly this on a node (numbers round-trip exactly)."""
        out: list[str] = []
        if self.max_gb_from_env and self.max_gb is None:
            out.append(flags.MAX_GB)
        elif self.max_gb is not None:
            out += [flags.MAX_GB, _number(self.max_gb)]
        if self.free_target is not None:
            if self.free_target.min_free_gb is not None:
                out += [flags.MIN_FREE_GB, _number(self.free_target.min_free_gb)]
            if self.free_target.min_free_percent is not None:
                out += [flags.MIN_FREE_PERCENT, _number(self.free_target.min_free_percent)]
        for key in self.keys:
            out += [flags.KEY, key]
        if self.invalid:
            out.append(flags.INVALID)
        if self.verify:
            out.append(flags.VERIFY)
        if self.older_than is not None:
            out += [flags.OLDER_THAN, _number(self.older_than) + "s"]
        for key in self.keep:
            out += [flags.KEEP, key]
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, rename={"older_than": "older_than_seconds"})


def _number(value: float) -> str:
    """Fixed-point text that parses back to the same float (``0.00001``, never ``1e-05``; ``200``, not ``200.0``)."""
    text = format(Decimal(repr(float(value))), "f")
    return text[:-2] if text.endswith(".0") else text
