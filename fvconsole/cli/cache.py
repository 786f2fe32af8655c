"""`fvconsole cache ls|evict`: inspect and trim the weight shard cache (docs/formats.md §6).

Standard library only at import time (sizes by `core/shared/humanize.py`), so `cache ls --json` starts
fast on every node of a job (`srun --ntasks-per-node=1 fvconsole cache ls --json`).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

from fvconsole.cli.common import (
    Block,
    block,
    command_failed,
    emit_json,
    emit_json_stream,
    format_table,
    json_chunks,
    progress_printer,
    say,
    seconds,
    terminal_width,
    warn,
    whole_number,
)
from fvconsole.cli.formats import add_format_args, output_format, write_output_file
from fvconsole.cli.options import add_deep, add_force, add_grace, add_json, add_wait, add_yes
from fvconsole.cli.outcome import Interruption, add_journal_args, warn_if_unwritten
from fvconsole.cli.selectors import add_key_option, add_selector_args, selectors_from
from fvconsole.cli.streams import write_out
from fvconsole.core.cache import (
    DEFAULT_GRACE_SECONDS,
    DROPPABLE,
    ENV_MAX_GB,
    ENV_ROOT,
    INVALID_SELECTS,
    LISTING,
    LISTING_FORMATS,
    LISTING_ORDERS,
    CacheEntry,
    CacheScan,
    CacheVerification,
    EvictionPlan,
    EvictionPreview,
    EvictionRequest,
    EvictionResult,
    LockedEviction,
    StoppedEviction,
    cap_bytes,
    default_max_gb,
    listing_cells,
    listing_csv,
    listing_order,
    parse_keys,
    prometheus_text,
    resolve_root,
    scan_cache,
    verify_cache,
)
from fvconsole.core.journal import appender
from fvconsole.core.shared import (
    EXIT_OK,
    EXIT_REFUSED,
    FvError,
    PartialFailure,
    Run,
    UsageError,
    clipped,
    elided,
    flags,
    human_bytes,
    parse_duration,
    plural,
    run_locked,
    utc_text,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.cli.outcome import Invocation

LS_HELP = f"""\
List the entries of a weight shard cache root (default ${ENV_ROOT}) with their size,
status (complete / partial / incomplete / empty / invalid), shards present and last use
(manifest mtime). Read-only: never reads shard data, never changes an mtime or atime.
Entries open or mapped by a live process on this node are listed as in use (pid and
command); foreign directories are flagged, since FastVideo's own GC counts them and may
delete them.

--format prometheus writes node-exporter textfile-collector metrics (bytes and entries
per status, cap, filesystem free and size, oldest last-used age; per entry with
--per-entry); --format csv one row per entry for a spreadsheet (the columns of
`fleet cache ls --format csv`, formula-looking cells neutralised); --output FILE replaces a regular FILE atomically and writes a FIFO or
device (/dev/stdout) in place. --watch SECONDS scans again every
SECONDS: text redraws the screen on a terminal and appends a timestamped block otherwise,
--json prints one JSON line per scan, --output rewrites the file; --count N stops after N
scans. A scan that fails while watching is reported and watching goes on.

examples:
  fvconsole cache ls /dev/shm/fastvideo-wcache
  FASTVIDEO_WEIGHT_SHARD_CACHE=/dev/shm/fastvideo-wcache fvconsole cache ls --sort size
  srun --ntasks-per-node=1 fvconsole cache ls --json     # one JSON object per node
  fvconsole cache ls --format prometheus --output /var/lib/node_exporter/textfile/fvcache.prom
  fvconsole cache ls --watch 10                           # a live view; Ctrl-C ends it (exit 0)

