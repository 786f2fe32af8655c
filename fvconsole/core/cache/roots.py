"""Which cache root to use, which caps are sane, and which roots eviction refuses to touch."""

from __future__ import annotations

import contextlib
import math
import os
import pwd
from collections.abc import Iterable, Mapping

from fvconsole.core.cache import flags
from fvconsole.core.cache.durations import quote_input
from fvconsole.core.shared.errors import FvError, UsageError
from fvconsole.core.shared.fsutil import is_within
from fvconsole.core.shared.reasons import Reason, invalid, reason

ENV_ROOT = "FASTVIDEO_WEIGHT_SHARD_CACHE"
ENV_MAX_GB = "FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB"
DEFAULT_MAX_GB = 300.0
GIB = 2**30
#: No filesystem holds 2^60 bytes (1 EiB); a larger cap is a typo (``1e308``), and beyond
#: float range ``N x 2^30`` is infinity, which no byte count can be compared or printed as.
MAX_CAP_BYTES = 2**60
MAX_GB = MAX_CAP_BYTES // GIB

#: Refused as a root together with everything below them: code, configuration and kernel
#: pseudo-filesystems never hold a weight cache, and a mistyped path there is catastrophic.
SYSTEM_TREES = ("/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr")
#: Refused as a root themselves (a cache directory below them is normal: /dev/shm/x, /tmp/x).
SYSTEM_DIRS = ("/", "/dev", "/home", "/media", "/mnt", "/opt", "/root", "/run", "/srv", "/tmp",
               "/var", "/var/tmp")


def resolve_root(arg: str | None, env: Mapping[str, str] | None = None) -> str:
    """ROOT argument, else $FASTVIDEO_WEIGHT_SHARD_CACHE; a usage error when neither is set."""
    env = os.environ if env is None else env
    root = arg or env.get(ENV_ROOT)
    if not root:
        raise UsageError(f"no cache root: give ROOT or set {ENV_ROOT}")
    return os.path.abspath(os.path.expanduser(root))


def _gb_problem(text: str) -> tuple[float | None, str]:
    """(GiB, "") for a usable cap, else (None, what is wrong with ``text``)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None, "is not a number of GiB"
    if not math.isfinite(value) or value < 0:
        return None, "must be a finite number >= 0"
    if value > MAX_GB:
        return None, f"is too large (at most {MAX_GB} GiB = 2^60 bytes)"
    return value + 0.0, ""  # + 0.0: -0 is 0


def default_max_gb(env: Mapping[str, str] | None = None) -> float:
    """FastVideo's cap in GiB: $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB, default 300.

    FvError (exit 1) naming the variable when it is not a sane cap.
    """
    env = os.environ if env is None else env
    raw = env.get(ENV_MAX_GB)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_GB
    value, problem = _gb_problem(raw)
    if value is None:
        raise FvError(f"environment {ENV_MAX_GB}: {quote_input(raw)} {problem}")
    return value


def parse_max_gb(text: str, flag: str = flags.MAX_GB) -> float:
    """A cap in GiB (fractional allowed); UsageError naming the flag otherwise."""
    value, problem = _gb_problem(text)
    if value is None:
        raise UsageError(f"{flag}: {quote_input(str(text))} {problem}")
    return value


def cap_bytes(max_gb: float) -> float:
    """The cap exactly as FastVideo computes it: ``float(N) * 2**30``."""
    return float(max_gb) * GIB


def home_dirs(env: Mapping[str, str] | None = None) -> set[str]:
    """Real paths of the user's home: the password database's (whatever $HOME says) and $HOME."""
    env = os.environ if env is None else env
    homes = set()
    with contextlib.suppress(KeyError):  # a uid without a passwd entry (containers): $HOME is all there is
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    if env.get("HOME"):
        homes.add(env["HOME"])
    return {os.path.realpath(h) for h in homes if h}


def _real(paths: Iterable[str]) -> set[str]:
    """Each path and its real path (/bin may be a symlink to /usr/bin, /var/run to /run)."""
    return {p for path in paths for p in (path, os.path.realpath(path))}


def system_root_reason(real_root: str) -> str | None:
    """Why ``real_root`` (a resolved path) is never a cache root, whatever the flags; or None."""
    if real_root == os.sep:
        return "is the filesystem root (/); refusing to evict there"
    for home in sorted(home_dirs()):
        if real_root == home:
            return "is the home directory; refusing to evict there"
        if is_within(home, real_root):
            return f"contains the home directory {home}; refusing to evict there"
    for top in sorted(_real(SYSTEM_TREES)):
        if is_within(real_root, top):
            return f"is a system directory ({top}); refusing to evict there"
    if real_root in _real(SYSTEM_DIRS):
        return "is a system directory; refusing to evict there (use a directory inside it)"
    return None


def root_refusal(root: str, real_root: str, has_entries: bool, force: bool) -> Reason | None:
    """Why eviction must not run in ``real_root`` (``root`` resolved), as data; or None.

    ``/``, the home directory (from the password database and $HOME) and its parents, and
    system directories are refused even with ``force``; a mount point and a directory
    without a single cache-looking entry are refused unless ``force``. One function for
    every caller: ``fleet`` runs this same check on each node through ``cache evict``.
    """
    system = system_root_reason(real_root)
    if system:
        return invalid("root", f"{root}: {system}")
    if force:
        return None
    if os.path.ismount(real_root):
        return reason("cache_root.mount_point", "root", root=root)
    if not has_entries:
        return reason("cache_root.no_entries", "root", root=root)
    return None


def check_root_early(root: str, force: bool) -> None:
    """FvError for a root refused whatever it holds (system dirs, home; a mount point unless ``force``).

    Run before an execution takes the root's lock, so a refused root gets nothing written
    beside it; the "no cache entries" rule needs a scan and is judged by the plan.
    """
    real = os.path.realpath(root)
    if os.path.isdir(real):
        why = root_refusal(root, real, has_entries=True, force=force)
        if why:
            raise FvError.of(why)
