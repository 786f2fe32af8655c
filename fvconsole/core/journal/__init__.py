"""The journal: one JSON line per execution (migration, eviction, fleet eviction, prune).
Imports only the shared layer.
"""

from __future__ import annotations

from fvconsole.core.journal.log import (
    ENV_JOURNAL,
    JournalRead,
    JournalRecord,
    JournalWrite,
    append_record,
    appender,
    journal_path,
    read_journal,
)

__all__ = [
    "ENV_JOURNAL",
    "JournalRead",
    "JournalRecord",
    "JournalWrite",
    "append_record",
    "appender",
    "journal_path",
    "read_journal",
]
