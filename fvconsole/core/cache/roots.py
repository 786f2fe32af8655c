"""Which cache root to use, which roots eviction refuses to touch, and the root's one evictor lock."""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Iterable, Mapping

from fvconsole.core.shared.errors import FvError, UsageError
from fvconsole.core.shared.fsutil import is_within
from fvconsole.core.shared.locks import Holder, RootLock, RootLockKind
from fvconsole.core.shared.reasons import Reason, invalid, reason

ENV_ROOT = "FASTVIDEO_WEIGHT_SHARD_CACHE"
#: One evictor per root (docs/formats.md §6): a cron job, a Slurm epilog and an operator may
#: all evict one node-local root, and two executions at once would plan against the same free
#: space and race entry by entry.
EVICTOR = RootLockKind(name="fvconsole-evictor", noun="cache root", busy="another eviction is running",
                       code="lock.evicting", unguarded="another eviction of it is not excluded")
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


def evictor_lock(root: str, command: str | None = None) -> RootLock:
    """The exclusive eviction lock of ``root`` (not yet taken)."""
    return RootLock(root, EVICTOR, command=command)


def probe_evictor(root: str) -> Holder | None:
    """Read-only: the eviction running in ``root`` now, as its holder record tells (dry runs, the preview)."""
    return evictor_lock(root).probe().holder
