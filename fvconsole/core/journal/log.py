"""The journal: one JSON line per executed eviction or migration, saying who did what, where.

Why: evictions run from cron, Slurm epilogs, the console and by hand, migrations from
several login nodes; afterwards an operator asks "who removed this entry?" or "which
migration wrote this set?". Each front end appends a :class:`JournalRecord` after the
action (the core actions themselves stay free of this side effect: the journal is an
account of what a *command* did, and only the front end knows its command line and exit
code).

The journal knows no action: each domain builds its own record next to its result types
(``core/cache/locked.py``, ``core/fleet/record.py``, ``core/migration/record.py``) from the
generic :class:`JournalRecord`; a test keeps this module free of them.

Where: ``--journal PATH``, else ``$FVCONSOLE_JOURNAL``, else
``$XDG_STATE_HOME/fvconsole/journal.jsonl`` (default ``~/.local/state/fvconsole/``). A team
points the variable at a shared file (create it once with a group that may append, e.g.
``install -m 0664 -g team /dev/null /shared/fv/journal.jsonl``; fvconsole never changes an
existing journal's owner or mode).

How a line is written: encoded as one ASCII JSON line of at most ``PIPE_BUF`` bytes (4096
on Linux; a record that would be longer has its lists shortened, with their full counts
kept, and then its longest strings cut, never split across writes), appended with a single
``write`` on an ``O_APPEND`` descriptor (atomic: lines of concurrent writers never
interleave), under an ``fcntl`` lock (on NFS, where ``O_APPEND`` alone is not atomic
between clients, the lock makes the client revalidate the file's size first; it is
waited for at most ~2 s, then the line is written anyway), then ``fsync``-ed. The journal
must be a regular file, reached without following a symlink as its last component (the
checks of the output-file door, :func:`core.shared.output_file.open_append`). A
journal that cannot be written never undoes the action: :func:`append_record` returns the
problem for the front end to report.

Reading (:func:`read_journal`) is bounded: a regular file only, at most the last
``MAX_READ_BYTES``, lines over ``MAX_LINE_BYTES`` or not a valid record counted as malformed
and skipped.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fvconsole.core.shared.atomic import fsync_dir
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.host import current_identity, user_name
from fvconsole.core.shared.humanize import utc_text
from fvconsole.core.shared.locks import lock_open_file, unlock_open_file
from fvconsole.core.shared.output_file import OutputRefused, open_append
from fvconsole.core.shared.safe_read import file_kind
from fvconsole.core.shared.untrusted import MAX_EPOCH, Fields, UntrustedError, decode

ENV_JOURNAL = "FVCONSOLE_JOURNAL"
FORMAT = "fvconsole-journal/v1"
#: The atomic-append bound: a line of at most this many bytes is one write, never interleaved.
LINE_MAX = getattr(select, "PIPE_BUF", 4096)
#: Reading: at most the journal's last 64 MiB (about 100,000 lines); older lines are skipped and counted.
MAX_READ_BYTES = 64 << 20
MAX_LINE_BYTES = 64 << 10
#: Lists a record may shorten to fit LINE_MAX (each keeps "<name>_total").
LISTS = ("items", "errors", "nodes")
_LOCK_WAIT = 2.0

#: Actions front ends record.
CACHE_EVICT = "cache evict"
FLEET_EVICT = "fleet cache evict"
MIGRATE = "migrate"
CHECKPOINTS_PRUNE = "checkpoints prune"


def default_journal_path(env: Mapping[str, str] | None = None) -> str:
    """``$FVCONSOLE_JOURNAL``, else ``$XDG_STATE_HOME/fvconsole/journal.jsonl`` (XDG default ``~/.local/state``)."""
    env = os.environ if env is None else env
    explicit = env.get(ENV_JOURNAL)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    state = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):  # the XDG spec: a relative value is invalid and ignored
        state = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "fvconsole", "journal.jsonl")


def journal_path(arg: str | None, env: Mapping[str, str] | None = None) -> str:
    """``--journal PATH`` if given, else :func:`default_journal_path`."""
    return os.path.abspath(os.path.expanduser(arg)) if arg else default_journal_path(env)


@dataclass(frozen=True)
class JournalRecord:
    """One journal line. ``items``: what was removed or written (entry keys, file names,
    ``node:key``); ``*_total``: their full counts when a long list was shortened to fit."""

    action: str
    target: str  # the cache root (fleet: the --cache-root template) or the migration's output dir
    result: str
    exit_code: int
    bytes: int  # freed (eviction) or written (migration)
    items: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    command: str = ""
    time: float = 0.0
    user: str = ""
    host: str = ""
    pid: int = 0
    items_total: int | None = None
    errors_total: int | None = None
    #: Action-specific numbers (free space before/after, planned bytes, per-node outcomes, ...).
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def now(cls, **fields: Any) -> JournalRecord:
        """A record stamped with this process: time, user, host, pid."""
        record = cls(**fields)
        return replace(record, time=time.time(), user=user_name(), host=current_identity().hostname, pid=os.getpid())

    @property
    def time_text(self) -> str:
        return utc_text(self.time)

    @property
    def item_count(self) -> int:
        return self.items_total if self.items_total is not None else len(self.items)

    @property
    def error_count(self) -> int:
        return self.errors_total if self.errors_total is not None else len(self.errors)

    def to_json(self) -> dict[str, Any]:
        # Hand-written: the journal's line format (`format`, `epoch` and its text, the totals), read back by from_json.
        return {
            "format": FORMAT, "time": self.time_text, "epoch": round(self.time, 3), "user": self.user,
            "host": self.host, "pid": self.pid, "command": self.command, "action": self.action,
            "target": self.target, "result": self.result, "exit_code": self.exit_code, "bytes": self.bytes,
            "items": list(self.items), "items_total": self.item_count,
            "errors": list(self.errors), "errors_total": self.error_count,
            "details": dict(self.details),
        }

    @classmethod
    def from_json(cls, data: Any, shown: str = "journal", what: str = "journal line") -> JournalRecord:
        """Parse one line's object; UntrustedError (a ValueError) naming the field when it is not a record.

        Every number is range-checked here (an ``epoch`` of ``1e400`` or ``10**400`` made
        ``history`` and the History view fail as a whole when it was formatted).
        """
        f = Fields(data, shown, what)
        if data.get("format") != FORMAT:
            f.fail("format", f"is not {FORMAT!r}")
        return cls(action=f.str("action"), target=f.str("target"), result=f.str("result"),
                   exit_code=f.int("exit_code", max=255), bytes=f.int("bytes"),
                   items=f.strings("items", ()), errors=f.strings("errors", ()),
                   command=f.str("command"), time=f.number("epoch", max=MAX_EPOCH), user=f.str("user"),
                   host=f.str("host"), pid=f.int("pid"), items_total=f.int("items_total", None),
                   errors_total=f.int("errors_total", None), details=f.object("details", {}))


def encode_line(record: JournalRecord, limit: int = LINE_MAX) -> bytes:
    """The record as one ASCII JSON line of at most ``limit`` bytes (newline included).

    Lists are halved (longest first, counts kept) until it fits, then the longest strings
    are cut; the line is never split. ``details`` holds only small numbers and short texts
    from the front ends, and is dropped (``details_dropped``) as a last resort.
    """
    doc = record.to_json()

    def encoded() -> bytes:
        return (json.dumps(doc, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
                + "\n").encode("ascii")

    line = encoded()
    while len(line) > limit:
        lists = [(len(json.dumps(v)), k) for k, v in _lists(doc) if v]
        if lists:
            _, (where, name) = max(lists, key=lambda pair: pair[0])
            where[name] = where[name][: len(where[name]) // 2]
            doc["shortened"] = True
        elif doc.get("details"):
            doc["details"] = {}
            doc["details_dropped"] = True
        else:
            name = max(("command", "target"), key=lambda k: len(doc[k]))
            if len(doc[name]) <= 64:
                raise ValueError("journal record cannot be shortened to one line")  # not reachable for real records
            doc[name] = doc[name][: len(doc[name]) // 2] + "..."
            doc["shortened"] = True
        line = encoded()
    return line


def _lists(doc: dict[str, Any]) -> list[tuple[tuple[dict[str, Any], str], list[Any]]]:
    """The shortenable lists of a record document (top level and in ``details``)."""
    found = [((doc, k), doc[k]) for k in LISTS if isinstance(doc.get(k), list)]
    details = doc.get("details")
    if isinstance(details, dict):
        found += [((details, k), v) for k, v in details.items() if isinstance(v, list)]
    return found


@dataclass(frozen=True)
class JournalWrite:
    """What happened to a record: written to ``path``, or the problem (the action itself stands)."""

    path: str
    written: bool
    error: str | None = None
    shortened: bool = False

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


def append_record(record: JournalRecord, path: str) -> JournalWrite:
    """Append ``record`` as one line to the journal at ``path``; never raises for an I/O problem."""
    try:
        line = encode_line(record)
    except (ValueError, TypeError) as exc:
        return JournalWrite(path, False, f"cannot encode the record ({exc})")
    shortened = b'"shortened":true' in line or b'"details_dropped":true' in line
    try:
        _append(path, line)
    except OSError as exc:
        why = exc.strerror or str(exc)
        return JournalWrite(path, False, f"{why}{f' ({exc.filename})' if exc.filename and exc.filename != path else ''}")
    return JournalWrite(path, True, None, shortened)


def appender(path: str | None) -> Callable[[JournalRecord], JournalWrite] | None:
    """What a run appends its record with (``core/shared/operation.py: run_locked``'s ``journal``); None: no line."""
    if path is None:
        return None
    return lambda record: append_record(record, path)


def _append(path: str, line: bytes) -> None:
    parent = os.path.dirname(path)
    created_dirs = _make_parents(parent)
    try:
        fd = open_append(path, "journal")  # the output-file door: a regular file only, never followed
    except OutputRefused as exc:
        raise OSError(errno.EINVAL, f"the journal {exc.why}") from None
    try:
        new = os.fstat(fd).st_size == 0
        locked = _lock(fd)
        try:
            written = os.write(fd, line)
            if written != len(line):  # a full disk mid-line: say so (O_APPEND keeps others' lines whole)
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)")
            os.fsync(fd)
        finally:
            if locked:
                unlock_open_file(fd)
    finally:
        os.close(fd)
    if new or created_dirs:
        with contextlib.suppress(OSError):
            fsync_dir(parent)


