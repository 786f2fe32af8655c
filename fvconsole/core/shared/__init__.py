"""The shared layer every domain package stands on: errors and reasons, and the doors.

Each hazard has exactly one module here that every caller uses (tests/architecture/test_doors.py
proves nothing goes around it):

- reading an input file: :mod:`.safe_read` (regular files only, bounded, O_NOATIME);
- decoding an untrusted document: :mod:`.untrusted`;
- replacing a file: :mod:`.atomic` (temp file, fsync, rename) and :mod:`.output_file` (a path
  the user named); :mod:`.durable` (when a directory's writes are on disk);
- deleting: :mod:`.removal` (fd-based, never through a symlink, never across a mount);
- taking a lock: :mod:`.locks` (one interface for every kind; holder records that say which host
  and process hold them);
- printing untrusted text: :mod:`.terminal_text` (``printable``);
- which processes hold a file open or mapped: :mod:`.process_use`;
- bounded directory walks: :mod:`.walk`.

Beside them: :mod:`.errors` (exit codes), :mod:`.reasons` (refusals as data), :mod:`.humanize`
(sizes, ages, plurals, elision), :mod:`.host`, :mod:`.mounts`, :mod:`.fields_json`,
:mod:`.progress`, :mod:`.optional` (the extras: torch, pyarrow, ...), :mod:`.fsutil`,
:mod:`.interrupts` (SIGTERM and SIGHUP as an orderly interruption, and sections that defer them),
:mod:`.operation` (the one runner of every action that changes something: locks, plan, execute,
release, journal, signals), :mod:`.flags` (the command line's flags, spelled once).
Nothing here imports another package of ``fvconsole.core``.
"""

from __future__ import annotations

from fvconsole.core.shared import flags
from fvconsole.core.shared.errors import (
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REFUSED,
    EXIT_USAGE,
    FvError,
    PartialFailure,
    UsageError,
)
from fvconsole.core.shared.humanize import (
    age_since,
    clipped,
    elided,
    head_tail,
    human_age,
    human_bytes,
    is_duration,
    parse_duration,
    plural,
    quote_input,
    utc_text,
)
from fvconsole.core.shared.interrupts import SIGNALS, Interrupted, as_interrupted, signal_name
from fvconsole.core.shared.interrupts import handlers as interrupt_handlers
from fvconsole.core.shared.operation import Run, Stop, run_locked
from fvconsole.core.shared.optional import MissingExtra
from fvconsole.core.shared.output_file import write_output
from fvconsole.core.shared.progress import Progress
from fvconsole.core.shared.reasons import (
    BREAK_LOCK,
    FORCE,
    OVERWRITE,
    SKIP_SOURCE_CHECK,
    WAIT,
    Reason,
    invalid,
    min_free_words,
)
from fvconsole.core.shared.removal import remove_empty_dir
from fvconsole.core.shared.terminal_text import pictured, printable
from fvconsole.core.shared.untrusted import UntrustedError, decode, decode_object

__all__ = [
    "BREAK_LOCK",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "FORCE",
    "FvError",
    "Interrupted",
    "MissingExtra",
    "OVERWRITE",
    "PartialFailure",
    "Progress",
    "Reason",
    "Run",
    "SIGNALS",
    "SKIP_SOURCE_CHECK",
    "Stop",
    "UntrustedError",
    "UsageError",
    "WAIT",
    "age_since",
    "as_interrupted",
    "clipped",
    "decode",
    "decode_object",
    "elided",
    "flags",
    "head_tail",
    "human_age",
    "human_bytes",
    "interrupt_handlers",
    "is_duration",
    "invalid",
    "min_free_words",
    "parse_duration",
    "pictured",
    "plural",
    "printable",
    "quote_input",
    "remove_empty_dir",
    "run_locked",
    "signal_name",
    "utc_text",
    "write_output",
]
