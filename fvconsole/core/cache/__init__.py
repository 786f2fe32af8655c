"""Weight shard cache: scan, eviction plans, safe eviction (docs/formats.md §6).

Pure standard library: safetensors headers and manifests are parsed with ``json`` so
``fvconsole cache ls`` starts fast and never imports torch.
"""

from __future__ import annotations

from fvconsole.core.cache import flags
from fvconsole.core.cache.columns import CONSOLE, DROPPABLE, LISTING, EntryColumn, listing_cells, shards_text
from fvconsole.core.cache.detail import CacheEntryDetail, cache_entry_detail
from fvconsole.core.cache.durations import is_duration, parse_duration, quote_input
from fvconsole.core.cache.evict import (
    EvictedEntry,
    EvictionResult,
    StoppedEviction,
    execute_eviction,
    remove_tree,
)
from fvconsole.core.cache.freespace import (
    FreeSpacePlan,
    FreeTarget,
    free_space_walk,
    parse_min_free_gb,
    parse_min_free_percent,
)
from fvconsole.core.cache.gc_order import gc_sort_key, lru_walk
from fvconsole.core.cache.lock import probe_evictor
from fvconsole.core.cache.locked import LockedEviction, evict_under_lock
from fvconsole.core.cache.metrics import prometheus_text
from fvconsole.core.cache.model import CacheEntry, CacheScan
from fvconsole.core.cache.plan import (
    SYMLINK_NOTE,
    EvictionPlan,
    PlannedEviction,
    SkippedEntry,
    plan_eviction,
    protection_reason,
)
from fvconsole.core.cache.roots import (
    DEFAULT_MAX_GB,
    ENV_MAX_GB,
    ENV_ROOT,
    cap_bytes,
    default_max_gb,
    parse_max_gb,
    resolve_root,
)
from fvconsole.core.cache.scan import (
    DEFAULT_GRACE_SECONDS,
    KEY_RE,
    Leftover,
    ManifestSummary,
    compact_indices,
    scan_cache,
)
from fvconsole.core.cache.selectors import INVALID_SELECTS, RECLAIMABLE_SUM, EvictionSelectors
from fvconsole.core.cache.verify import (
    CacheVerification,
    EntryVerification,
    verify_cache,
    verify_entry,
)

__all__ = [
    "CONSOLE",
    "DROPPABLE",
    "EntryColumn",
    "LISTING",
    "listing_cells",
    "CacheEntry",
    "CacheEntryDetail",
    "CacheScan",
    "CacheVerification",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_MAX_GB",
    "ENV_MAX_GB",
    "ENV_ROOT",
    "EntryVerification",
    "EvictedEntry",
    "EvictionPlan",
    "EvictionResult",
    "EvictionSelectors",
    "FreeSpacePlan",
    "FreeTarget",
    "INVALID_SELECTS",
    "KEY_RE",
    "Leftover",
    "LockedEviction",
    "ManifestSummary",
    "PlannedEviction",
    "RECLAIMABLE_SUM",
    "SYMLINK_NOTE",
    "SkippedEntry",
    "StoppedEviction",
    "cache_entry_detail",
    "cap_bytes",
    "compact_indices",
    "default_max_gb",
    "evict_under_lock",
    "execute_eviction",
    "flags",
    "free_space_walk",
    "gc_sort_key",
    "is_duration",
    "lru_walk",
    "parse_duration",
    "parse_max_gb",
    "parse_min_free_gb",
    "parse_min_free_percent",
    "plan_eviction",
    "probe_evictor",
    "prometheus_text",
    "protection_reason",
    "quote_input",
    "remove_tree",
    "resolve_root",
    "scan_cache",
    "shards_text",
    "verify_cache",
    "verify_entry",
]
