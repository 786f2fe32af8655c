"""The eviction selector options, declared once for ``cache evict`` and ``fleet cache evict``.

:func:`add_selector_args` adds them to a parser (the fleet's help says "per node");
:func:`selectors_from` turns their values into the core's typed ``EvictionSelectors`` (the core
reads no argparse name), so a bad value is a usage error before any disk access, lock or srun,
on the login node too.
"""

from __future__ import annotations

import argparse

from fvconsole.core.cache import ENV_MAX_GB, FROM_ENV, INVALID_SELECTS, EvictionSelectors
from fvconsole.core.shared import flags as f

#: (flag, argparse options, help for `cache evict`, help for `fleet cache evict`).
_OPTIONS: tuple[tuple[str, dict, str, str], ...] = (
    (f.MAX_GB, {"nargs": "?", "const": FROM_ENV, "metavar": "N"},
     f"evict LRU until total <= N GiB (fractional ok; no value: ${ENV_MAX_GB} or 300)",
     f"per node: evict LRU until its total <= N GiB (no value: the node's ${ENV_MAX_GB})"),
    (f.MIN_FREE_GB, {"metavar": "N"},
     "evict LRU until the root's filesystem would have N GiB free",
     "per node: evict LRU until its root's filesystem has N GiB free"),
    (f.MIN_FREE_PERCENT, {"metavar": "P"},
     "evict LRU until the root's filesystem would have P%% of its size free",
     "per node: evict LRU until its root's filesystem has P%% of its size free"),
    (f.BEST_EFFORT, {"action": "store_true"},
     "with a free-space target that cannot be reached: evict what may go toward it anyway "
     "(without it such a target evicts nothing for itself, sparing the warm entries)",
     "per node: with a free-space target that node cannot reach, evict what may go toward it anyway"),
    (f.KEY, {},
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
        if flag == f.KEY:  # one declaration of --key, with `cache verify`'s
            add_key_option(parser, fleet_help if fleet else local_help)
            continue
        parser.add_argument(flag, help=fleet_help if fleet else local_help, **options)


def add_key_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--key KEY`` (repeatable): the entries an eviction selects or a verification checks."""
    parser.add_argument(f.KEY, action="append", default=[], metavar="KEY", help=help_text)


def selectors_from(args: argparse.Namespace, *, fleet: bool = False) -> EvictionSelectors:
    """The command line's selectors as the core's typed value (``fleet``: a value-less ``--max-gb`` is
    each node's own cap); a usage error for a bad value or when nothing is selected."""
    return EvictionSelectors.parse(max_gb=args.max_gb, min_free_gb=args.min_free_gb,
                                   min_free_percent=args.min_free_percent, best_effort=args.best_effort, keys=args.key, invalid=args.invalid,
                                   verify=args.verify, older_than=args.older_than, keep=args.keep, fleet=fleet)
