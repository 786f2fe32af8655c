"""A cache listing as CSV for spreadsheets (``cache ls --format csv``), and the CSV rules the fleet's shares.

Why these rules: operators paste cache state into a spreadsheet to compare entries and nodes.
Quoting is the ``csv`` module's (RFC 4180: quotes, commas and newlines inside a cell survive).
Cells hold untrusted text (file names, node output), and a spreadsheet runs a cell that starts
with ``=``, ``+``, ``-``, ``@`` (or a tab or carriage return) as a formula, so such text cells
get a leading ``'`` (the OWASP CSV-injection advice); numbers are written as numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from fvconsole.core.cache.columns import EXPORTS, export_cells
from fvconsole.core.cache.model import CacheEntry, CacheScan
from fvconsole.core.shared.host import node_names

#: ``cache ls --format``: text and JSON (the scan's envelope), CSV (here), Prometheus (``metrics.py``).
LISTING_FORMATS = ("text", "json", "csv", "prometheus")
#: ``cache ls --format csv``: the node and root, each entry's columns (core/cache/columns.py), the free space.
COLUMNS = ("node", "root", *(x.name for x in EXPORTS), "fs_free_bytes")
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


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The header and rows as CSV text (CRLF line ends, every cell through :func:`safe_cell`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([safe_cell(c) for c in row])
    return out.getvalue()


def listing_csv(scan: CacheScan, entries: Sequence[CacheEntry]) -> str:
    """One row per entry, in the listing's order; the node is Slurm's name for it, else the hostname."""
    names = node_names()
    node = names["node"] or names["hostname"]
    return csv_text(COLUMNS, ([node, scan.root, *export_cells(e.to_json()), scan.fs_free] for e in entries))
