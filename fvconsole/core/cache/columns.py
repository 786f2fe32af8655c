"""The cache listing's columns, declared once: ``cache ls``, the console's cache table, the fleet's CSV
and the per-entry Prometheus series.

Why one table: each front end listed its own columns (header, width, how a cell reads, which
JSON field it shows), and a column added to one was missing from the others. A column here
says all of it; the CLI and the console take their headers, widths and cells from it, the
fleet's CSV its field names and values (from a node's ``cache ls --json`` entry), the
Prometheus text (``core/cache/metrics.py``, ``--per-entry``) its per-entry families and the
labels that name an entry. Adding a column is a field of
:class:`~fvconsole.core.cache.model.CacheEntry` (and its ``to_json``) plus a row here
(docs/DESIGN.md, "Presentation").

No UI import: a console that styles a cell (the status colour) overrides that cell by key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.model import CacheEntry
from fvconsole.core.shared.humanize import age_since, clipped, human_bytes, utc_text

#: The NOTE column is clipped to this many characters (then wrapped by the table).
NOTE_WIDTH = 72


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _utc(epoch: Any) -> str:
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
        return ""
    try:
        return utc_text(epoch)
    except (OverflowError, OSError, ValueError):
        return ""


def _count(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


@dataclass(frozen=True)
class Export:
    """One CSV column a listing column gives: its name, the JSON field it reads and how it reads it."""

    name: str
    field: str
    value: Callable[[Any], Any]
    #: Its place among the CSV's entry columns (the CSV's order predates this table and stays).
    at: int


@dataclass(frozen=True)
class Metric:
    """One Prometheus family a listing column gives: one sample per entry, with ``--per-entry``."""

    #: The family's name after ``fvconsole_cache_``, ending in its unit (``_bytes``, ``_seconds``), as
    #: Prometheus names metrics (the text format 0.0.4 has no unit line).
    name: str
    #: The HELP text, without its full stop: the exporter adds which option asks for per-entry series.
    help: str
    #: The entry's value (a whole number stays one); None: no sample for this entry (never NaN).
    value: Callable[[CacheEntry], int | float | None]
    #: The TYPE: a value of an entry now is a gauge.
    kind: str = "gauge"


@dataclass(frozen=True)
class EntryColumn:
    """One column of the cache listing: header, width policy, cell and the JSON fields it shows."""

    #: The command line's header; the console shows it in lower case.
    header: str
    #: The console's column key (and sort key).
    key: str
    #: The cell's text for an entry, given the time of the scan (ages are relative to it).
    cell: Callable[[CacheEntry, float], str]
    #: What the console sorts the column by (ascending).
    order: Callable[[CacheEntry], Any]
    #: The console's width in cells; None: the console does not show it.
    width: int | None = None
    #: Right-aligned (sizes).
    right: bool = False
    #: On a narrow terminal ``cache ls`` drops droppable columns, lowest first; None: never dropped.
    drop: int | None = None
    #: The column that wraps instead of being cut.
    wrap: bool = False
    #: Fitted to a terminal, its cells are clipped to this many characters first (then wrapped).
    clip: int | None = None
    #: What the fleet's CSV has of it (no export: not in the CSV).
    exports: tuple[Export, ...] = ()
    #: The label this column's cell gives every per-entry Prometheus sample: what names an entry (its
    #: key, its status), never a value that changes by itself (an age). None: not a label.
    label: str | None = None
    #: What the Prometheus text has of it per entry (no metric: not exported there).
    metric: Metric | None = None


def shards_text(entry: CacheEntry) -> str:
    """``3/4``: shards present of the manifest's count (``3/?`` without a manifest)."""
    return f"{len(entry.shards_present)}/{entry.num_shards if entry.num_shards is not None else '?'}"


def _last_used(entry: CacheEntry, now: float) -> str:
    return age_since(entry.last_used, now) if entry.last_used is not None else "never"


LISTING: tuple[EntryColumn, ...] = (
    EntryColumn("KEY", "key", lambda e, _now: e.key, lambda e: e.key, width=16, exports=(Export("key", "key", lambda v: v, 0),),
                label="key"),
    # The console's widths: each its widest cell ("incomplete*", "1023.9 GiB", and "999d 23h ago", the
    # widest age below 1000 days, with the console's "ago"); together the 70 columns views.tcss gives.
    EntryColumn("STATUS", "status", lambda e, _now: e.status, lambda e: e.status, width=11, drop=3,
                exports=(Export("status", "status", lambda v: v, 1),), label="status"),
    EntryColumn("SIZE", "size", lambda e, _now: human_bytes(e.bytes), lambda e: e.bytes, width=10, right=True,
                exports=(Export("bytes", "bytes", _int, 2),),
                metric=Metric("entry_bytes", "Bytes of one cache entry", lambda e: e.bytes)),
    EntryColumn("SHARDS", "shards", lambda e, _now: shards_text(e), lambda e: len(e.shards_present), width=8, drop=2,
                exports=(Export("shards_present", "shards_present", _count, 5),
                         Export("num_shards", "num_shards", _int, 6))),
    EntryColumn("LAST USED", "age", _last_used, lambda e: -(e.last_used or 0.0), width=12,
                exports=(Export("last_used_utc", "last_used", _utc, 3),)),
    EntryColumn("WRITING", "writing", lambda e, _now: "yes" if e.writing else "", lambda e: e.writing, drop=1,
                exports=(Export("writing", "writing", lambda v: v is True, 4),)),
    EntryColumn("NOTE", "note", lambda e, _now: e.explanation, lambda e: e.explanation, wrap=True, clip=NOTE_WIDTH),
)

#: The console's columns (those with a width), in listing order.
CONSOLE = tuple(c for c in LISTING if c.width is not None)
#: What ``cache ls`` leaves out first when the terminal is narrow (the note wraps instead, down to a point).
DROPPABLE = tuple(c.header for c in sorted((c for c in LISTING if c.drop is not None), key=lambda c: c.drop or 0))
#: The fleet CSV's per-entry columns.
EXPORTS = tuple(sorted((x for c in LISTING for x in c.exports), key=lambda x: x.at))
#: The columns whose cells name each per-entry Prometheus sample (after ``root``), in listing order.
LABELS = tuple(c for c in LISTING if c.label is not None)
#: The per-entry Prometheus families, in listing order.
METRICS = tuple(c.metric for c in LISTING if c.metric is not None)


def listing_cells(entry: CacheEntry, now: float, *, fitted: bool) -> tuple[str, ...]:
    """One entry's row of the listing (``fitted``: to a terminal's width, so long cells are clipped)."""
    return tuple(clipped(text, c.clip) if fitted and c.clip is not None else text
                 for c, text in ((c, c.cell(entry, now)) for c in LISTING))


def export_cells(entry: Mapping[str, Any]) -> list[Any]:
    """The CSV cells of one entry of a node's ``cache ls --json`` (untrusted: each value read as its column reads it)."""
    return [x.value(entry.get(x.field)) for x in EXPORTS]


def metric_labels(entry: CacheEntry, now: float) -> dict[str, str]:
    """The labels of one entry's Prometheus samples: each label column's cell, by its label."""
    return {c.label: c.cell(entry, now) for c in LABELS if c.label is not None}
