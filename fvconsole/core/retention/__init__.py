"""Checkpoint retention: what of a training output dir may be pruned, and pruning it safely.

- :mod:`.scan`: the output dir's checkpoints with the facts the rules judge (complete or
  interrupted, bytes, files, age, in use, mounts, symlinks, the published sidecar sets).
- :mod:`.plan`: ``plan_prune(scan, rules)``, the one judgement the dry run and ``--yes`` share.
- :mod:`.execute`: leftovers first, then rename out of the ``checkpoint-<step>`` pattern,
  re-check, remove through the removal door; :mod:`.locked`: the prune as an operation of the
  one runner (the output dir's lock, the plan under it, a journal line of :mod:`.record`).
- :mod:`.fastvideo`: what FastVideo's own cleanup and its ``latest`` resume will do.

The top floor of the core: imports the shared layer, the formats, the journal, checkpoints
and migration (for the published sets and the output dir's lock).
"""

from __future__ import annotations

from fvconsole.core.retention.execute import PrunedCheckpoint, PruneResult, execute_prune
from fvconsole.core.retention.fastvideo import FastVideoOutlook, fastvideo_outlook
from fvconsole.core.retention.locked import LockedPrune, PruneOperation, probe_prune_lock
from fvconsole.core.retention.plan import DEFAULT_GRACE, KeptCheckpoint, PrunePlan, PruneRules, plan_prune
from fvconsole.core.retention.scan import OutputScan, scan_output_dir

__all__ = [
    "DEFAULT_GRACE",
    "FastVideoOutlook",
    "KeptCheckpoint",
    "LockedPrune",
    "OutputScan",
    "PruneOperation",
    "PruneResult",
    "PruneRules",
    "PrunePlan",
    "PrunedCheckpoint",
    "execute_prune",
    "fastvideo_outlook",
    "plan_prune",
    "probe_prune_lock",
    "scan_output_dir",
]
