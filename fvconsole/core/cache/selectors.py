"""What an eviction selects, as one value: read from its flags, validated, and written back as them.

The selectors combine as a union (``--max-gb``, ``--min-free-gb/--min-free-percent``,
``--key``, ``--invalid``, ``--older-than``); ``--keep`` takes entries out of it. Protections
that change the re-check but never what is selected (``--force``, ``--grace``) are not part
of it. ``cache evict``, ``fleet cache evict`` and the console build the same value
(:meth:`EvictionSelectors.parse` takes a command line's values as typed, by parameter, never by
an argparse name; the console's dialog parses its fields with the same parsers); a fleet node gets it back as its argv
(:meth:`EvictionSelectors.argv`), so what a node selects is exactly what the login node
validated. A bad value is a usage error naming its flag, before any disk access or lock.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from fvconsole.core.cache.scan import KEY_RE
from fvconsole.core.shared import flags
from fvconsole.core.shared.errors import FvError, UsageError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import parse_duration, quote_input
from fvconsole.core.shared.reasons import MIN_FREE_GB, MIN_FREE_PERCENT, min_free_words, reason

#: The statuses ``--invalid`` selects: entries FastVideo can never load from (an empty one is a
#: skipped write). An entry still being written (within ``--grace``) is skipped unless ``--force``.
RECLAIMABLE_STATUSES = ("invalid", "incomplete", "empty")
#: What ``--invalid`` (the console's ``i``) selects, in words: the one wording of both commands'
#: helps, the console's keys and docs/console.md's keys table.
INVALID_SELECTS = f"{', '.join(RECLAIMABLE_STATUSES[:-1])} and {RECLAIMABLE_STATUSES[-1]} entries"
#: The same statuses as the sum a fleet's RECLAIMABLE column is.
RECLAIMABLE_SUM = " + ".join(RECLAIMABLE_STATUSES)

ENV_MAX_GB = "FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB"
DEFAULT_MAX_GB = 300.0
GIB = 2**30
#: No filesystem holds 2^60 bytes (1 EiB); a larger cap is a typo (``1e308``), and beyond
#: float range ``N x 2^30`` is infinity, which no byte count can be compared or printed as.
MAX_CAP_BYTES = 2**60
MAX_GB = MAX_CAP_BYTES // GIB
#: ``--max-gb`` given without a value (argparse's ``const``): the cap of the environment.
FROM_ENV = "from-env"


# --------------------------------------------------------------------------- values


def _gb_problem(text: str) -> tuple[float | None, str]:
    """(GiB, "") for a usable cap, else (None, what is wrong with ``text``)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None, "is not a number of GiB"
    if not math.isfinite(value) or value < 0:
        return None, "must be a finite number >= 0"
    if value > MAX_GB:
        return None, f"is too large (at most {MAX_GB} GiB = 2^60 bytes)"
    return value + 0.0, ""  # + 0.0: -0 is 0


def parse_max_gb(text: str, flag: str = flags.MAX_GB) -> float:
    """A cap in GiB (fractional allowed); UsageError naming ``flag`` (the console: its field) otherwise."""
    value, problem = _gb_problem(text)
    if value is None:
        raise UsageError(f"{flag}: {quote_input(str(text))} {problem}")
    return value


def parse_min_free_gb(text: str, flag: str = flags.MIN_FREE_GB) -> float:
    """``--min-free-gb N``: GiB, fractional allowed, with the bounds of ``--max-gb``."""
    return parse_max_gb(text, flag)


