"""Weight shard cache: scan, plan an eviction, evict under the root's lock (an operation of the one runner), verify (docs/formats.md §6).

The front ends' one door into the package: its verbs, its records and their presentation
(columns, Prometheus text); the selector values a command line or the console's dialog reads.
Pure standard library: safetensors headers and manifests are parsed with ``json`` so
``fvconsole cache ls`` starts fast and never imports torch.
"""

from __future__ import annotations

from fvconsole.core.cache.columns import CONSOLE, DROPPABLE, LISTING, listing_cells, shards_text
from fvconsole.core.cache.detail import CacheEntryDetail, cache_entry_detail
from fvconsole.core.cache.evict import EvictionResult, StoppedEviction, execute_eviction
from fvconsole.core.cache.export import LISTING_FORMATS, listing_csv
from fvconsole.core.cache.freespace import FreeSpacePlan
from fvconsole.core.cache.gc_order import LISTING_ORDERS, gc_sort_key, listing_order
from fvconsole.core.cache.locked import EvictionOperation, EvictionPreview, EvictionRequest, LockedEviction
from fvconsole.core.cache.metrics import prometheus_text
from fvconsole.core.cache.model import CacheEntry, CacheScan
from fvconsole.core.cache.plan import (
    SYMLINK_NOTE,
    EvictionPlan,
    PlannedEviction,
    plan_eviction,
    protection_reason,
)
from fvconsole.core.cache.roots import ENV_ROOT, probe_evictor, resolve_root
from fvconsole.core.cache.scan import DEFAULT_GRACE_SECONDS, scan_cache
from fvconsole.core.cache.selectors import (
    DEFAULT_MAX_GB,
    ENV_MAX_GB,
    FROM_ENV,
    INVALID_SELECTS,
    RECLAIMABLE_SUM,
    EvictionSelectors,
    FreeTarget,
    cap_bytes,
    default_max_gb,
    parse_keys,
    parse_max_gb,
    parse_min_free_gb,
    parse_min_free_percent,
)
from fvconsole.core.cache.verify import CacheVerification, EntryVerification, verify_cache, verify_entry

__all__ = [
    # verbs
    "scan_cache", "plan_eviction", "execute_eviction", "probe_evictor", "verify_cache", "verify_entry",
    "cache_entry_detail", "prometheus_text", "listing_csv", "gc_sort_key", "listing_order", "resolve_root", "protection_reason",
    # records
    "CacheScan", "CacheEntry", "CacheEntryDetail", "EvictionRequest", "EvictionPreview", "EvictionSelectors", "FreeTarget",
    "EvictionPlan", "PlannedEviction", "FreeSpacePlan", "EvictionResult", "EvictionOperation", "LockedEviction",
    "StoppedEviction",
    "CacheVerification", "EntryVerification",
    # presentation: the listing's columns
    "LISTING", "CONSOLE", "DROPPABLE", "listing_cells", "shards_text", "SYMLINK_NOTE", "INVALID_SELECTS",
    "RECLAIMABLE_SUM",
    # the listing's vocabularies (cache ls --sort, --format)
    "LISTING_ORDERS", "LISTING_FORMATS",
    # the selectors' values
    "FROM_ENV", "parse_keys", "parse_max_gb", "parse_min_free_gb", "parse_min_free_percent",
    "default_max_gb", "cap_bytes", "DEFAULT_MAX_GB", "ENV_MAX_GB", "ENV_ROOT", "DEFAULT_GRACE_SECONDS",
]
