"""One cache entry's files, for a detail pane: listed without following symlinks or touching atimes."""

from __future__ import annotations

import stat
from dataclasses import dataclass

from fvconsole.core.cache.files import list_dir
from fvconsole.core.cache.model import CacheEntry, ManifestSummary
from fvconsole.core.shared.errors import FvError


@dataclass(frozen=True)
class CacheEntryDetail:
    """Manifest summary and files of one cache entry (display only).

    The manifest summary comes from the scan (``CacheEntry.summary``), which already parsed
    and validated manifest.json: the detail pane never opens it again.
    """

    path: str
    summary: ManifestSummary | None
    manifest_error: str | None
    files: tuple[tuple[str, int], ...]  # (name, bytes) of regular files directly inside
    other: tuple[str, ...]  # symlinks, directories and other non-regular children (never followed)
    total_files: int


def cache_entry_detail(entry: CacheEntry, limit: int = 500) -> CacheEntryDetail:
    """List one scanned entry's files.

    ``list_dir`` opens the directory with O_NOFOLLOW | O_NOATIME and lstats each child; no
    file is opened, so looking at an entry never changes its place in FastVideo's LRU order.
    """
    try:
        listing = list_dir(entry.path)
    except OSError as exc:
        raise FvError(f"{entry.path}: cannot list cache entry ({exc.strerror or exc})") from None
    files = sorted((name, st.st_size) for name, st in listing if stat.S_ISREG(st.st_mode))
    other = sorted(name for name, st in listing if not stat.S_ISREG(st.st_mode))
    error = None
    if entry.summary is None:
        present = any(name == "manifest.json" for name, _ in listing)
        error = "present but not usable (see the explanation above)" if present else "missing"
    return CacheEntryDetail(path=entry.path, summary=entry.summary, manifest_error=error,
                            files=tuple(files[:limit]), other=tuple(other[:limit]), total_files=len(files))
