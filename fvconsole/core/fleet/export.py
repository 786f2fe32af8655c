"""The fleet listing as CSV for spreadsheets: one row per node x cache entry.

Why CSV and these rules: operators paste fleet state into a spreadsheet to compare nodes.
Quoting is the ``csv`` module's (RFC 4180: quotes, commas and newlines inside a cell
survive). Cells come from other machines (node output, file names), and a spreadsheet runs
a cell that starts with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage return) as a
formula, so such text cells get a leading ``'`` (the OWASP CSV-injection advice); numbers
are written as numbers. A node without entries, or one that failed, still gets one row.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from fvconsole.core.cache.columns import EXPORTS, export_cells
from fvconsole.core.cache.model import CacheEntry
from fvconsole.core.fleet.aggregate import FleetCacheView
from fvconsole.core.fleet.documents import NodeListing

#: The node's columns, then each entry's (declared with the listing's: core/cache/columns.py), then the node's again.
COLUMNS = ("node", "outcome", "root", *(x.name for x in EXPORTS), "fs_free_bytes", "error")
_BLANK = [None] * len(EXPORTS)
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as text, never runs: formula-looking text gets a leading ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def _entry_row(node: str, listing: NodeListing, entry: CacheEntry) -> list[Any]:
    """One entry's row (each column's export reads its field of the entry's ``cache ls --json`` form)."""
    return [node, "ok", listing.root, *export_cells(entry.to_json()), listing.fs_free, None]


def fleet_csv(view: FleetCacheView) -> str:
    """Every node's entries as CSV text (header first, nodes in selection order)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for outcome in view.outcomes:
        if not outcome.ok:
            rows = [[outcome.node, outcome.kind, None, *_BLANK, None, outcome.error or "failed"]]
        else:
            listing = outcome.listing
            rows = [_entry_row(outcome.node, listing, e) for e in listing.entries] or [
                [outcome.node, "ok", listing.root, *_BLANK, listing.fs_free, None]]
        for row in rows:
            writer.writerow([safe_cell(c) for c in row])
    return out.getvalue()
