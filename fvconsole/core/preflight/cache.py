"""The *cache* check: per node, whether the weight shard cache is warm for the next job, and has room.

Only with ``--cache-root`` (this node: ``core/cache: scan_cache``), or ``--nodes``/``--job`` with it
(every node through the fleet's one job step, ``core/fleet/ops.py: fleet_ls``). Warm: a complete
entry (a node-local cache on several nodes holds only its shards: partial then counts) with the
next job's shard count; cold: none, and the job loads weights in full. FastVideo skips its shard
write when the filesystem has less than the entry's size + 5 GiB free. Warnings only: a cold
cache never blocks a resume.
"""

from __future__ import annotations

from collections.abc import Sequence

from fvconsole.core.cache.model import CacheEntry
from fvconsole.core.cache.scan import scan_cache
from fvconsole.core.fleet.ops import fleet_ls
from fvconsole.core.fleet.selection import select_nodes
from fvconsole.core.preflight.model import Check
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import human_bytes

#: FastVideo's margin: it writes a shard only with its size + 5 GiB free.
WRITE_MARGIN = 5 * 2**30


def judge_node(node: str, shards: int, fs_free: int | None, entries: Sequence[CacheEntry],
               multi_node: bool) -> Check:
    """One node's line: warm or cold for ``shards`` shards, and room for the shard write."""
    usable = ("complete", "partial") if multi_node else ("complete",)
    warm = [e for e in entries if e.num_shards == shards and e.status in usable]
    if warm:
        newest = max(warm, key=lambda e: e.last_used or 0)
        return Check("cache", "ok", f"{node}: warm ({newest.key}, {shards} shards, {human_bytes(newest.bytes)})")
    sized = [e.bytes for e in entries if e.status == "complete" and e.num_shards]
    need = max(sized, default=0) + WRITE_MARGIN
    if fs_free is not None and fs_free < need:
        return Check("cache", "warn", f"{node}: cold (no complete entry of {shards} shards) and "
                     f"{human_bytes(fs_free)} free, under the {human_bytes(need)} FastVideo needs to write one: "
                     "every start loads the weights in full")
    return Check("cache", "warn", f"{node}: cold (no complete entry of {shards} shards): the first start loads the "
                 "weights in full and writes the cache")


def check_cache(root: str, shards: int, nodes: str | None, job: str | None) -> list[Check]:
    """The cache check on this node, or on every node of ``nodes``/``job`` (one fleet step)."""
    try:
        if nodes is None and job is None:
            scan = scan_cache(root)
            return [judge_node(scan.hostname, shards, scan.fs_free, scan.entries, False)]
        view = fleet_ls(select_nodes(nodes, job), root)
    except FvError as exc:
        return [Check("cache", "warn", f"{root}: not checked ({exc})")]
    checks = []
    for outcome in view.outcomes:
        if not outcome.ok:
            checks.append(Check("cache", "warn", f"{outcome.node}: not checked ({outcome.error})"))
            continue
        listing = outcome.listing
        checks.append(judge_node(outcome.node, shards, listing.fs_free, listing.entries, len(view.outcomes) > 1))
    return checks