exit codes: 0 ok, 1 root missing or unreadable (with --watch: the last scan failed),
2 usage error (e.g. no ROOT and no ${ENV_ROOT}); 143/129 a watch ended by SIGTERM/SIGHUP.
"""

EVICT_HELP = f"""\
Plan (and with --yes, execute) the removal of cache entries. Selectors combine as a union:
  --max-gb N        FastVideo's own GC policy: oldest manifest mtime first (no manifest =
                    oldest), ties by size then path, until the total is <= N x 2^30 bytes.
                    Without a value N is ${ENV_MAX_GB} (default 300).
  --min-free-gb N / --min-free-percent P
                    in the same order, until the filesystem holding the root would have
                    N GiB / P% of its size free (statvfs: f_bavail, what an unprivileged
                    writer may use); space the other selectors free counts first. A target
                    that cannot be reached is said so (a warning, exit 0) and evicts nothing
                    for itself: emptying the cache would cost the next job its warm entries
                    and still miss it (entries other selectors chose still go).
  --best-effort     with such a target: evict what may go toward it anyway
  --key KEY         these entries (repeatable)
  --invalid         {INVALID_SELECTS}
  --invalid --verify
                    also entries whose shards fail `fvconsole cache verify` (headers only)
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
  fvconsole cache evict --min-free-percent 30 --yes --wait 60     # a Slurm epilog

One eviction per root at a time: --yes takes an exclusive lock on the root (an OFD write lock
on ROOT/.fvconsole-evictor.lock; dry runs never do); another --yes on the same root waits up to
--wait SECONDS (default 0) or exits 1 naming the holder. Each execution that removed something
appends one line to the journal (see --journal; `fvconsole history` lists it).

exit codes: 0 ok (dry run included), 1 refused (also: another eviction holds the root, or
a --key that is not an entry, as `cache verify --key` does),
2 usage error, 3 failed part-way.
"""


VERIFY_HELP = f"""\
Check every entry (or --key KEY ...) of a cache root (default ${ENV_ROOT}): each shard's
safetensors header against the manifest's params (names, with FastVideo's zero-init
patterns gate_compress / proj_l allowed to be absent; dtype, torch.bfloat16 = BF16; shape,
local_shape for a DTensor, global_shape for a plain tensor) and the file's size against the
header's data offsets (truncation, trailing bytes: what safetensors' own reader refuses).
Reads manifest.json and the shard headers only; --deep also reads every byte of every shard
(I/O errors), with a progress line on stderr. Never changes an mtime or atime. Shards absent
from this node are normal (a node-local cache holds its own shards only).

examples:
  fvconsole cache verify /dev/shm/fastvideo-wcache
  fvconsole cache verify --key 0123456789abcdef --deep
  srun --ntasks-per-node=1 fvconsole cache verify --json   # one JSON object per node

exit codes: 0 every entry verified, 1 a problem found (or a --key that is not an entry,
or the root missing), 2 usage error.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `cache ls` and `cache evict`."""
    parser = sub.add_parser("cache", help="weight shard cache: list entries, plan and run evictions",
                            description="Inspect and trim FastVideo's weight shard cache.")
    actions = parser.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    ls = actions.add_parser("ls", help="list cache entries", description=LS_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(ls, json_flag=False)
    add_format_args(ls, LISTING_FORMATS, output=True)
    ls.add_argument("--sort", choices=LISTING_ORDERS, default=LISTING_ORDERS[0],
                    help="lru: FastVideo's GC order, next victim first (default); size: largest first; key")
    ls.add_argument("--per-entry", action="store_true",
                    help="--format prometheus: also one series per entry (label key)")
    ls.add_argument("--watch", type=seconds("--watch", positive=True), metavar="SECONDS",
                    help="scan again every SECONDS until Ctrl-C (or --count)")
    ls.add_argument("--count", type=whole_number(1), metavar="N", help="with --watch: stop after N scans")
    _wide_flag(ls)
    ls.set_defaults(func=run_ls)
    ev = actions.add_parser("evict", help="plan or run an eviction (dry run unless --yes)",
                            description=EVICT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(ev)
    add_selector_args(ev)
    add_force(ev, "also evict entries in use or being written; allow a mount point or empty-looking root")
    add_yes(ev)
    add_wait(ev, "with --yes: wait up to SECONDS for another eviction of this root to finish "
                 "(default 0: exit 1 at once)", default=0.0)
    _wide_flag(ev)
    add_journal_args(ev)
    ev.set_defaults(func=run_evict)
    ver = actions.add_parser("verify", help="check shard headers against their manifests (read-only)",
                             description=VERIFY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ver.add_argument("root", nargs="?", metavar="ROOT", help=f"cache root (default: ${ENV_ROOT})")
    add_key_option(ver, "verify this entry (repeatable)")
    add_deep(ver, "also read every byte of every shard (I/O errors)")
    add_json(ver)
    ver.set_defaults(func=run_verify)


def _wide_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wide", action="store_true",
                        help="on a terminal, show every column at full width (piped output always is)")


def _width(args: argparse.Namespace) -> int | None:
    """The width text tables fit: the terminal's, unless --wide or stdout is not a terminal."""
    return None if getattr(args, "wide", False) else terminal_width()