def _make_parents(parent: str) -> bool:
    """Create the journal's directory (mode 0700 for the private default, like XDG state dirs)."""
    if os.path.isdir(parent):
        return False
    os.makedirs(parent, mode=0o700, exist_ok=True)
    return True


def _lock(fd: int) -> bool:
    """An exclusive lock on the journal, waited for briefly (never a hang on a broken lockd)."""
    return lock_open_file(fd, _LOCK_WAIT)


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class JournalRead:
    """The records of a journal that matched, oldest first, and what was left out."""

    path: str
    records: tuple[JournalRecord, ...]
    exists: bool = True
    malformed: int = 0  # lines that are not a valid record (skipped)
    skipped_bytes: int = 0  # older part of a journal beyond MAX_READ_BYTES (not read)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, rename={"path": "journal", "malformed": "malformed_lines"}, count=len(self.records))


def read_journal(path: str, *, since: float | None = None, target: str | None = None,
                 max_bytes: int = MAX_READ_BYTES) -> JournalRead:
    """Records of the journal at ``path`` (oldest first), from ``since`` (epoch) and for ``target``.

    ``target`` (as given, made absolute and resolved here) matches a record's ``target`` or its
    ``details.real_target`` (resolved when it was written; never resolved here, so reading a
    hostile journal touches no other path). A missing journal
    is an empty read (``exists`` False); OSError propagates for any other unreadable one,
    and a journal that is not a regular file is an OSError too.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return JournalRead(path, (), exists=False)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"the journal is {file_kind(st.st_mode)}, not a regular file", path)
        skipped = max(0, st.st_size - max_bytes)
        if skipped:
            handle.seek(skipped)
        data = handle.read(max_bytes)
    lines = data.split(b"\n")
    if skipped and lines:
        skipped += len(lines[0]) + 1  # the first line was cut by the seek
        lines = lines[1:]
    wanted = _targets(target)
    records: list[JournalRecord] = []
    malformed = 0
    for raw in lines:
        if not raw.strip():
            continue
        record = _parse_line(raw)
        if record is None:
            malformed += 1
            continue
        if since is not None and record.time < since:
            continue
        if wanted is not None and record.target not in wanted and record.details.get("real_target") not in wanted:
            continue
        records.append(record)
    return JournalRead(path, tuple(records), True, malformed, skipped)


def _targets(target: str | None) -> set[str] | None:
    if target is None:
        return None
    absolute = os.path.abspath(os.path.expanduser(target))
    return {target, absolute, os.path.realpath(absolute)}


def _parse_line(raw: bytes) -> JournalRecord | None:
    if len(raw) > MAX_LINE_BYTES:
        return None
    try:
        return JournalRecord.from_json(decode(raw, "journal", "journal line"))
    except UntrustedError:
        return None


def shorten(items: Sequence[str], limit: int = 1000) -> tuple[tuple[str, ...], int]:
    """(at most ``limit`` items, the full count): keeps a record's lists bounded before encoding."""
    return tuple(items[:limit]), len(items)


def result_for(exit_code: int) -> str:
    """"ok" (exit 0), "partial" (exit 3: failed part-way), else "failed"."""
    return "ok" if exit_code == 0 else "partial" if exit_code == 3 else "failed"
