"""View 5: the journal (``fvconsole history`` in the console): who evicted or migrated what, when.

Newest first, with a detail pane holding the whole record. The journal may be a team's
shared file, so every field is untrusted: cells and the detail are plain text (never markup,
controls escaped). Reading is ``core.journal.log.read_journal`` (bounded: the last 64 MiB,
lines over 64 KiB skipped) in a worker; lines that are not records are counted and said so.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Container, VerticalScroll
from textual.reactive import var
from textual.widgets import Input

from fvconsole.core.journal import ENV_JOURNAL, JournalRead, JournalRecord, read_journal
from fvconsole.core.shared import human_bytes, plural
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.messages import HistoryRead, HistoryReadFailed
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.statics import PlainStatic
from fvconsole.tui.widgets.tables import FastTable, ListingTable

#: (label, key, width): what fits at 80 columns first (when, what, outcome, how much); the
#: target takes whatever width is left (a path keeps its end), "who" and "items" make room for
#: it on a narrow terminal (``FastTable`` fits them), and the detail pane has everything whole.
#: "action" is as wide as the longest action ("checkpoints prune", "fleet cache evict") and narrows
#: on a narrow terminal; the target's 24 is its least before "who" gives way, not its width.
COLUMNS = (("time (UTC)", "time", 19), ("action", "action", 17), ("result", "result", 11), ("bytes", "size", 10),
           ("items", "items", 6), ("who", "who", 20), ("target", "target", 24))
FIT = {"flex": "target", "shrink": {"target": 16, "action": 11, "result": 8, "who": 12}, "optional": ("items", "who")}
RESULT_STYLE = {"ok": "green", "partial": "bold yellow", "failed": "bold red"}
#: Items and errors listed in the detail pane (a record holds at most 1000 of each).
DETAIL_LIMIT = 200


def time_cell(record: JournalRecord) -> str:
    return record.time_text.replace("T", " ").rstrip("Z")


def who(record: JournalRecord) -> str:
    return f"{record.user}@{record.host}"


def result_cell(record: JournalRecord) -> Text:
    return Text(f"{record.result} ({record.exit_code})", style=RESULT_STYLE.get(record.result, ""))


def items_cell(record: JournalRecord) -> str:
    return str(record.item_count) + (f" ✗{record.error_count}" if record.error_count else "")


def haystack(record: JournalRecord) -> str:
    """What the filter matches: every column, the command and the items."""
    return " ".join((record.time_text, who(record), record.action, record.target, record.result,
                     record.command, *record.items, *record.errors)).lower()


def record_text(record: JournalRecord) -> PlainText:
    """The whole record, as plain text (every string from the journal is data, shown escaped)."""
    text = PlainText()
    text.append(f"{record.action}  ", style="bold")
    text.append(f"{record.result} (exit {record.exit_code})\n", style=RESULT_STYLE.get(record.result, "bold"))
    text.append(f"{record.time_text}  {who(record)}  pid {record.pid}\n", style="grey62")
    text.append("target  ", style="bold").append(f"{record.target}\n")
    text.append("command ", style="bold").append(f"{record.command or '-'}\n")
    text.append("bytes   ", style="bold").append(f"{human_bytes(record.bytes)} ({record.bytes:,})\n")
    text.append_text(_listed("errors", record.errors, record.error_count, "bold red"))
    verb = "written" if record.action == "migrate" else "removed"
    text.append_text(_listed(f"items {verb}", record.items, record.item_count, ""))
    if record.details:
        text.append("\ndetails\n", style="bold underline")
        for key, value in sorted(record.details.items()):
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True,
                                                                    default=str)
            text.append(f"  {key}: ", style="grey62").append(f"{shown}\n")
    return text


def _listed(title: str, values: tuple[str, ...], total: int, style: str) -> PlainText:
    text = PlainText()
    if not total:
        return text
    text.append(f"\n{title} ({total})\n", style="bold underline")
    for value in values[:DETAIL_LIMIT]:
        text.append(f"  {value}\n", style=style)
    if len(values) > DETAIL_LIMIT:
        text.append(f"  … {len(values) - DETAIL_LIMIT} more (the pane lists {DETAIL_LIMIT})\n", style="grey62")
    if total > len(values):
        text.append(f"  … {total - len(values)} not in the journal line (shortened to fit one line)\n",
                    style="grey62")
    return text


def empty_state(path: str) -> PlainText:
    """A missing journal: where it looks, and how to point it elsewhere."""
    text = PlainText().append("No journal yet at\n", style="bold yellow")
    text.append(f"  {path}\n")
    text.append("Executed migrations and evictions append one line each (this console's, and "
                "`--yes` runs of the CLI). To read another journal: start the console with "
                f"--journal PATH, or set ${ENV_JOURNAL} (a team's shared journal).\n", style="italic")
    return text


def order_text(sort_column: str | None, reverse: bool) -> str:
    """The order the table shows, as its header arrow does (``newest first`` until a sort)."""
    if sort_column is None:
        return "newest first"
    if sort_column == "time":
        return "oldest first" if not reverse else "newest first"
    label = next(label for label, key, _width in COLUMNS if key == sort_column)
    return f"by {label}, {'descending' if reverse else 'ascending'}"


def counts_text(read: JournalRead, count: int, order: str, filter_text: str, shown: int) -> PlainText:
    """The banner: which journal, how many records in which order, what the filter shows, what was skipped."""
    if not read.exists:
        return empty_state(read.path)
    text = PlainText().append("journal ", style="bold").append(read.path).append(f"  (another journal: --journal PATH or ${ENV_JOURNAL} (e.g. a team's shared one))", style="grey62")
    text.append(f"\n{plural(count, 'record')}, {order}")
    if filter_text:
        text.append(f" · {shown} shown (filter '{filter_text}')", style="bold" if shown else "bold yellow")
    text.append(" · r reads it again", style="grey62")
    if read.malformed:
        text.append(f"\n⚠ {plural(read.malformed, 'malformed line')} skipped "
                    "(not a journal record)", style="yellow")
    if read.skipped_bytes:
        text.append(f"\nthe oldest {human_bytes(read.skipped_bytes)} of the journal were not read "
                    "(only its last part is)", style="grey62")
    return text


class HistoryTable(ListingTable[tuple[str, JournalRecord]]):
    """The journal's records (row key: position from the oldest, stable on a re-read), newest first
    until a sort; filtered from memory; the cursor stays on its record. ``shown`` holds (key, record)."""

    keyed: var[tuple[tuple[str, JournalRecord], ...]] = var((), always_update=True, init=False)

    COLUMNS = COLUMNS
    SORT_KEYS: ClassVar[dict[str, Any]] = {
        "time": lambda r: r[1].time,
        "who": lambda r: who(r[1]),
        "action": lambda r: r[1].action,
        "target": lambda r: r[1].target,
        "result": lambda r: (r[1].result, r[1].exit_code),
        "size": lambda r: r[1].bytes,
        "items": lambda r: r[1].item_count,
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**FIT, **kwargs)

    def watch_keyed(self) -> None:
        self.refill()

    def items(self) -> tuple[tuple[str, JournalRecord], ...]:
        return self.keyed

    def row_key(self, item: tuple[str, JournalRecord]) -> str:
        return item[0]

    def cells(self, item: tuple[str, JournalRecord], now: float) -> tuple[Any, ...]:
        record = item[1]
        return (time_cell(record), record.action, result_cell(record), human_bytes(record.bytes),
                items_cell(record), who(record), record.target)

    def haystack(self, item: tuple[str, JournalRecord]) -> str:
        return haystack(item[1])


class HistoryView(BaseView):
    """The journal: a table of records, newest first, and the selected record in full.

    State: ``journal`` (the last read, a reactive); the table holds the records and the filter.
    """

    TITLE = "5 History"
    PANES: ClassVar[dict[str, str]] = {"hist-detail-scroll": "record"}
    TABLE = "hist-table"
    BINDINGS: ClassVar[list] = []

    journal: var[JournalRead | None] = var(None, always_update=True, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._keys: dict[str, JournalRecord] = {}  # row key (position from the oldest: stable on re-read)
        self._banner = PlainStatic(id="hist-banner", classes="banner")
        self._detail = PlainStatic("Select a record.", id="hist-detail")

    def compose(self) -> ComposeResult:
        self.table = HistoryTable(id="hist-table")
        yield self._banner
        yield Input(placeholder="filter by user, host, action, target, result, command or item (Esc closes)",
                    classes="view-filter")
        with Container(id="hist-main", classes="split"):
            yield self.table
            with VerticalScroll(id="hist-detail-scroll", classes="detail"):
                yield self._detail

    # ------------------------------------------------------------ reading

    def refresh_view(self) -> None:
        path = self.app.state.journal()
        if self.journal is None or self.journal.path != path:
            self._banner.update(PlainText(f"reading {path} …", style="italic"))
        self.read(path)

    @work(thread=True, exclusive=True, group="hist-read", exit_on_error=False)
    def read(self, path: str) -> None:
        with self.failures(lambda exc: HistoryReadFailed(path, exc)):
            self.deliver(HistoryRead(read_journal(path)))

    def on_history_read_failed(self, message: HistoryReadFailed) -> None:
        self.report_error(message.error)
        text = PlainText().append(f"cannot read the journal {message.path}\n", style="bold red")
        text.append(describe_error(message.error))
        self._banner.update(text)
        self.journal = None

    def on_history_read(self, message: HistoryRead) -> None:
        self.journal = message.read

    def watch_journal(self, read: JournalRead | None) -> None:
        records = read.records if read is not None else ()
        self._keys = {str(i): r for i, r in enumerate(records)}
        self.table.keyed = tuple(reversed(self._keys.items()))
        self._shown_changed()

    def apply_filter(self, text: str) -> None:
        self.table.filter_text = text
        self._shown_changed()

    def on_fast_table_sorted(self) -> None:
        self._shown_changed()

    def _shown_changed(self) -> None:
        """The table refilled: the banner counts it; an empty one says why in the detail pane."""
        read, table = self.journal, self.table
        if read is not None:
            order = order_text(table.sort_column, table.sort_reverse)
            self._banner.update(counts_text(read, len(self._keys), order, self.filter_text, len(table.shown)))
        if not table.shown:
            if table.filter_text and self._keys:
                what = f"No record matches '{table.filter_text}'."
            elif read is not None and read.exists:
                what = "The journal holds no records."
            else:
                what = "No records."
            self._detail.update(what)

    def on_strip_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        record = self.selected_record()
        if event.row_key is not None and record is not None:
            self._detail.update(record_text(record))

    def selected_record(self) -> JournalRecord | None:
        selected = self.table.selected
        return self._keys.get(selected) if selected is not None else None

    @property
    def records(self) -> list[JournalRecord]:
        """What the table shows, in its order (tests read it)."""
        return [record for _key, record in self.table.shown]
