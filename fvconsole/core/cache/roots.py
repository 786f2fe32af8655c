"""Which cache root to use, and which roots eviction refuses to touch."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from fvconsole.core.errors import FvError, UsageError

ENV_ROOT = "FASTVIDEO_WEIGHT_SHARD_CACHE"
ENV_MAX_GB = "FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB"
DEFAULT_MAX_GB = 300.0
GIB = 2**30


def resolve_root(arg: str | None, env: Mapping[str, str] | None = None) -> str:
    """ROOT argument, else $FASTVIDEO_WEIGHT_SHARD_CACHE; a usage error when neither is set."""
    env = os.environ if env is None else env
    root = arg or env.get(ENV_ROOT)
    if not root:
        raise UsageError(f"no cache root: give ROOT or set {ENV_ROOT}")
    return os.path.abspath(os.path.expanduser(root))


def default_max_gb(env: Mapping[str, str] | None = None) -> float:
    """FastVideo's cap in GiB: $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB, default 300."""
    env = os.environ if env is None else env
    raw = env.get(ENV_MAX_GB)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_GB
    try:
        value = float(raw)
    except ValueError:
        raise FvError(f"environment {ENV_MAX_GB}: {raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise FvError(f"environment {ENV_MAX_GB}: {raw!r} must be a finite number >= 0")
    return value


def parse_max_gb(text: str, flag: str = "--max-gb") -> float:
    """A cap in GiB (fractional allowed); UsageError naming the flag otherwise."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"{flag}: {text!r} is not a number of GiB") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{flag}: {text!r} must be a finite number >= 0")
    return value


def cap_bytes(max_gb: float) -> float:
    """The cap exactly as FastVideo computes it: ``float(N) * 2**30``."""
    return float(max_gb) * GIB


def _home_dirs() -> set[str]:
    homes = {os.path.expanduser("~")}
    if os.environ.get("HOME"):
        homes.add(os.environ["HOME"])
    return {os.path.realpath(h) for h in homes}


def dangerous_root_reason(real_root: str, has_entries: bool, force: bool) -> str | None:
    """Why eviction must not run in ``real_root`` (a resolved path), or None.

    ``/`` and the home directory are refused even with ``force``; a mount point and a
    directory without a single cache-looking entry are refused unless ``force``.
    """
    if real_root == os.path.sep:
        return "is the filesystem root (/); refusing to evict there"
    if real_root in _home_dirs():
        return "is the home directory; refusing to evict there"
    if force:
        return None
    if os.path.ismount(real_root):
        return "is the root of a mounted filesystem; use a subdirectory, or --force if it really is the cache root"
    if not has_entries:
        return ("contains no cache-looking entries (16 lowercase hex directories); "
                "is this the right root? --force to proceed")
    return None
