"""Weight shard cache: scan, eviction plans, safe eviction (docs/formats.md §6).

Pure standard library: safetensors headers and manifests are parsed with ``json`` so
``fvconsole cache ls`` starts fast and never imports torch.
"""

from __future__ import annotations

from fvconsole.core.cache.durations import parse_duration
from fvconsole.core.cache.evict import EvictedEntry, EvictionResult, execute_eviction, remove_tree
from fvconsole.core.cache.freespace import (
    FreeSpacePlan,
    FreeTarget,
    free_space_walk,
    parse_min_free_gb,
    parse_min_free_percent,
)
from fvconsole.core.cache.gc_order import gc_sort_key, lru_walk
from fvconsole.core.cache.plan import EvictionPlan, PlannedEviction, SkippedEntry, plan_eviction
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
    CacheEntry,
    CacheScan,
    Leftover,
    ManifestSummary,
    compact_indices,
    scan_cache,
)
from fvconsole.core.cache.selectors import EvictionSelectors
from fvconsole.core.humanize import format_duration

__all__ = [
    "DEFAULT_GRACE_SECONDS", "DEFAULT_MAX_GB", "ENV_MAX_GB", "ENV_ROOT", "KEY_RE",
    "CacheEntry", "CacheScan", "EvictedEntry", "EvictionPlan", "EvictionResult", "EvictionSelectors", "FreeSpacePlan", "FreeTarget",
    "Leftover",
    "ManifestSummary", "PlannedEviction", "SkippedEntry",
    "cap_bytes", "compact_indices", "default_max_gb", "execute_eviction", "format_duration", "free_space_walk",
    "gc_sort_key", "lru_walk", "parse_duration", "parse_max_gb", "parse_min_free_gb",
    "parse_min_free_percent", "plan_eviction", "remove_tree",
    "resolve_root", "scan_cache",
]
