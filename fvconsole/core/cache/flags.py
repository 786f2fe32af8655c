"""The eviction selectors' command-line flags, spelled once for the whole package.

``cache evict`` and ``fleet cache evict`` declare them (``cli/selectors.py``), a fleet node is
sent them (``EvictionSelectors.argv``), the parsers name them in their errors; a test proves no
other module spells one.
"""

from __future__ import annotations

MAX_GB = "--max-gb"
MIN_FREE_GB = "--min-free-gb"
MIN_FREE_PERCENT = "--min-free-percent"
BEST_EFFORT = "--best-effort"
KEY = "--key"
INVALID = "--invalid"
VERIFY = "--verify"
OLDER_THAN = "--older-than"
KEEP = "--keep"
