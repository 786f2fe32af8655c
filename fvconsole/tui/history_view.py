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
from textual.widgets import DataTable, Input

from fvconsole.core.journal import ENV_JOURNAL, JournalRead, JournalRecord, read_journal
from fvconsole.core.shared import human_bytes, plural
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.messages import HistoryRead, HistoryReadFailed
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets import FastTable, PlainStatic

#: (label, key, width): what fits at 80 columns first (when, what, outcome, how much); the
#: target takes whatever width is left (a path keeps its end), "who" and "items" make room for
#: it on a narrow terminal (``FastTable`` fits them), and the detail pane has everything whole.
COLUMNS = (("time (UTC)", "time", 19), ("action", "action", 11), ("result", "result", 11), ("bytes", "size", 10),
           ("items", "items", 6), ("who", "who", 20), ("target", "target", 30))
FIT = {"flex": "target", "shrink": {"target": 16, "result": 8, "who": 12}, "optional": ("items", "who")}
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


class HistoryView(BaseView):
    """The journal: a table of records, newest first, and the selected record in full."""

    TITLE = "5 History"
    PANES: ClassVar[dict[str, str]] = {"hist-detail-scroll": "record"}
    TABLE = "hist-table"
    BINDINGS: ClassVar[list] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._read: JournalRead | None = None
        self._records: list[JournalRecord] = []  # newest first
        self._keys: dict[str, JournalRecord] = {}  # row key (position from the oldest: stable on re-read)
        self._shown: list[JournalRecord] = []
        self._selected: str | None = None

    def compose(self) -> ComposeResult:
        yield PlainStatic(id="hist-banner", classes="banner")
        yield Input(placeholder="filter by user, host, action, target, result, command or item (Esc closes)",
                    classes="view-filter")
        with Container(id="hist-main", classes="split"):
            yield FastTable(id="hist-table", cursor_type="row", zebra_stripes=True, **FIT,
                            sortable=[key for _label, key, _w in COLUMNS])
            with VerticalScroll(id="hist-detail-scroll", classes="detail"):
                yield PlainStatic("Select a record.", id="hist-detail")

    def on_mount(self) -> None:
        table = self.query_one("#hist-table", FastTable)
        for label, key, width in COLUMNS:
            table.add_column(label, key=key, width=width)

    # ------------------------------------------------------------ reading

    def refresh_view(self) -> None:
        path = self.app.state.journal()
        if self._read is None or self._read.path != path:
            self._banner(PlainText(f"reading {path} …", style="italic"))
        self.read(path)

    @work(thread=True, exclusive=True, group="hist-read", exit_on_error=False)
    def read(self, path: str) -> None:
        with self.failures(lambda exc: HistoryReadFailed(path, exc)):
            self.deliver(HistoryRead(read_journal(path)))

    def on_history_read_failed(self, message: HistoryReadFailed) -> None:
        self.report_error(message.error)
        self._read = None
        self._records = []
        self._keys = {}
        text = PlainText().append(f"cannot read the journal {message.path}\n", style="bold red")
        text.append(describe_error(message.error))
        self._banner(text)
        self.apply_filter(self.filter_text)

    def on_history_read(self, message: HistoryRead) -> None:
        self._read = message.read
        records = message.read.records
        self._keys = {str(i): r for i, r in enumerate(records)}
        self._records = list(reversed(records))
        self.apply_filter(self.filter_text)

    def _order_text(self) -> str:
        """The order the table shows, as its header arrow does (``newest first`` until a sort)."""
        table = self.query_one("#hist-table", FastTable)
        column = table.sort_column
        if column is None:
            return "newest first"
        if column == "time":
            return "oldest first" if not table.sort_reverse else "newest first"
        label = next(label for label, key, _width in COLUMNS if key == column)
        way = "descending" if table.sort_reverse else "ascending"
        return f"by {label}, {way}"

    def _banner(self, text: Text) -> None:
        self.query_one("#hist-banner", PlainStatic).update(text)

    def _show_counts(self) -> None:
        read = self._read
        if read is None:
            return
        if not read.exists:
            self._banner(empty_state(read.path))
            return
        text = PlainText().append("journal ", style="bold").append(read.path).append(f"  (another journal: --journal PATH or ${ENV_JOURNAL} (e.g. a team's shared one))", style="grey62")
        count = len(self._records)
        text.append(f"\n{plural(count, 'record')}, {self._order_text()}")
        if self.filter_text:
            shown = len(self._shown)
            text.append(f" · {shown} shown (filter '{self.filter_text}')", style="bold" if shown else "bold yellow")
        text.append(" · r reads it again", style="grey62")
        if read.malformed:
            text.append(f"\n⚠ {plural(read.malformed, 'malformed line')} skipped "
                        "(not a journal record)", style="yellow")
        if read.skipped_bytes:
            text.append(f"\nthe oldest {human_bytes(read.skipped_bytes)} of the journal were not read "
                        "(only its last part is)", style="grey62")
        self._banner(text)

    # ------------------------------------------------------------ table

    SORT_KEYS: ClassVar[dict[str, Any]] = {
        "time": lambda r: r.time,
        "who": who,
        "action": lambda r: r.action,
        "target": lambda r: r.target,
        "result": lambda r: (r.result, r.exit_code),
        "size": lambda r: r.bytes,
        "items": lambda r: r.item_count,
    }

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#hist-table", FastTable)
        previous = self._selected
        table.clear()
        self._shown = [r for r in table.ordered(self._records, self.SORT_KEYS) if not text or text in haystack(r)]
        index = {id(r): key for key, r in self._keys.items()}
        for record in self._shown:
            table.add_row(time_cell(record), record.action, result_cell(record), human_bytes(record.bytes),
                          items_cell(record), who(record), record.target,
                          key=index[id(record)])
        self._show_counts()
        if previous is not None and previous in table.rows:
            table.move_cursor(row=table.get_row_index(previous))
        if not self._shown:
            self._selected = None
            if text and self._records:
                what = f"No record matches '{text}'."
            elif self._read is not None and self._read.exists:
                what = "The journal holds no records."
            else:
                what = "No records."
            self.query_one("#hist-detail", PlainStatic).update(what)

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        self.apply_filter(self.filter_text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "hist-table" or event.row_key is None or event.row_key.value is None:
            return
        self._selected = event.row_key.value
        record = self.selected_record()
        if record is not None:
            self.query_one("#hist-detail", PlainStatic).update(record_text(record))

    def selected_record(self) -> JournalRecord | None:
        return self._keys.get(self._selected) if self._selected is not None else None

    @property
    def records(self) -> list[JournalRecord]:
        """What the table shows, in its order (tests read it)."""
        return list(self._shown)
