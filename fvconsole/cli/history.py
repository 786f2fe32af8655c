"""`fvconsole history`: list the journal of executed evictions and migrations (read-only)."""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from fvconsole.cli.common import Block, block, emit_json, format_table, say, warn, whole_number
from fvconsole.cli.options import add_journal, add_json
from fvconsole.core.journal import ENV_JOURNAL, JournalRead, JournalRecord, journal_path, read_journal
from fvconsole.core.shared import (
    EXIT_OK,
    FvError,
    UsageError,
    human_bytes,
    is_duration,
    parse_duration,
    plural,
    quote_input,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.cli.outcome import Invocation

HELP = f"""\
List the journal: one line per executed `cache evict --yes`, `fleet cache evict --yes`,
`checkpoints prune --yes` and `migrate --yes` (who, when, on which host, what was removed or
written, bytes, result), newest first (--oldest-first for the other order).
Read-only. The journal is --journal PATH, else ${ENV_JOURNAL}, else
$XDG_STATE_HOME/fvconsole/journal.jsonl (default ~/.local/state/fvconsole/journal.jsonl).

examples:
  fvconsole history
  fvconsole history --since 7d --root /dev/shm/fastvideo-wcache
  fvconsole history --since 2025-06-01 --json
  FVCONSOLE_JOURNAL=/shared/fv/journal.jsonl fvconsole history --limit 20

exit codes: 0 ok (also: no journal yet), 1 the journal cannot be read, 2 usage error.
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("history", help="list the journal of executed evictions and migrations",
                            description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--since", metavar="WHEN",
                        help="only records from WHEN on: a duration ago (12h, 7d) or a UTC date/time "
                             "(2025-06-01, 2025-06-01T12:00:00Z)")
    parser.add_argument("--root", metavar="PATH", help="only records for this cache root or migration output dir")
    parser.add_argument("--limit", type=whole_number(1), metavar="N", help="only the newest N matching records")
    parser.add_argument("--oldest-first", action="store_true",
                        help="list the oldest record first (default: newest first, as the console's History view)")
    add_journal(parser, f"the journal to read (default ${ENV_JOURNAL}, ...; also before the command)")
    add_json(parser)
    parser.set_defaults(func=run_history)


def parse_since(text: str, now: float | None = None) -> float:
    """Epoch seconds: ``now`` minus a duration (``7d``), or a UTC date / ISO time (``2025-06-01``)."""
    value = text.strip()
    if is_duration(value):
        return (time.time() if now is None else now) - parse_duration(value, "--since")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since: {quote_input(text)} is neither a duration ago (90s, 12h, 7d, 1d12h) "
                         "nor a UTC date or time (2025-06-01, 2025-06-01T12:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


#: How to read another journal than the one shown.
CHOOSE_ANOTHER = f"another journal: --journal PATH or ${ENV_JOURNAL} (e.g. a team's shared one)"


def journal_source(arg: str | None) -> str:
    """Why journal_path chose the journal it did, for the header that names it.

    The default is per user, not per run: it mixes every run of that user, which is worth saying.
    """
    if arg:
        return "from --journal"
    if os.environ.get(ENV_JOURNAL):
        return f"from ${ENV_JOURNAL}"
    return "the default: one per user, shared by all of their runs"


def run_history(args: argparse.Namespace, _invocation: Invocation) -> int:
    since = parse_since(args.since) if args.since else None
    path = journal_path(getattr(args, "journal", None))
    try:
        read = read_journal(path, since=since, target=args.root)
    except OSError as exc:
        raise FvError(f"{path}: cannot read the journal ({exc.strerror or exc})") from None
    records = read.records[-args.limit:] if args.limit else read.records
    if not args.oldest_first:  # newest first, as the console's History view lists them
        records = records[::-1]
    if args.json:
        doc = read.to_json()
        doc["records"] = [r.to_json() for r in records]
        doc["count"] = len(records)
        emit_json(doc)
    else:
        say(render_history(read, records, source=journal_source(getattr(args, "journal", None))))
        if read.malformed:
            warn(f"{plural(read.malformed, 'malformed line')} skipped")
    return EXIT_OK


def _row(r: JournalRecord) -> tuple[str, ...]:
    items = str(r.item_count) + (f" ({plural(r.error_count, 'error')})" if r.error_count else "")
    return (r.time_text, f"{r.user}@{r.host}", r.action, r.target, f"{r.result} ({r.exit_code})",
            human_bytes(r.bytes), items)


def render_history(read: JournalRead, records: tuple[JournalRecord, ...], *, source: str | None = None) -> Block:
    """The table (every cell escaped by format_table: the journal may be shared and hostile).

    The header names the journal, why it is that one and how to read another: the default
    is one per user, shared by all of that user's runs.
    """
    lines = [f"journal {read.path}" + (f" ({source})" if source else ""), CHOOSE_ANOTHER]
    if not read.exists:
        lines.append("(no journal yet: nothing has been executed with it)")
    elif records:
        lines.append(format_table(("TIME (UTC)", "WHO", "ACTION", "TARGET", "RESULT", "BYTES", "ITEMS"),
                                  [_row(r) for r in records], right=(5,)))
    else:
        lines.append("(no matching records)")
    if read.skipped_bytes:
        lines.append(f"note: the oldest {human_bytes(read.skipped_bytes)} of the journal were not read "
                     "(only its last part is)")
    return block(lines)