def _common(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    parser.add_argument("root", nargs="?", metavar="ROOT", help=f"cache root (default: ${ENV_ROOT})")
    add_grace(parser, "a .tmp or use newer than this means in use (default 10m)", default="10m")
    if json_flag:
        add_json(parser)


def _root_arg(args: argparse.Namespace) -> str | None:
    """ROOT, else the console's ``--cache-root``; the core falls back to $FASTVIDEO_WEIGHT_SHARD_CACHE."""
    return args.root or getattr(args, "cache_root", None)


def _root(args: argparse.Namespace) -> str:
    return resolve_root(_root_arg(args))


def _env_cap() -> tuple[int | None, str | None]:
    """The cap FastVideo's GC applies here, or (None, why not)."""
    try:
        return int(cap_bytes(default_max_gb())), None
    except FvError as exc:
        return None, str(exc)


# ---------------------------------------------------------------- ls


def run_ls(args: argparse.Namespace, _invocation: Invocation) -> int:
    """`cache ls`: exit 0 unless the root itself is missing or unlistable (with --watch: the last scan)."""
    fmt = output_format(args)
    grace = parse_duration(args.grace, flags.GRACE)
    if args.count is not None and args.watch is None:
        raise UsageError("--count: only with --watch")
    if args.per_entry and fmt != "prometheus":
        raise UsageError("--per-entry: only with --format prometheus")
    root = _root(args)
    if args.watch is None:
        _show_ls(args, fmt, scan_cache(root, grace))
        return EXIT_OK
    return _watch(args, fmt, root, grace)


def _show_ls(args: argparse.Namespace, fmt: str, scan: CacheScan, *, watching: bool = False) -> None:
    """One listing in ``fmt``, to stdout or (--output) through the output-file door."""
    entries = listing_order(scan.entries, args.sort)
    if fmt == "prometheus":
        text = prometheus_text(scan, cap=_env_cap()[0], per_entry=args.per_entry)
    elif fmt == "csv":
        text = listing_csv(scan, entries)
        if not args.output:  # the rows, then the scan's warnings on stderr (as the text table)
            write_out(text)
            sys.stdout.flush()
            warn(*scan.errors, *scan.warnings)
            return
    elif fmt == "json":
        head = ls_payload(scan, entries, with_entries=False)
        if not args.output:
            emit_json_stream(head, "entries", entries, encode=CacheEntry.json_text)
            return
        text = "".join(json_chunks(head, "entries", entries, encode=CacheEntry.json_text))
    else:
        rendered = render_ls(scan, entries, width=None if args.output else _width(args))
        if not args.output:
            _say_listing(rendered, watching)
            warn(*scan.errors, *scan.warnings)
            return
        warn(*scan.errors, *scan.warnings)
        text = rendered + "\n"
    if args.output:
        write_output_file(args.output, text)
    else:
        write_out(text)
        sys.stdout.flush()


def _say_listing(rendered: Block, watching: bool) -> None:
    if not watching:
        say(rendered)
        return
    if sys.stdout.isatty():  # a live view: clear the screen and home the cursor, then redraw
        write_out("\x1b[H\x1b[2J")
        say(rendered, "", "(watching; Ctrl-C to stop)")
    else:  # a log: one timestamped block per scan
        say(f"=== {utc_text(time.time())} ===", rendered, "")
    sys.stdout.flush()


def _watch(args: argparse.Namespace, fmt: str, root: str, grace: float) -> int:
    """Scan every --watch seconds; a failed scan is reported and watching goes on.

    Ends after --count scans or at Ctrl-C; the exit code is that of the last scan (0 ok, 1 failed).
    Ctrl-C is how a live view is closed; SIGTERM and SIGHUP (scancel, timeout, a dropped ssh
    session) stop it like every command: 143 / 129 from the dispatcher.
    """
    import signal

    from fvconsole.core.shared import as_interrupted

    done = 0
    last = EXIT_OK
    next_start = time.monotonic()
    try:
        while args.count is None or done < args.count:
            if done:
                time.sleep(max(0.0, next_start - time.monotonic()))
            next_start = max(next_start + args.watch, time.monotonic())
            done += 1
            try:
                _show_ls(args, fmt, scan_cache(root, grace), watching=True)
                last = EXIT_OK
            except FvError as exc:
                last = EXIT_REFUSED
                _watch_error(fmt, exc)
    except KeyboardInterrupt as exc:
        if as_interrupted(exc).signum != signal.SIGINT:
            raise
    return last


def _watch_error(fmt: str, exc: FvError) -> None:
    stamp = utc_text(time.time())
    if fmt == "json":
        emit_json({"error": exc.message, "code": exc.error_code, "time": stamp})
    say(f"error: {stamp}: {exc.message} (still watching)", err=True)


def ls_payload(scan: CacheScan, entries: list, *, with_entries: bool = True) -> dict[str, Any]:
    """``cache ls --json``'s object (without ``entries`` when the caller streams them)."""
    cap, cap_error = _env_cap()
    return scan.envelope(entries, cap=cap, cap_error=cap_error, with_entries=with_entries)


def render_ls(scan: CacheScan, entries: list, *, width: int | None = None) -> Block:
    """The listing; fitted to a terminal's ``width`` (a long note clipped, then wrapped), or whole
    without one (piped, ``--wide``, ``--output``): every note in full, one row per line. Its columns
    are core/cache/columns.py's (the console's and the fleet CSV's too)."""
    rows = [listing_cells(e, scan.scanned_at, fitted=width is not None) for e in entries]
    lines = [f"cache {scan.root} on {socket.gethostname()}"]
    if rows:
        lines.append(format_table(tuple(c.header for c in LISTING), rows,
                                  right=tuple(i for i, c in enumerate(LISTING) if c.right), width=width,
                                  droppable=DROPPABLE, wrap=next(c.header for c in LISTING if c.wrap)))
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
    return f"total {human_bytes(scan.total_bytes)} in {plural(count, 'entry', 'entries')}; {cap_text}{free}"


def _ls_extras(scan: CacheScan) -> list[str]:
    lines = []
    if scan.leftovers:
        lines.append("leftovers of interrupted evictions (removed by the next `cache evict`):")
        lines += [f"  {x.name}  {human_bytes(x.bytes)}" for x in scan.leftovers]
    if scan.foreign:
        counted = set(scan.foreign_gc_counted)

        def shown(name: str) -> str:
            return f"  {name}  (FastVideo's GC counts this and may delete it)" if name in counted else f"  {name}"

        lines.append("foreign (not cache entries; never touched by fvconsole):")
        lines += elided(scan.foreign, shown, lambda n: f"  ... {n} more")
    mounted = [(e.key, e.mounts) for e in scan.entries if e.mounts]
    mounted += [(x.name, x.mounts) for x in scan.leftovers if x.mounts]
    if mounted:
        lines.append("mount points inside (never evicted: eviction never crosses a mount):")
        lines += [f"  {name}: {', '.join(mounts)}" for name, mounts in mounted]  # block() sanitises
    held = [e for e in scan.entries if e.in_use_by]
    if held:
        lines.append("in use by live processes on this node (not evicted without --force):")
        lines += [f"  {e.key}: {holders_line(e.in_use_by)}" for e in held]  # block() sanitises
    return lines


def holders_line(holders: tuple, limit: int = 3) -> str:
    """``mapped by pid 4242 (python), open by pid 17 (cat) and 2 more``."""
    parts = [f"{h.how} by pid {h.pid} ({h.command})" for h in holders[:limit]]
    more = f" and {len(holders) - limit} more" if len(holders) > limit else ""
    return ", ".join(parts) + more


# ---------------------------------------------------------------- evict


def run_evict(args: argparse.Namespace, invocation: Invocation) -> int | Interruption:
    """`cache evict`: 0 ok (dry run too), 1 refused, 2 usage, 3 failed part-way."""
    request = evict_request(args)
    width = _width(args)
    if not args.yes:
        _show_preview(request.preview(), as_json=args.json, width=width)
        return EXIT_OK
    # The root's lock is taken before the scan: the plan is made under it (LockBusy: exit 1).
    operation = request.operation(command=invocation.command_line,
                                  progress=None if args.json else progress_printer("evicting"))
    run = run_locked(operation, wait=args.wait, journal=appender(invocation.journal))
    if run.stop is not None:  # Ctrl-C, SIGTERM, SIGHUP: what was evicted so far, as data too
        return _stopped(run)
    done = LockedEviction.of(run)
    if done.result.evicted:
        invocation.record_write(done.done_text)
    _show_result(done, as_json=args.json, width=width)
    return EXIT_OK


def evict_request(args: argparse.Namespace) -> EvictionRequest:
    """The command line's eviction as the core's typed request; usage errors (exit 2) before any disk
    access or lock: a bad --grace, then a bad selector, then no root."""
    grace = parse_duration(args.grace, flags.GRACE)
    selectors = selectors_from(args)
    return EvictionRequest(resolve_root(_root_arg(args)), selectors, grace, args.force)


def _show_preview(preview: EvictionPreview, *, as_json: bool, width: int | None) -> None:
    """The dry run: the plan, and the eviction running now, if one is."""
    if as_json:
        emit_json(preview.envelope())
    else:
        say(render_plan(preview.plan, width=width))
        if preview.running:
            say(f"note: an eviction of this root is running now ({preview.running.describe()}); "
                "--yes would wait for it (--wait) or exit 1", err=True)
    warn(*preview.warnings)


def _show_result(done: LockedEviction, *, as_json: bool, width: int | None) -> None:
    """What ``--yes`` did, its warnings, and exit 3 (PartialFailure) when an entry could not be evicted."""
    plan, result = done.plan, done.result
    warn(*done.warnings)
    warn_if_unwritten(done.journal)
    payload = done.envelope()
    if result.errors:
        if not as_json:
            say(render_result(done, width=width))
        raise PartialFailure(f"{plan.root}: {plural(len(result.errors), 'entry', 'entries')} could not be evicted "
                             f"(first: {result.errors[0]})", report=payload)
    if as_json:
        emit_json(payload)
    else:
        say(render_result(done, width=width))
    warn(*done.missed_target)


def _stopped(run: Run[EvictionPlan, EvictionResult]) -> Interruption:
    """The eviction's result so far as the interruption's JSON (and a journal warning)."""
    assert run.stop is not None
    stopped = run.stop.account
    if not isinstance(stopped, StoppedEviction):  # stopped before it began: nothing to say but the signal
        return Interruption(run.stop)
    warn_if_unwritten(run.journal)
    return Interruption(run.stop, stopped.envelope(run.journal))


#: On a terminal a reason longer than this is clipped (then wrapped to the width); piped or --wide, never.
REASON_CLIP = 100


def _reason(text: str, width: int | None) -> str:
    """A REASON cell: clipped on a terminal (``width``), whole when piped or with --wide (as --help says)."""
    return clipped(text, REASON_CLIP) if width is not None else text


def _skipped_table(skipped: tuple, width: int | None = None) -> list[str]:
    if not skipped:
        return []
    return ["skipped:", format_table(("KEY", "REASON"), [(s.key, _reason(s.reason, width)) for s in skipped],
                                     width=width, wrap="REASON")]


def render_plan(plan: EvictionPlan, *, width: int | None = None) -> Block:
    """The dry run, in the plan's own words (``EvictionPlan.title`` ...) laid out as lines and tables."""
    lines = [plan.title]
    if plan.cap_bytes is not None:
        lines.append(f"total {human_bytes(plan.total_bytes)}; cap {human_bytes(plan.cap_bytes)}")
    if plan.free_line is not None:
        lines.append(plan.free_line)
        if plan.free_space is not None:
            lines.append(plan.free_space.summary())
    if plan.evict:
        lines.append(format_table(("KEY", "SIZE", "REASON"),
                                  [(p.key, human_bytes(p.bytes), _reason(p.reason, width)) for p in plan.evict], right=(1,),
                                  width=width, wrap="REASON"))
    else:
        lines.append("nothing to evict")
    lines += _skipped_table(plan.skipped, width)
    if plan.evict:  # with nothing planned, --yes would do nothing: no call to run it
        lines.append(f"{plan.would_free}; re-run with --yes")
    return block(lines)


def render_result(done: LockedEviction, *, width: int | None = None) -> Block:
    """What ``--yes`` did, in the result's own words (``EvictionResult.title`` ...) laid out as lines and tables."""
    result = done.result
    lines = [result.title]
    if result.evicted:
        lines.append(format_table(("KEY", "FREED", "REASON"),
                                  [(e.key, human_bytes(e.bytes), _reason(e.reason, width)) for e in result.evicted], right=(1,),
                                  width=width, wrap="REASON"))
    lines += _skipped_table(result.skipped, width)
    lines += [f"error: {err}" for err in result.errors]
    lines.append(result.freed_line)
    if done.target_line() is not None:
        lines.append(done.target_line())
    return block(lines)


# ---------------------------------------------------------------- verify


def run_verify(args: argparse.Namespace, _invocation: Invocation) -> int:
    """`cache verify`: exit 0 when every entry verified, 1 otherwise."""
    keys = parse_keys(args.key)
    root = _root(args)
    scan = scan_cache(root, DEFAULT_GRACE_SECONDS, check_headers=False)
    progress = progress_printer("verify", plain_lines=True, in_bytes=True) if args.deep else None
    result = verify_cache(scan, keys, deep=args.deep, progress=progress)
    doc = result.envelope()
    if not args.json:
        write_out(render_verify(result) + "\n")
    if not result.ok:
        raise command_failed(EXIT_REFUSED, verify_failure(result), doc if args.json else None)
    if args.json:
        emit_json(doc)
    return EXIT_OK


def verify_failure(result: CacheVerification) -> str:
    """The `error:` line of a failed verification: how many verifiable entries failed, and the first real problem."""
    failed = result.failed
    checked = len(result.entries) - len(result.not_verifiable) + len(result.missing)
    head = f"{len(failed) + len(result.missing)} of {plural(checked, 'verifiable entry', 'verifiable entries')} failed verification"
    if failed:
        problem = failed[0].problems[0].text()
        return f"{head}; first: {failed[0].key}: {problem}"
    return f"{head}; first: {result.missing[0]}: not an entry of {result.root}"


def render_verify(result: CacheVerification) -> Block:
    """One line per entry (ok, its problem count, or why it cannot be verified), each problem indented under it."""
    lines: list[str] = []
    for entry in result.entries:
        shards = plural(len(entry.shards_checked), "shard")
        read = f", {human_bytes(entry.bytes_read)} read" if entry.deep else ""
        if entry.not_verifiable is not None:
            lines.append(f"{entry.key}  not verifiable: {entry.not_verifiable}")
            continue
        if entry.ok:
            lines.append(f"{entry.key}  ok ({shards} checked{read})")
            continue
        lines.append(f"{entry.key}  {plural(len(entry.problems), 'problem', 'problems')} ({shards} checked{read})")
        lines.extend("  " + p.text() for p in entry.problems)  # whole: the problem is the point
    lines.extend(f"{key}  not an entry of {result.root}" for key in result.missing)
    bad = len(result.failed) + len(result.missing)
    unverifiable = len(result.not_verifiable)
    checked = len(result.entries) - unverifiable + len(result.missing)
    apart = f"; {unverifiable} not verifiable (no manifest.json yet, or empty)" if unverifiable else ""
    if not result.entries and not result.missing:
        lines.append(f"no cache entries in {result.root}")
    elif bad:
        lines.append(f"{bad} of {plural(checked, 'verifiable entry', 'verifiable entries')} failed verification{apart}")
    elif checked:
        lines.append(f"all {plural(checked, 'verifiable entry', 'verifiable entries')} verified{apart}")
    else:
        lines.append(f"nothing verifiable: {plural(unverifiable, 'entry', 'entries')}, none with a manifest.json yet")
    return block(lines)
