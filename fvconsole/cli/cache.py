"""`fvconsole cache ls|evict`: inspect and trim the weight shard cache (docs/formats.md §6).

Standard library only at import time (plus rich for sizes), so `cache ls --json` starts
fast on every node of a job (`srun --ntasks-per-node=1 fvconsole cache ls --json`).
"""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

from fvconsole.cli.common import Block, block, emit_json, format_table, progress_printer, say
from fvconsole.cli.outcome import record_write
from fvconsole.core.cache import (
    ENV_MAX_GB,
    ENV_ROOT,
    KEY_RE,
    CacheScan,
    EvictionPlan,
    EvictionResult,
    cap_bytes,
    default_max_gb,
    execute_eviction,
    gc_sort_key,
    parse_duration,
    parse_max_gb,
    plan_eviction,
    resolve_root,
    scan_cache,
)
from fvconsole.core.errors import EXIT_OK, FvError, PartialFailure, UsageError
from fvconsole.core.humanize import age_since, head_tail, human_bytes

_FROM_ENV = "from-env"
_NOTE_WIDTH = 72

LS_HELP = f"""\
List the entries of a weight shard cache root (default ${ENV_ROOT}) with their size,
status (complete / partial / incomplete / invalid), shards present and last use
(manifest mtime). Read-only: never reads shard data, never changes an mtime or atime.

examples:
  fvconsole cache ls /dev/shm/fastvideo-wcache
  FASTVIDEO_WEIGHT_SHARD_CACHE=/dev/shm/fastvideo-wcache fvconsole cache ls --sort size
  srun --ntasks-per-node=1 fvconsole cache ls --json     # one JSON object per node

exit codes: 0 ok, 1 root missing or unreadable, 2 usage error (e.g. no ROOT and no
${ENV_ROOT}).
"""

