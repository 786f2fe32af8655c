"""What the shard cache view shows, as text: the table's cells, the root line, the status line,
an entry's detail and an eviction's report. Pure functions of the records (and the width a
path must fit), so the view's widgets draw them and tests read them without an app.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text

from fvconsole.core.cache import (
    CacheEntry,
    CacheEntryDetail,
    CacheScan,
    EntryVerification,
    LockedEviction,
    shards_text,
)
from fvconsole.core.shared import head_tail, human_age, human_bytes, plural, printable
from fvconsole.tui import state
from fvconsole.tui.plain import PlainText, fit_cell, fitted
from fvconsole.tui.wording import skip_text

STATUS_STYLE = {"complete": "green", "partial": "cyan", "incomplete": "yellow", "empty": "yellow", "invalid": "bold red"}
MARK = "●"


def status_cell(entry: CacheEntry) -> Text:
    label = f"{entry.status}*" if entry.writing else entry.status
    return Text(label, style=STATUS_STYLE.get(entry.status, ""))


def last_used_cell(entry: CacheEntry) -> str:
    if entry.last_used is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.last_used))


def age_cell(entry: CacheEntry, now: float) -> str:
    """How long ago the entry was last used (``3h ago``; ``never`` without a manifest)."""
    return f"{human_age(now - entry.last_used)} ago" if entry.last_used is not None else "never"


def refresh_words(every: float | None, off: str) -> str:
    """How the view rescans: ``auto-refresh every 5s``, or ``off`` when auto-refresh is off."""
    return f"auto-refresh every {every:g}s" if every is not None else off


def root_text(scan: CacheScan, entries: Sequence[CacheEntry], width: int) -> PlainText:
    """The root (one line, shortened in the middle if it must be) and what the scan found."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.status] = counts.get(e.status, 0) + 1
    text = PlainText().append(fitted(scan.root, width), style="bold")
    text.append(f"\n{plural(len(entries), 'entry', 'entries')}: ")
    text.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none")
    if any(e.writing for e in entries):
        text.append(" · * being written", style="grey62")
    if scan.foreign:
        text.append(f" · {plural(len(scan.foreign), 'foreign item')} ignored", style="grey62")
    if scan.foreign_gc_counted:
        text.append(f" · {plural(len(scan.foreign_gc_counted), 'foreign dir')}: FastVideo's GC counts these and may "
                    "delete them", style="yellow")
    held = sum(1 for e in entries if e.in_use_by)
    if held:
        text.append(f" · {held} in use by live processes", style="bold yellow")
    for err in (*scan.errors[:3], *state.shown_warnings(scan)):
        # One line each, marked when cut (`cache ls` prints them whole): a warning wrapped over
        # three lines left an 80x24 cache view four rows of its table.
        text.append("\n" + fit_cell(f"⚠ {printable(err)}", width), style="yellow")
    return text


def status_text(marked: Sequence[CacheEntry], shown: int, total: int, filter_text: str, sort_column: str | None,
                refresh_every: float | None) -> PlainText:
    """Marks (count and size), filter, order and auto-refresh: the line always in view."""
    text = PlainText()
    if marked:
        text.append(f"{MARK} {len(marked)} marked, {human_bytes(sum(e.bytes for e in marked))}", style="bold")
    else:
        text.append("none marked (space)", style="grey62")
    if filter_text:
        text.append(f" · {shown} of {total} shown (filter '{filter_text}')", style="bold" if shown else "bold yellow")
    text.append(f" · {f'by {sort_column}' if sort_column else 'LRU first'}", style="grey62")
    auto = f" · auto-refresh {refresh_every:g}s (a)" if refresh_every is not None else " · auto-refresh off (a)"
    text.append(auto, style="grey62")
    return text


def entry_text(entry: CacheEntry, scan: CacheScan | None, refresh_every: float | None, width: int) -> PlainText:
    """The entry as the scan saw it: status, path, size, shards, last use, holders, problems."""
    now = state.now()
    text = PlainText().append(f"{entry.key}  ", style="bold")
    text.append(entry.status, style=STATUS_STYLE.get(entry.status, ""))
    if entry.writing:
        text.append("  (being written)", style="grey62")
    text.append("\n" + fitted(entry.path, width) + "\n", style="grey62")
    used = last_used_cell(entry) + (f" ({age_cell(entry, now)})" if entry.last_used is not None else "")
    text.append(f"size {human_bytes(entry.bytes)}   shards {shards_text(entry)}   last used {used}\n")
    if entry.explanation:
        text.append(f"{entry.explanation}\n", style="italic")
    for holder in entry.in_use_by[:5]:
        text.append(f"in use: {holder.how} by pid {holder.pid} ({holder.command})\n", style="bold yellow")
    if len(entry.in_use_by) > 5:
        text.append(f"in use: and {len(entry.in_use_by) - 5} more\n", style="bold yellow")
    if scan is not None:
        ago = human_age(now - scan.scanned_at)
        text.append(f"as scanned {ago} ago ({refresh_words(refresh_every, 'r rescans')})\n", style="grey62")
    for problem in entry.problems:
        text.append(f"⚠ {problem}\n", style="yellow")
    return text


