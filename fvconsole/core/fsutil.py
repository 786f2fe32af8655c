"""Small path and file helpers shared by the migration modules."""

from __future__ import annotations

import os

from fvconsole.core.safe_read import sha256_regular_file


def real(path: str | os.PathLike[str]) -> str:
    """FastVideo's ``_real``: expanduser then realpath (how it compares dataset roots)."""
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def is_within(child: str, parent: str) -> bool:
    """True when ``child`` is ``parent`` or lies below it (both already resolved)."""
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Streamed sha256 of a file, as recorded in receipts.

    Regular files only (FvError otherwise): a FIFO swapped in for a sidecar, the receipt or
    ``metadata.json`` is refused instead of blocking the hash forever.
    """
    return sha256_regular_file(path)