EVICT_HELP = f"""\
Plan (and with --yes, execute) the removal of cache entries. Selectors combine as a union:
  --max-gb N        FastVideo's own GC policy: oldest manifest mtime first (no manifest =
                    oldest), ties by size then path, until the total is <= N x 2^30 bytes.
                    Without a value N is ${ENV_MAX_GB} (default 300).
  --key KEY         these entries (repeatable)
  --invalid         invalid and incomplete entries not modified within the grace period
  --older-than D    entries last used more than D ago (12h, 7d, 1d12h, ...)
--keep KEY is never evicted. Entries being written or used within --grace (default 10m)
are skipped unless --force. Leftover .evicting-* directories are always cleaned.
An entry or leftover with a mount point inside is never evicted, not even with --force:
removal never crosses a filesystem boundary.
The root must not be /, the home directory (from the password database or $HOME) or a
directory above it, or a system directory (/etc, /usr, /var, /tmp, /dev, ... themselves);
nor, unless --force, a mount point or a directory without cache entries.
N is at most 2^30 GiB (2^60 bytes); durations at most 100 years.

examples:
  fvconsole cache evict /dev/shm/fastvideo-wcache --max-gb 200          # preview only
  fvconsole cache evict /dev/shm/fastvideo-wcache --max-gb 200 --yes    # do it
  fvconsole cache evict --invalid --older-than 7d --keep 0123456789abcdef --yes
  fvconsole cache evict --key 0123456789abcdef --json

exit codes: 0 ok (dry run included), 1 refused, 2 usage error, 3 failed part-way.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `cache ls` and `cache evict`."""
    parser = sub.add_parser("cache", help="weight shard cache: list entries, plan and run evictions",
                            description="Inspect and trim FastVideo's weight shard cache.")
    actions = parser.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    ls = actions.add_parser("ls", help="list cache entries", description=LS_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(ls)
    ls.add_argument("--sort", choices=("lru", "size", "key"), default="lru",
                    help="lru: FastVideo's GC order, next victim first (default); size: largest first; key")
    ls.set_defaults(func=run_ls)
    ev = actions.add_parser("evict", help="plan or run an eviction (dry run unless --yes)",
                            description=EVICT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(ev)
    ev.add_argument("--max-gb", nargs="?", const=_FROM_ENV, metavar="N",
                    help=f"evict LRU until total <= N GiB (fractional ok; no value: ${ENV_MAX_GB} or 300)")
    ev.add_argument("--key", action="append", default=[], metavar="KEY", help="evict this entry (repeatable)")
    ev.add_argument("--invalid", action="store_true", help="evict invalid and incomplete entries")
    ev.add_argument("--older-than", metavar="D", help="evict entries last used more than D ago")
    ev.add_argument("--keep", action="append", default=[], metavar="KEY", help="never evict this entry")
    ev.add_argument("--force", action="store_true",
                    help="also evict entries in use or being written; allow a mount point or empty-looking root")
    ev.add_argument("--yes", action="store_true", help="execute (default: dry run)")
    ev.set_defaults(func=run_evict)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", nargs="?", metavar="ROOT", help=f"cache root (default: ${ENV_ROOT})")
    parser.add_argument("--grace", metavar="D", default="10m",
                        help="a .tmp or use newer than this means in use (default 10m)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _root(args: argparse.Namespace) -> str:
    return resolve_root(args.root or getattr(args, "cache_root", None))


def _node_info() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "node": os.environ.get("SLURMD_NODENAME")}


def _env_cap() -> tuple[int | None, str | None]:
    """The cap FastVideo's GC applies here, or (None, why not)."""
    try:
        return int(cap_bytes(default_max_gb())), None
    except FvError as exc:
        return None, str(exc)


# ---------------------------------------------------------------- ls


def run_ls(args: argparse.Namespace) -> int:
    """`cache ls`: exit 0 unless the root itself is missing or unlistable."""
    grace = parse_duration(args.grace, "--grace")
    scan = scan_cache(_root(args), grace)
    entries = sort_entries(scan, args.sort)
    if args.json:
        emit_json(ls_payload(scan, entries))
    else:
        say(render_ls(scan, entries))
    return EXIT_OK


def _n(count: int, one: str, many: str) -> str:
    """``1 entry`` / ``3 entries``: summaries read as sentences."""
    return f"{count} {one if count == 1 else many}"


def sort_entries(scan: CacheScan, order: str) -> list:
    if order == "size":
        return sorted(scan.entries, key=lambda e: (-e.bytes, e.key))
    if order == "key":
        return sorted(scan.entries, key=lambda e: e.key)
    return sorted(scan.entries, key=gc_sort_key)


def ls_payload(scan: CacheScan, entries: list) -> dict[str, Any]:
    payload = scan.to_json()
    payload["entries"] = [e.to_json() for e in entries]
    cap, cap_error = _env_cap()
    payload.update(_node_info(), cap_bytes=cap, entry_count=len(entries))
    if cap_error:
        payload["cap_error"] = cap_error
    return payload


def _short(text: str, width: int = _NOTE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_ls(scan: CacheScan, entries: list) -> Block:
    rows = [
        (e.key, e.status, human_bytes(e.bytes),
         f"{len(e.shards_present)}/{e.num_shards if e.num_shards is not None else '?'}",
         age_since(e.last_used, scan.scanned_at) if e.last_used is not None else "never",
         "yes" if e.writing else "", _short(e.explanation))
        for e in entries
    ]
    lines = [f"cache {scan.root} on {socket.gethostname()}"]
    if rows:
        lines.append(format_table(("KEY", "STATUS", "SIZE", "SHARDS", "LAST USED", "WRITING", "NOTE"),
                                  rows, right=(2,)))
    else:
        lines.append("(no cache entries)")
    lines.append(_ls_footer(scan, len(entries)))
    lines.extend(_ls_extras(scan))
    return block(lines)


def _ls_footer(scan: CacheScan, count: int) -> str:
    cap, cap_error = _env_cap()
    cap_text = f"cap {human_bytes(cap)} (${ENV_MAX_GB})" if cap is not None else f"cap unknown ({cap_error})"
    free = (f"; filesystem free {human_bytes(scan.fs_free)} of {human_bytes(scan.fs_total)}"
            if scan.fs_free is not None else "")
    return f"total {human_bytes(scan.total_bytes)} in {_n(count, 'entry', 'entries')}; {cap_text}{free}"


def _ls_extras(scan: CacheScan) -> list[str]:
    lines = []
    if scan.leftovers:
        lines.append("leftovers of interrupted evictions (removed by the next `cache evict`):")
        lines += [f"  {x.name}  {human_bytes(x.bytes)}" for x in scan.leftovers]
    if scan.foreign:
        head, omitted, tail = head_tail(scan.foreign)
        more = [f"  ... {omitted} more"] if omitted else []
        lines.append("foreign (not cache entries; never touched):")
        lines += [f"  {n}" for n in head] + more + [f"  {n}" for n in tail]
    mounted = [(e.key, e.mounts) for e in scan.entries if e.mounts]
    mounted += [(x.name, x.mounts) for x in scan.leftovers if x.mounts]
    if mounted:
        lines.append("mount points inside (never evicted: eviction never crosses a mount):")
        lines += [f"  {name}: {', '.join(mounts)}" for name, mounts in mounted]  # block() sanitises
    lines += [f"warning: {err}" for err in scan.errors]
    return lines


# ---------------------------------------------------------------- evict


def _keys(values: list[str], flag: str) -> tuple[str, ...]:
    for value in values:
        if not KEY_RE.fullmatch(value):
            raise UsageError(f"{flag}: {value!r} is not a cache key (16 lowercase hex characters)")
    return tuple(dict.fromkeys(values))


def _max_gb(value: str | None) -> float | None:
    if value is None:
        return None
    return default_max_gb() if value == _FROM_ENV else parse_max_gb(value)


def build_plan(args: argparse.Namespace) -> EvictionPlan:
    """Validate the command line, scan, plan (no writes)."""
    grace = parse_duration(args.grace, "--grace")
    older = parse_duration(args.older_than, "--older-than") if args.older_than is not None else None
    max_gb = _max_gb(args.max_gb)
    keys, keep = _keys(args.key, "--key"), _keys(args.keep, "--keep")
    if max_gb is None and not keys and not args.invalid and older is None:
        raise UsageError("nothing selected: give --max-gb, --key, --invalid or --older-than")
    scan = scan_cache(_root(args), grace)
    return plan_eviction(scan, max_gb=max_gb, keys=keys, invalid=args.invalid, older_than=older,
                         keep=keep, grace_seconds=grace, force=args.force)


def run_evict(args: argparse.Namespace) -> int:
    """`cache evict`: 0 ok (dry run too), 1 refused, 2 usage, 3 failed part-way."""
    plan = build_plan(args)
    if not args.yes:
        if args.json:
            emit_json({**plan.to_json(), **_node_info()})
        else:
            say(render_plan(plan))
        return EXIT_OK
    result = execute_eviction(plan, progress=None if args.json else progress_printer("evicting"))
    if result.evicted:
        record_write(f"the eviction ran: {_n(len(result.evicted), 'entry', 'entries')} evicted from {plan.root}")
    payload = {**result.to_json(), **_node_info(), "cap_bytes": plan.cap_bytes}
    if result.errors:
        if not args.json:
            say(render_result(result))
        raise PartialFailure(f"{plan.root}: {_n(len(result.errors), 'entry', 'entries')} could not be evicted "
                             f"(first: {result.errors[0]})", report=payload)
    if args.json:
        emit_json(payload)
    else:
        say(render_result(result))
    return EXIT_OK


def _skipped_table(skipped: tuple) -> list[str]:
    if not skipped:
        return []
    return ["skipped:", format_table(("KEY", "REASON"), [(s.key, _short(s.reason, 100)) for s in skipped])]


def render_plan(plan: EvictionPlan) -> Block:
    lines = [f"eviction plan for {plan.root} on {socket.gethostname()} (dry run)"]
    if plan.cap_bytes is not None:
        lines.append(f"total {human_bytes(plan.total_bytes)}; cap {human_bytes(plan.cap_bytes)}")
    if plan.evict:
        lines.append(format_table(("KEY", "SIZE", "REASON"),
                                  [(p.key, human_bytes(p.bytes), _short(p.reason, 100)) for p in plan.evict], right=(1,)))
    else:
        lines.append("nothing to evict")
    lines += _skipped_table(plan.skipped)
    lines.append(f"would free {human_bytes(plan.freed_bytes)} ({_n(len(plan.evict), 'entry', 'entries')}); "
                 "re-run with --yes")
    return block(lines)


def render_result(result: EvictionResult) -> Block:
    lines = [f"evicted {_n(len(result.evicted), 'entry', 'entries')} from {result.root} on {socket.gethostname()}"]
    if result.evicted:
        lines.append(format_table(("KEY", "FREED", "REASON"),
                                  [(e.key, human_bytes(e.bytes), _short(e.reason, 100)) for e in result.evicted], right=(1,)))
    lines += _skipped_table(result.skipped)
    lines += [f"error: {err}" for err in result.errors]
    lines.append(f"freed {human_bytes(result.freed_bytes)} (measured); filesystem free "
                 f"{human_bytes(result.fs_free_before)} -> {human_bytes(result.fs_free_after)}")
    return block(lines)