def verification_text(entry: CacheEntry, result: EntryVerification, text: PlainText) -> None:
    """The entry's last verification (``v``), appended to ``text``."""
    text.append("\nverify\n", style="bold underline")
    if result.not_verifiable is not None:
        text.append(f"  not verifiable: {result.not_verifiable}\n", style="yellow")
        return
    if result.ok:
        text.append(f"  ✓ {plural(len(result.shards_checked), 'shard')} agree with the manifest\n", style="green")
        return
    for problem in result.problems[:20]:
        text.append(f"  ✗ {problem.text()}\n", style="bold red")
    if len(result.problems) > 20:
        text.append(f"  … {len(result.problems) - 20} more (fvconsole cache verify --key {entry.key})\n",
                    style="grey62")


def detail_text(entry: CacheEntry, detail: CacheEntryDetail, scan: CacheScan | None, refresh_every: float | None,
                verified: EntryVerification | None, width: int) -> PlainText:
    """The detail pane: the entry, its verification first (what `v` was pressed for), the manifest, the files."""
    text = entry_text(entry, scan, refresh_every, width)
    if verified is not None:
        verification_text(entry, verified, text)
    text.append("\nmanifest.json\n", style="bold underline")
    summary = detail.summary
    if summary is not None:
        text.append(f"  num_shards {entry.num_shards}   params {summary.params}   elements {summary.numel:,}\n")
        text.append("  kinds: " + (", ".join(f"{k} ×{n}" for k, n in summary.kinds) or "-") + "\n")
        text.append("  dtypes: " + (", ".join(f"{d} ×{n}" for d, n in summary.dtypes) or "-") + "\n")
    else:
        text.append(f"  ⚠ {detail.manifest_error}\n", style="bold red" if entry.status == "invalid" else "yellow")
    text.append(f"\nfiles ({detail.total_files})\n", style="bold underline")
    head, omitted, tail = head_tail(list(detail.files), 12, 4)
    for name, size in head:
        text.append(f"  {human_bytes(size):>10}  {name}\n")
    if omitted or detail.total_files > len(detail.files):
        text.append(f"  … {omitted + detail.total_files - len(detail.files)} more\n", style="grey62")
    for name, size in tail:
        text.append(f"  {human_bytes(size):>10}  {name}\n")
    for name in detail.other[:8]:
        text.append(f"  {name}  (not a regular file: not followed, not counted)\n", style="yellow")
    return text


def evicted_text(done: LockedEviction, now: float) -> PlainText:
    """The eviction's report under the table, in the result's own words (``EvictionResult.summary``,
    ``fs_free_text``, ``LockedEviction.target_line`` with the dialog's names): what was deleted,
    errors, warnings, what was left and why."""
    plan, result = done.plan, done.result
    text = PlainText().append(("✓ " if result.ok else "✗ ") + result.summary + "\n",
                              style="bold green" if result.ok else "bold red")
    target = done.target_line(flags=False)
    if target is not None:
        text.append(f"  {result.fs_free_text}; {target}\n", style="green" if result.target_reached else "bold yellow")
    for entry in result.evicted[:12]:
        text.append(f"  ✓ {entry.key} {human_bytes(entry.bytes):>10}  deleted\n", style="green")
    if len(result.evicted) > 12:
        text.append(f"  … {len(result.evicted) - 12} more deleted\n", style="green")
    for error in result.errors[:12]:
        text.append(f"  ✗ error: {error}\n", style="bold red")
    for warning in done.warnings:  # what `cache evict --yes` prints as warning: lines
        text.append(f"  ⚠ {warning}\n", style="bold yellow")
    for skipped in result.skipped[len(plan.skipped):][:12]:
        line = skip_text(skipped.why, None, now, plan.grace_seconds)
        text.append(f"  – {skipped.key}  left in place: {line}\n", style="yellow")
    return text
