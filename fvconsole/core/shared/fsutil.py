"""Small path and file helpers shared by the migration modules."""

from __future__ import annotations

import os


def real(path: str | os.PathLike[str]) -> str:
    """FastVideo's ``_real``: expanduser then realpath (how it compares dataset roots)."""
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def is_within(child: str, parent: str) -> bool:
    """True when ``child`` is ``parent`` or lies below it (both already resolved)."""
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)
