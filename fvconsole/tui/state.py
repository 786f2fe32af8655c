"""What the console has loaded: the three paths, the read-only switch and the run config.

Kept free of Textual so views, workers and tests can share it. Anything that touches the
file system is a core call made from a view's thread worker.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any

from fvconsole.core.cache import DEFAULT_MAX_GB, ENV_ROOT, default_max_gb
from fvconsole.core.shared import FvError

#: Clock used for ages; screenshots freeze it so reruns render identical SVGs.
_frozen_now: float | None = None
#: Free and total bytes of the cache's filesystem as shown; screenshots freeze them too.
_frozen_space: tuple[int, int] | None = None
#: Screenshots hide the process check's warnings (they depend on the machine's /proc).
_hide_process_warnings = False


def now() -> float:
    """Wall-clock seconds, unless frozen with :func:`freeze_clock`."""
    return _frozen_now if _frozen_now is not None else time.time()


def freeze_clock(at: float | None) -> None:
    """Freeze (or with None, unfreeze) the clock used to render ages."""
    global _frozen_now
    _frozen_now = at


def freeze_free_space(free_and_total: tuple[int, int] | None) -> None:
    """Show this (free, total) for the cache's filesystem instead of statvfs's (None: the real figures)."""
    global _frozen_space
    _frozen_space = free_and_total


def free_space(scan: Any) -> tuple[int | None, int | None]:
    """(free, total) bytes of the filesystem holding a scanned cache, as the console shows them."""
    if _frozen_space is not None:
        return _frozen_space
    return scan.fs_free, scan.fs_total


def shown_scan(scan: Any) -> Any:
    """``scan`` with the free space the console shows (so a free-space target is planned on the
    figures on screen: the frozen ones in screenshots, statvfs's otherwise)."""
    if _frozen_space is None:
        return scan
    from dataclasses import replace as _replace

    return _replace(scan, fs_free=_frozen_space[0], fs_total=_frozen_space[1])


def freeze_process_warnings(hidden: bool) -> None:
    """Hide the scan's process-check warnings (screenshots: whether /proc is readable whole depends on the machine)."""
    global _hide_process_warnings
    _hide_process_warnings = hidden


def shown_warnings(scan: Any) -> tuple[str, ...]:
    """A scan's scan-level warnings as the console shows them."""
    return () if _hide_process_warnings else tuple(scan.warnings)


def shown_free(free: int | None) -> int | None:
    """A filesystem's free bytes as shown (a node's, in the fleet view): the frozen figure if frozen."""
    return _frozen_space[0] if _frozen_space is not None and free is not None else free


def cache_cap_gb() -> float:
    """The eviction cap FastVideo's own GC uses (``$FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB``, 300).

    A malformed environment value falls back to the default here; eviction to cap re-reads it
    through ``core.cache.default_max_gb`` and refuses with the error.
    """
    try:
        return default_max_gb()
    except FvError:
        return DEFAULT_MAX_GB


@dataclass(frozen=True)
class ConsoleState:
    """The paths the console works on. Any of them may be missing; views say so."""

    config_path: str | None = None
    checkpoints_path: str | None = None
    cache_root: str | None = None
    read_only: bool = False
    run_config: Any = None  # core.formats.runconfig.RunConfig once loaded
    config_error: str | None = None
    #: ``--journal PATH``; None: ``$FVCONSOLE_JOURNAL``, else the XDG default (see :meth:`journal`).
    journal_path: str | None = None

    @classmethod
    def from_args(cls, args: Any) -> ConsoleState:
        """Paths from the command line; the cache root defaults to the environment."""
        cache_root = getattr(args, "cache_root", None) or os.environ.get(ENV_ROOT) or None
        return cls(
            config_path=_clean(getattr(args, "config", None)),
            checkpoints_path=_clean(getattr(args, "checkpoints", None)),
            cache_root=_clean(cache_root),
            read_only=bool(getattr(args, "read_only", False)),
            journal_path=_clean(getattr(args, "journal", None)),
        )

    def journal(self) -> str:
        """The journal the History view reads and the console's executions append to (as the CLI's)."""
        from fvconsole.core.journal import journal_path

        return journal_path(self.journal_path)

    def with_paths(self, **changes: Any) -> ConsoleState:
        """A copy with some paths changed (empty strings mean 'not set')."""
        cleaned = {k: _clean(v) if k.endswith(("_path", "_root")) else v for k, v in changes.items()}
        return replace(self, **cleaned)

    def missing(self) -> list[str]:
        """Human names of the paths not set, for the banner."""
        out = []
        if not self.config_path:
            out.append("run config (--config)")
        if not self.checkpoints_path:
            out.append("checkpoints (--checkpoints)")
        if not self.cache_root:
            out.append(f"cache root (--cache-root or ${ENV_ROOT})")
        return out


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return os.path.expanduser(text) if text else None