def parse_min_free_percent(text: str, flag: str = flags.MIN_FREE_PERCENT) -> float:
    """``--min-free-percent P``: a number from 0 to 100 (percent of the filesystem's size)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"{flag}: {quote_input(str(text))} is not a number") from None
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise UsageError(f"{flag}: {quote_input(str(text))} must be a number from 0 to 100")
    return value + 0.0


def parse_keys(values: list[str] | tuple[str, ...], flag: str = flags.KEY) -> tuple[str, ...]:
    """Cache keys given with ``flag``, each checked and each once (a usage error otherwise)."""
    for value in values:
        if not KEY_RE.fullmatch(value):
            raise UsageError(f"{flag}: {value!r} is not a cache key (16 lowercase hex characters)")
    return tuple(dict.fromkeys(values))


def default_max_gb(env: Mapping[str, str] | None = None) -> float:
    """FastVideo's cap in GiB: $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB, default 300.

    FvError (exit 1) naming the variable when it is not a sane cap.
    """
    env = os.environ if env is None else env
    raw = env.get(ENV_MAX_GB)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_GB
    value, problem = _gb_problem(raw)
    if value is None:
        raise FvError(f"environment {ENV_MAX_GB}: {quote_input(raw)} {problem}")
    return value


def cap_bytes(max_gb: float) -> float:
    """The cap exactly as FastVideo computes it: ``float(N) * 2**30``."""
    return float(max_gb) * GIB


# --------------------------------------------------------------------------- free-space target


@dataclass(frozen=True)
class FreeTarget:
    """What must be free on the root's filesystem; with both bounds, the larger one applies."""

    min_free_gb: float | None = None
    min_free_percent: float | None = None
    #: ``--best-effort``: when the target cannot be reached, evict what may go toward it anyway
    #: (without it an unreachable target evicts nothing for itself: see :mod:`.freespace`).
    best_effort: bool = False

    def __post_init__(self) -> None:
        if self.min_free_gb is None and self.min_free_percent is None:
            raise ValueError("a free-space target needs min_free_gb or min_free_percent")

    def bytes_needed(self, fs_total: int) -> int:
        """The target in bytes on a filesystem of ``fs_total`` bytes (rounded up)."""
        wanted = []
        if self.min_free_gb is not None:
            wanted.append(math.ceil(self.min_free_gb * GIB))
        if self.min_free_percent is not None:
            wanted.append(math.ceil(fs_total * self.min_free_percent / 100))
        return max(wanted)

    def values(self) -> dict[str, str]:
        """The target's bounds as a reason's values (each front end words them: :func:`min_free_words`)."""
        named = {MIN_FREE_GB: self.min_free_gb, MIN_FREE_PERCENT: self.min_free_percent}
        return {name: f"{value:g}" for name, value in named.items() if value is not None}

    def describe(self) -> str:
        """``--min-free-percent 30`` / ``--min-free-gb 8``: the command line's words for the target."""
        return min_free_words(self.values(), flags=True)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


# --------------------------------------------------------------------------- the selectors


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

    @classmethod
    def parse(cls, *, max_gb: str | None = None, min_free_gb: str | None = None, min_free_percent: str | None = None,
              best_effort: bool = False, keys: Sequence[str] = (), invalid: bool = False, verify: bool = False, older_than: str | None = None,
              keep: Sequence[str] = (), fleet: bool = False) -> EvictionSelectors:
        """The validated selectors from their text as typed (a command line's values, a dialog's fields);
        a usage error naming the flag for a bad value or when nothing is selected.

        ``max_gb`` :data:`FROM_ENV` (``--max-gb`` without a value) is $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB
        here, or (``fleet``) each node's own, resolved on the node.
        """
        cap, from_env = None, False
        if max_gb == FROM_ENV:
            cap, from_env = (None, True) if fleet else (default_max_gb(), False)
        elif max_gb is not None:
            cap = parse_max_gb(max_gb)
        picked, kept = parse_keys(tuple(keys), flags.KEY), parse_keys(tuple(keep), flags.KEEP)
        gib = parse_min_free_gb(min_free_gb) if min_free_gb is not None else None
        pct = parse_min_free_percent(min_free_percent) if min_free_percent is not None else None
        free_target = FreeTarget(gib, pct) if gib is not None or pct is not None else None
        if best_effort:
            if free_target is None:
                raise UsageError(f"{flags.BEST_EFFORT}: only with {flags.MIN_FREE_GB} or {flags.MIN_FREE_PERCENT} "
                                 "(it says what to do when that target cannot be reached)")
            free_target = replace(free_target, best_effort=True)
        older = parse_duration(older_than, flags.OLDER_THAN) if older_than is not None else None
        return cls(max_gb=cap, max_gb_from_env=from_env, keys=picked, invalid=invalid, verify=verify,
                   older_than=older, free_target=free_target, keep=kept).require()

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
            out += [flags.MAX_GB, exact_number(self.max_gb)]
        if self.free_target is not None:
            if self.free_target.min_free_gb is not None:
                out += [flags.MIN_FREE_GB, exact_number(self.free_target.min_free_gb)]
            if self.free_target.min_free_percent is not None:
                out += [flags.MIN_FREE_PERCENT, exact_number(self.free_target.min_free_percent)]
            if self.free_target.best_effort:
                out.append(flags.BEST_EFFORT)
        for key in self.keys:
            out += [flags.KEY, key]
        if self.invalid:
            out.append(flags.INVALID)
        if self.verify:
            out.append(flags.VERIFY)
        if self.older_than is not None:
            out += [flags.OLDER_THAN, exact_number(self.older_than) + "s"]
        for key in self.keep:
            out += [flags.KEEP, key]
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, rename={"older_than": "older_than_seconds"})


def exact_number(value: float) -> str:
    """Fixed-point text that parses back to the same float (``0.00001``, never ``1e-05``; ``200``, not ``200.0``)."""
    text = format(Decimal(repr(float(value))), "f")
    return text[:-2] if text.endswith(".0") else text
