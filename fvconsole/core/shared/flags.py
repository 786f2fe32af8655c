"""The command line's flags, spelled once: every flag the core names or more than one command declares.

The CLI declares each with these constants (``cli/options.py``, ``cli/selectors.py``, ``cli/migrate.py``,
``cli/prune.py``); the core names them in its usage errors and writes them into the command
lines it builds for a fleet's nodes (``core/fleet/node_commands.py``) and for an operator to run
(preflight's fixes, ``core/preflight/fixes.py``). Tests prove that no
other module spells a selector (``tests/cache/test_eviction_selectors.py``) and that no flag
is declared twice for one meaning (``tests/cli/test_cli_flags.py``). A spelling may stand for
two meanings in two commands (``--older-than`` is a cache entry's last use in ``cache evict``
and a checkpoint's newest file in ``checkpoints prune``): one constant, two declarations.
"""

from __future__ import annotations

# The eviction selectors (``cache evict``, ``fleet cache evict``; a fleet node is sent them).
MAX_GB = "--max-gb"
MIN_FREE_GB = "--min-free-gb"
MIN_FREE_PERCENT = "--min-free-percent"
BEST_EFFORT = "--best-effort"
KEY = "--key"
INVALID = "--invalid"
VERIFY = "--verify"
OLDER_THAN = "--older-than"
KEEP = "--keep"

# What changes a re-check, never what is selected (a fleet node is sent them too).
GRACE = "--grace"
FORCE = "--force"
WAIT = "--wait"

# Execution and output, for every command that has them.
YES = "--yes"
YES_SHORT = "-y"
DRY_RUN = "--dry-run"
JSON = "--json"
NO_JOURNAL = "--no-journal"
DEEP = "--deep"

# ``checkpoints prune``: checkpoints by step.
STEP = "--step"

# The fixes preflight writes as command lines (``migrate``, ``checkpoints prune``, ``sidecars verify``)
# and the inputs only a ``preflight`` command line gives (its notes say where they came from).
CONFIG = "--config"
SET = "--set"
CHECKPOINT = "--checkpoint"
OUTPUT_DIR = "--output-dir"
RESHARD = "--reshard"
INCOMPLETE = "--incomplete"
SIDECAR_DIR = "--sidecar-dir"
WORLD_SIZE = "--world-size"
DATALOADER_STATE_DIR = "--dataloader-state-dir"
