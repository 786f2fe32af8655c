"""The journal: one JSON line per execution (migration, eviction, fleet eviction), and how an
interrupted run is recorded (:mod:`.interrupts`). Imports only the shared layer.
"""

from __future__ import annotations

from fvconsole.core.journal.interrupts import Interrupted, as_interrupted
from fvconsole.core.journal.interrupts import handlers as interrupt_handlers
from fvconsole.core.journal.log import (
    ENV_JOURNAL,
    JournalRead,
    JournalRecord,
    JournalWrite,
    append_record,
    journal_path,
    read_journal,
)

__all__ = [
    "ENV_JOURNAL",
    "Interrupted",
    "JournalRead",
    "JournalRecord",
    "JournalWrite",
    "append_record",
    "as_interrupted",
    "interrupt_handlers",
    "journal_path",
    "read_journal",
]
