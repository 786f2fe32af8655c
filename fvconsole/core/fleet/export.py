"""The fleet listing as CSV for spreadsheets: one row per node x cache entry.

Operators paste fleet state into a spreadsheet to compare nodes; the CSV rules (quoting,
formula-looking cells neutralised, numbers as numbers) are ``cache ls --format csv``'s
(``core/cache/export.py``). A node without entries, or one that failed, still gets one row.
"""

from __future__ import annotations

from typing import Any

from fvconsole.core.cache.columns import EXPORTS, export_cells
from fvconsole.core.cache.export import csv_text
from fvconsole.core.cache.model import CacheEntry
from fvconsole.core.fleet.aggregate import FleetCacheView
from fvconsole.core.fleet.documents import NodeListing

#: ``fleet cache ls --format``: text and JSON (the nodes' documents), CSV (here).
FLEET_LISTING_FORMATS = ("text", "json", "csv")
#: The node's columns, then each entry's (declared with the listing's: core/cache/columns.py), then the node's again.
COLUMNS = ("node", "outcome", "root", *(x.name for x in EXPORTS), "fs_free_bytes", "error")
_BLANK = [None] * len(EXPORTS)


def _entry_row(node: str, listing: NodeListing, entry: CacheEntry) -> list[Any]:
    """One entry's row (each column's export reads its field of the entry's ``cache ls --json`` form)."""
    return [node, "ok", listing.root, *export_cells(entry.to_json()), listing.fs_free, None]


def fleet_csv(view: FleetCacheView) -> str:
    """Every node's entries as CSV text (header first, nodes in selection order)."""
    rows: list[list[Any]] = []
    for outcome in view.outcomes:
        if not outcome.ok:
            rows.append([outcome.node, outcome.kind, None, *_BLANK, None, outcome.error or "failed"])
            continue
        listing = outcome.listing
        rows += [_entry_row(outcome.node, listing, e) for e in listing.entries] or [
            [outcome.node, "ok", listing.root, *_BLANK, listing.fs_free, None]]
    return csv_text(COLUMNS, rows)
