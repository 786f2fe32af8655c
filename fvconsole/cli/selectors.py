"""The eviction selector options, declared once for ``cache evict`` and ``fleet cache evict``.

:func:`add_selector_args` adds them to a parser (the fleet's help says "per node");
:func:`selectors_from_args` validates them into the core's :class:`EvictionSelectors`, so a bad
value is a usage error before any disk access, lock or srun, on the login node too.
"""

from __future__ import annotations

import argparse

from fvconsole.core.cache import (
    ENV_MAX_GB,
    INVALID_SELECTS,
    KEY_RE,
    EvictionSelectors,
    FreeTarget,
    default_max_gb,
    parse_duration,
    parse_max_gb,
    parse_min_free_gb,
    parse_min_free_percent,
)
from fvconsole.core.cache import flags as f
from fvconsole.core.shared import UsageError

#: ``--max-gb`` given without a value.
_FROM_ENV = "from-env"

#: (flag, argparse options, help for `cache evict`, help for `fleet cache evict`).
_OPTIONS: tuple[tuple[str, dict, str, str], ...] = (
    (f.MAX_GB, {"nargs": "?", "const": _FROM_ENV, "metavar": "N"},
     f"evict LRU until total <= N GiB (fractional ok; no value: ${ENV_MAX_GB} or 300)",
     f"per node: evict LRU until its total <= N GiB (no value: the node's ${ENV_MAX_GB})"),
    (f.MIN_FREE_GB, {"metavar": "N"},
     "evict LRU until the root's filesystem would have N GiB free",
     "per node: evict LRU until its root's filesystem has N GiB free"),
    (f.MIN_FREE_PERCENT, {"metavar": "P"},
     "evict LRU until the root's filesystem would have P%% of its size free",
     "per node: evict LRU until its root's filesystem has P%% of its size free"),
    (f.KEY, {"action": "append", "default": [], "metavar": "KEY"},
     "evict this entry (repeatable)", "evict this entry on every node (repeatable)"),
    (f.INVALID, {"action": "store_true"},
     f"evict {INVALID_SELECTS}", f"evict {INVALID_SELECTS} on every node"),
    (f.VERIFY, {"action": "store_true"},
     "with --invalid: also entries whose shards fail `cache verify` (headers against the manifest)",
     "with --invalid: also entries whose shards fail `cache verify` on their node"),
    (f.OLDER_THAN, {"metavar": "D"},
     "evict entries last used more than D ago", "evict entries last used more than D ago (12h, 7d)"),
    (f.KEEP, {"action": "append", "default": [], "metavar": "KEY"},
     "never evict this entry", "never evict this entry"),
)


def add_selector_args(parser: argparse.ArgumentParser, *, fleet: bool = False) -> None:
    """Every selector option (and ``--keep``), worded for one node or (``fleet``) for each node."""
    for flag, options, local_help, fleet_help in _OPTIONS:
        parser.add_argument(flag, help=fleet_help if fleet else local_help, **options)


def selectors_from_args(args: argparse.Namespace, *, fleet: bool = False) -> EvictionSelectors:
    """The validated selectors; a usage error for a bad value or when nothing is selected.

    ``--max-gb`` without a value is $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB here, or (``fleet``)
    each node's own, resolved on the node.
    """
    older_than = parse_duration(args.older_than, f.OLDER_THAN) if args.older_than is not None else None
    max_gb, from_env = None, False
    if args.max_gb == _FROM_ENV:
        max_gb, from_env = (None, True) if fleet else (default_max_gb(), False)
    elif args.max_gb is not None:
        max_gb = parse_max_gb(args.max_gb)
    keys, keep = parse_keys(args.key, f.KEY), parse_keys(args.keep, f.KEEP)
    free_gb = parse_min_free_gb(args.min_free_gb) if args.min_free_gb is not None else None
    free_pct = parse_min_free_percent(args.min_free_percent) if args.min_free_percent is not None else None
    free_target = FreeTarget(free_gb, free_pct) if free_gb is not None or free_pct is not None else None
    return EvictionSelectors(max_gb=max_gb, max_gb_from_env=from_env, keys=keys, invalid=args.invalid,
                             verify=args.verify, older_than=older_than, free_target=free_target, keep=keep).require()


def add_key_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--key KEY`` (repeatable) for another command that works on chosen entries (``cache verify``)."""
    parser.add_argument(f.KEY, action="append", default=[], metavar="KEY", help=help_text)


def parse_keys(values: list[str], flag: str = f.KEY) -> tuple[str, ...]:
    """Cache keys given with ``flag``, each checked and each once (a usage error otherwise)."""
    for value in values:
        if not KEY_RE.fullmatch(value):
            raise UsageError(f"{flag}: {value!r} is not a cache key (16 lowercase hex characters)")
    return tuple(dict.fromkeys(values))
