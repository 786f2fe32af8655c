"""A large cache root listed by several processes, each taking a share of the entry names.

Why: listing an entry is CPU-bound Python work (a directory listing, two bounded reads, two
small JSON decodes: ~50 µs), so a root of 200,000 entries kept one core busy for 14 s while
the node's other cores idled. Like ``fd`` or ``dust``, the scan spreads the entries over the
CPUs this process may use (``sched_getaffinity``: a Slurm step's cpuset counts, not the
node's). The result is the same value a serial scan gives; only the wall time differs.

How: after the scan's shared state is built (the root open, mountinfo, the /proc pass), the
scan forks one worker per extra CPU (at most :data:`MAX_WORKERS`). A key-shaped name belongs
to the lane its last hex digit falls in (keys are hashes: the lanes are even); everything
else (leftovers, foreign files, the lock) is the parent's. A worker opens the root anew
through the parent's fd (its own directory offset, the same directory), classifies its own
names exactly as the parent would, and sends what it found back through a pipe as batches of
plain field tuples (``marshal``: data only, nothing in it can run; the records are rebuilt
from their fields); it writes nothing else, anywhere. The parent merges the batches after its own share.

When not: fork keeps only the calling thread, so a process with other threads (the console
scans in a worker thread; the fleet node runner has its watchdog) stays serial, as do small
roots (the root's link count says how many subdirectories it has), one-CPU jobs and
platforms without ``fork``. A worker that fails in any way (killed, out of memory, a broken
pipe) has its share scanned again by the parent: slower, never different.
"""

from __future__ import annotations

import contextlib
import dataclasses
import marshal
import os
import signal
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.cache.files import open_readonly
from fvconsole.core.cache.model import CacheEntry, ManifestSummary
from fvconsole.core.process_use import Holder

#: Subdirectories (``st_nlink - 2``) below which one process is faster than forking.
MIN_PARALLEL_ENTRIES = 8192
#: Worker processes at most (beyond this the parent's merge and output dominate).
MAX_WORKERS = 7
#: Entries per batch a worker sends.
BATCH = 2048
_HEX = "0123456789abcdef"
_FRAME = struct.Struct("<Q")


@dataclass
class Share:
    """What one lane found: the scan's lists, for its names only."""

    entries: list[Any] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    gc_counted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


#: Lists the root open as the fd into the Share, leaving out the names the predicate takes.
ShareScan = Callable[[int, Callable[[str], bool], Share], None]


def lanes_for(root_st: os.stat_result) -> int:
    """How many processes should list this root (1: serial)."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return 1
    # A filesystem that does not count subdirectories (btrfs) gives a directory nlink 1: -1 here.
    if 0 <= root_st.st_nlink - 2 < MIN_PARALLEL_ENTRIES:
        return 1
    return max(1, min(allowed_cpus(), MAX_WORKERS + 1))


def allowed_cpus() -> int:
    """CPUs this process may run on (a Slurm step's cpuset, a ``taskset``), not the node's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def digit_lanes(lanes: int) -> list[frozenset[str]]:
    """The last hex digits each lane takes, lane 0 (the parent) first; together all sixteen."""
    groups: list[set[str]] = [set() for _ in range(lanes)]
    for i, digit in enumerate(_HEX):
        groups[i % lanes].add(digit)
    return [frozenset(g) for g in groups]


@dataclass
class Worker:
    """A forked lane: its pid, the read end of its pipe, and the digits it took."""

    pid: int
    fd: int
    digits: frozenset[str]


def start(root_fd: int, digit_sets: list[frozenset[str]], scan_share: ShareScan,
          others: Callable[[frozenset[str]], Callable[[str], bool]]) -> list[Worker]:
    """Fork one worker per digit set; ``others(digits)`` says which names are not that worker's.
    A fork that fails leaves that share to the caller (no worker for it)."""
    workers: list[Worker] = []
    for digits in digit_sets:
        try:
            read_end, write_end = os.pipe()
        except OSError:
            break
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            break
        if pid == 0:  # the worker: never returns
            os.close(read_end)
            _worker_main(root_fd, write_end, scan_share, others(digits))
        os.close(write_end)
        workers.append(Worker(pid, read_end, digits))
    return workers


def _worker_main(root_fd: int, out: int, scan_share: ShareScan, skip: Callable[[str], bool]) -> None:
    code = 1
    try:
        _close_all_but(root_fd, out)  # a lock the caller holds (an evictor's) is never kept alive by a worker
        fd = open_readonly(".", directory=True, dir_fd=root_fd)  # its own offset in the same directory
        share = Share()
        scan_share(fd, skip, share)
        entries = share.entries
        for i in range(0, len(entries), BATCH):
            _send(out, ("entries", [_entry_fields(e) for e in entries[i:i + BATCH]]))
        _send(out, ("rest", (share.foreign, share.gc_counted, share.errors)))
        code = 0
    except BaseException:  # noqa: BLE001 - anything at all: the parent scans this share again
        code = 1
    finally:
        os._exit(code)


def _close_all_but(*keep: int) -> None:
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)


