"""A cache scan as Prometheus metrics (text exposition format 0.0.4), for node-exporter's textfile collector.

Why: monitoring should alert on a node whose tmpfs cache eats its memory without parsing
``cache ls`` text. ``cache ls --format prometheus --output /var/lib/node_exporter/fv.prom``
(from cron, or with ``--watch``) leaves a file the textfile collector picks up; it is replaced
atomically, so the collector never reads half of it. Every series carries the root as a
``root`` label (one node may have several roots); the collector adds the host. Standard
library only: the tool itself never needs ``prometheus_client``.

What is exported per entry (``--per-entry``) is the listing's column table's
(``core/cache/columns.py``): each column's ``metric`` is one family, one sample per entry,
labelled by the columns that declare a ``label`` (key, status), so a column added with a metric
is exported with no change here. The families written out below stay here because they are
not columns: each is a fact of the whole scan, not a cell of one entry (entries and bytes
counted and summed by status, every status with zeros included; and one value per root:
entries being written, leftovers, FastVideo's cap, the filesystem, the oldest last use, scan
errors, the scan's time).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fvconsole.core.cache.columns import METRICS, metric_labels
from fvconsole.core.cache.entry import STATUSES
from fvconsole.core.cache.model import CacheScan

PREFIX = "fvconsole_cache"


def escape_label(value: str) -> str:
    """A label value per the text format: ``\\``, ``"`` and newline escaped; always valid UTF-8.

    A file name that is not UTF-8 (surrogate escapes) keeps its bytes visible as ``\\xNN``.
    """
    text = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items()) + "}"


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))  # 1.5, 1e+20; never NaN here (callers omit unknowns)


class _Exposition:
    """Families in order, each with its HELP/TYPE header once (the format requires grouping)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, help_text: str, samples: Iterable[tuple[dict[str, str], float | int]],
               kind: str = "gauge") -> None:
        samples = list(samples)
        if not samples:
            return
        full = f"{PREFIX}_{name}"
        self.lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
        self.lines += [f"{full}{_labels(labels)} {_number(value)}" for labels, value in samples]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def prometheus_text(scan: CacheScan, *, cap: int | None = None, per_entry: bool = False) -> str:
    """The metrics of one scan (``cap``: FastVideo's cap in bytes, omitted when unknown)."""
    root = {"root": scan.root}
    out = _Exposition()
    by_status: dict[str, list[Any]] = {s: [] for s in STATUSES}
    for e in scan.entries:
        by_status.setdefault(e.status, []).append(e)
    out.family("entries", "Cache entries by status (complete, partial, incomplete, empty, invalid).",
               [({**root, "status": s}, len(es)) for s, es in by_status.items()])
    out.family("bytes", "Bytes of the regular files in cache entries, by entry status.",
               [({**root, "status": s}, sum(e.bytes for e in es)) for s, es in by_status.items()])
    out.family("writing_entries", "Entries with a write in progress (a .tmp file changed within the grace period).",
               [(root, sum(1 for e in scan.entries if e.writing))])
    out.family("leftovers", "Leftover .evicting-* directories of interrupted evictions.", [(root, len(scan.leftovers))])
    out.family("leftover_bytes", "Bytes in leftover .evicting-* directories.",
               [(root, sum(x.bytes for x in scan.leftovers))])
    out.family("cap_bytes", "FastVideo's cache cap ($FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB x 2^30, default 300 GiB).",
               [(root, cap)] if cap is not None else [])
    out.family("filesystem_free_bytes", "Free bytes for unprivileged writers on the root's filesystem "
                                        "(statvfs f_bavail x f_frsize).",
               [(root, scan.fs_free)] if scan.fs_free is not None else [])
    out.family("filesystem_size_bytes", "Size of the root's filesystem (statvfs f_blocks x f_frsize).",
               [(root, scan.fs_total)] if scan.fs_total is not None else [])
    used = [e.last_used for e in scan.entries if e.last_used is not None]
    out.family("oldest_last_used_age_seconds", "Seconds since the least recently used entry was last used "
                                               "(manifest mtime): the next victim of FastVideo's GC.",
               [(root, max(0.0, scan.scanned_at - min(used)))] if used else [])
    out.family("scan_errors", "Problems met while scanning (entries that vanished or could not be read).",
               [(root, len(scan.errors))])
    out.family("scan_timestamp_seconds", "When this scan ran (Unix time).", [(root, float(scan.scanned_at))])
    if per_entry:  # the column table's per-entry families (core/cache/columns.py: METRICS)
        named = [({**root, **metric_labels(e, scan.scanned_at)}, e) for e in scan.entries]
        for metric in METRICS:
            out.family(metric.name, f"{metric.help} (--per-entry).",
                       [(labels, value) for labels, e in named if (value := metric.value(e)) is not None], metric.kind)
    return out.text()