def _send(fd: int, message: Any) -> None:
    data = marshal.dumps(message)
    view = memoryview(_FRAME.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def collect(worker: Worker, into: Share) -> bool:
    """Merge a worker's share into ``into``; False (nothing merged) when it did not finish cleanly."""
    got = Share()
    complete = False
    try:
        with os.fdopen(worker.fd, "rb", buffering=1 << 20, closefd=False) as pipe:
            while True:
                head = pipe.read(_FRAME.size)
                if len(head) < _FRAME.size:
                    break
                (length,) = _FRAME.unpack(head)
                data = pipe.read(length)
                if len(data) < length:
                    break
                kind, value = marshal.loads(data)
                if kind == "entries":
                    got.entries.extend(map(_entry_from_fields, value))
                else:
                    got.foreign, got.gc_counted, got.errors = value
                    complete = True
    except (OSError, EOFError, ValueError, TypeError):
        complete = False
    if not complete:  # a worker still writing into a pipe nobody reads would never exit
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
    reaped = _reaped_ok(worker.pid)
    worker.pid = 0  # reaped: stop() must not signal a pid that may be reused
    if not reaped or not complete:
        return False
    into.entries.extend(got.entries)
    into.foreign.extend(got.foreign)
    into.gc_counted.extend(got.gc_counted)
    into.errors.extend(got.errors)
    return True


def _reaped_ok(pid: int) -> bool:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return False
    return os.waitstatus_to_exitcode(status) == 0


def stop(workers: list[Worker]) -> None:
    """Kill and reap the workers not yet reaped (the scan was interrupted) and close every pipe."""
    for worker in workers:
        if worker.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(worker.pid, 0)
        with contextlib.suppress(OSError):
            os.close(worker.fd)
    workers.clear()


def _entry_fields(entry: CacheEntry) -> tuple:
    """A CacheEntry as marshal-able data: its fields in order, the nested records as tuples too."""
    values = [getattr(entry, name) for name in _ENTRY_FIELDS]
    summary = entry.summary
    values[_SUMMARY] = None if summary is None else (summary.params, summary.numel, summary.dtypes, summary.kinds)
    values[_HOLDERS] = tuple((h.pid, h.command, h.how) for h in entry.in_use_by)
    return tuple(values)


def _entry_from_fields(values: tuple) -> CacheEntry:
    values = list(values)
    if values[_SUMMARY] is not None:
        values[_SUMMARY] = ManifestSummary(*values[_SUMMARY])
    values[_HOLDERS] = tuple(Holder(*h) for h in values[_HOLDERS])
    return CacheEntry(*values)


_ENTRY_FIELDS = tuple(f.name for f in dataclasses.fields(CacheEntry))
_SUMMARY = _ENTRY_FIELDS.index("summary")
_HOLDERS = _ENTRY_FIELDS.index("in_use_by")
