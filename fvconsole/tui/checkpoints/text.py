"""What view 1 shows, as text: the table's cells, the banner's counts, the detail pane (the
checkpoint, its migration, its metadata and DCP keys, the config-mismatch report).

Keys, values and paths come from the run config and the checkpoint: composed as PlainText.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text

from fvconsole.core.checkpoints import CheckpointDetail, RunKind
from fvconsole.core.formats import Mismatch
from fvconsole.core.shared import human_age, human_bytes, plural
from fvconsole.tui.checkpoints.rows import CheckpointRow
from fvconsole.tui.plain import PlainText, fitted
from fvconsole.tui.wording import reason_text


def render_mismatches(mismatches: tuple[Mismatch, ...] | None, limit: int = 40) -> Text:
    """The config-mismatch report: critical rows in red first, then the rest dimmed.

    Keys and values come from the run config and the checkpoint: composed as PlainText.
    """
    text = PlainText()
    if mismatches is None:
        text.append("No run config loaded: open one with `o` to compare.\n", style="italic")
        return text
    if not mismatches:
        text.append("✓ run config matches the checkpoint's embedded config\n", style="bold green")
        return text
    critical = [m for m in mismatches if m.critical]
    other = [m for m in mismatches if not m.critical]
    if critical:
        text.append(f"✗ {plural(len(critical), 'critical mismatch', 'critical mismatches')}: migration will refuse\n", style="bold red")
    for m in critical:
        text.append(f"  {m.path}\n", style="bold red")
        text.append(f"    checkpoint={m.checkpoint!r}  config={m.config!r}{_set_by(m)}\n", style="red")
    if other:
        text.append(f"{plural(len(other), 'other difference')} (not critical):\n", style="yellow")
    _mismatch_lines(text, other, limit, "grey62")
    return text


def _mismatch_lines(text: Text, mismatches: list[Mismatch], limit: int, style: str, more: str = "") -> None:
    """One line per mismatch (at most ``limit``), then how many more."""
    for m in mismatches[:limit]:
        text.append(f"  {m.path}: checkpoint={m.checkpoint!r} config={m.config!r}{_set_by(m)}\n", style=style)
    if len(mismatches) > limit:
        text.append(f"  … {len(mismatches) - limit} more{more}\n", style=style)


def _set_by(m: Mismatch) -> str:
    """`` (in the override KEY=VALUE)`` when an override set the config's value; the loaded file's otherwise."""
    return f" (in {m.source(None)})" if m.set_by is not None else ""


def critical_first(mismatches: tuple[Mismatch, ...] | None, limit: int = 3) -> Text:
    """The key summary the detail pane opens with: the critical mismatches, one line each.

    At 80x24 the pane shows about eight lines; the full report comes after the metadata and
    the DCP keys, a PgDn or two below. Empty when nothing is critical.
    """
    critical = [m for m in mismatches or () if m.critical]
    text = PlainText()
    if not critical:
        return text
    text.append(f"✗ {plural(len(critical), 'critical mismatch', 'critical mismatches')}: migration will refuse\n", style="bold red")
    _mismatch_lines(text, critical, limit, "red", " in the report below")
    return text


#: The shell line that points FastVideo's resume at a sidecar set, before its path.
EXPORT_PREFIX = "export FASTVIDEO_DATALOADER_STATE_DIR="


def export_line(output_dir: str) -> str:
    """The one shell line that points FastVideo's resume at a sidecar set."""
    return EXPORT_PREFIX + shlex.quote(output_dir)



def loader_cell(kind: RunKind | None) -> Text | str:
    """The loader column: streaming, map-style (red: not migratable) or unknown; "-" for no legacy state."""
    if kind is None:
        return "-"
    if kind.migratable:
        return kind.loader
    return Text(kind.loader, style="bold red" if kind.loader == "map-style" else "yellow")




def haystack(row: CheckpointRow) -> str:
    """What the filter matches: step, kind, loader, completeness and path."""
    info = row.info
    loader = row.run_kind.loader if row.run_kind is not None else ""
    return (f"{info.step} {'migrated' if row.migrated else info.kind} {loader} "
            f"{'complete' if info.complete else 'incomplete'} {info.path}").lower()


def counts_text(rows: Sequence[CheckpointRow], path: str, filter_text: str, shown: int, width: int) -> Text:
    """The banner: the directory (fitted to ``width``), how many checkpoints, legacy, migrated, shown."""
    legacy = sum(1 for r in rows if r.info.kind == "legacy")
    migrated = sum(1 for r in rows if r.migrated)
    text = PlainText().append(fitted(path, width), style="bold")
    text.append(f"\n{plural(len(rows), 'checkpoint')}, {legacy} legacy")
    if migrated:
        text.append(f" ({migrated} migrated)", style="green")
    if filter_text:
        text.append(f" · {shown} shown (filter '{filter_text}')", style="bold" if shown else "bold yellow")
    if legacy - migrated:
        text.append(" · select one and press m to migrate", style="italic")
    return text


def row_cells(row: CheckpointRow, now: float, marked: bool = False) -> tuple[Any, ...]:
    """The table's cells; a checkpoint marked for pruning has ``●`` before its step."""
    info = row.info
    if row.migrated:
        kind = Text("migrated", style="green")
    elif info.kind == "legacy":
        kind = Text("legacy", style="yellow")
    else:
        kind = str(info.kind)
    return (
        ("● " if marked else "") + str(info.step),
        Text("yes", style="green") if info.complete else Text("NO", style="bold red"),
        kind,
        loader_cell(row.run_kind),
        str(row.sidecars),
        human_bytes(info.bytes) if info.size_complete else "?",
        human_age(now - row.mtime) if row.mtime is not None else "-",
    )


def summary_text(row: CheckpointRow, detail: CheckpointDetail | None, width: int) -> Text:
    """The detail pane at ``width`` cells: each path on one line, shortened in the middle
    if it must be (never wrapped mid-name); ``y`` copies the checkpoint's full path."""
    info = row.info
    text = PlainText()
    text.append(f"checkpoint-{info.step}\n", style="bold")
    if detail is not None:  # what decides the migration first, visible without scrolling at 80x24
        text.append_text(critical_first(detail.mismatches))
    text.append(fitted(info.path, width) + "\n", style="grey62")
    text.append("kind ")
    text.append(info.kind, style="bold yellow" if info.kind == "legacy" else "bold")
    text.append("   complete ")
    text.append(info.completeness, style="" if info.complete else "bold red")
    # The same count as the table's "sidecars" column, saying where they are.
    where = ("in the checkpoint" if info.rank_sidecars
             else "in its migrated set" if row.published is not None else "none yet")
    text.append(f"   size {human_bytes(info.bytes) if info.size_complete else 'unknown'}\nrng states {info.rng_states}   "
                f"sidecars {row.sidecars} ({where})\n")
    if info.metadata_step is not None and info.metadata_step != info.step:
        text.append(f"metadata.json step {info.metadata_step} differs from the directory name\n", style="bold red")
    for problem in info.problems:
        text.append(f"⚠ {problem}\n", style="yellow")
    migration_status(row, text, width)
    retention_status(row, text)
    if detail is None:
        text.append("\nloading detail …", style="italic")
    else:
        detail_text(detail, text)
    return text


#: What pruning a checkpoint that has a published sidecar set does to the set (it resumes only
#: from that checkpoint): the detail pane's retention line and the prune's confirmation say it.
ORPHANS = "pruning it orphans its published sidecar set (the set resumes only from this checkpoint)"


def retention_status(row: CheckpointRow, text: PlainText) -> None:
    """Why a prune keeps it, or that it may go (marks: space, prune: p), and what it orphans."""
    if row.kept_why is None:
        return
    if row.kept_why:
        text.append("retention: kept", style="bold")
        text.append(f": {reason_text(row.kept_why[0])}\n")
        return
    text.append("retention: may be pruned (space marks it, p prunes the marked)\n", style="grey62")
    if row.published is not None:
        text.append(f"⚠ {ORPHANS}\n", style="yellow")


def migration_status(row: CheckpointRow, text: PlainText, width: int) -> None:
    published = row.published
    if row.published_problem:
        text.append(f"⚠ published set: {row.published_problem}\n", style="yellow")
    if published is not None:
        style = "bold green" if published.complete else "bold yellow"
        mark = "✓ migrated" if published.complete else "⚠ published set incomplete"
        text.append(f"{mark}: {published.sidecars_present} of {published.world_size} sidecars + receipt "
                    f"({published.created_at_utc})\n", style=style)
        text.append(fitted(published.output_dir, width) + "\n")
        line = export_line(published.output_dir)
        if cell_len(line) <= width:
            text.append("resume with (view 2, y copies it):\n", style="grey62")
            text.append(line + "\n", style="cyan")
        else:
            # Never shortened (a "…" in a pasted line points FastVideo at a path that does not
            # exist) and never wrapped mid-name (a selection would pick up the break): named.
            text.append("resume with FASTVIDEO_DATALOADER_STATE_DIR set to the dir above "
                        "(view 2, y copies the export line)\n", style="grey62")
    kind = row.run_kind
    if kind is not None and kind.loader == "map-style":
        text.append("✗ map-style loader: not migratable\n", style="bold red")
        text.append(f"{kind.why}\n")
    elif kind is not None and not kind.migratable:
        text.append(f"⚠ loader unknown: {kind.why}\n", style="yellow")
    elif kind is not None and published is None:
        text.append("Legacy: every rank saved its loader state under the same DCP key, so one rank's "
                    "state overwrote the others'; migrate to rank-local sidecars (m).\n", style="italic")


def detail_text(detail: CheckpointDetail, text: PlainText) -> None:
    text.append("\nmetadata.json: ", style="bold")
    text.append(", ".join(detail.metadata_keys) or "-")
    text.append(f"\nDCP state keys: {detail.dcp_key_count}\n", style="bold")
    for top, count in detail.dcp_key_groups:
        style = "yellow" if top == "dataloader" else ""
        text.append(f"  {top}.*  {count}\n", style=style)
    if detail.dcp_total_bytes is not None:
        text.append(f"DCP tensor bytes: {human_bytes(detail.dcp_total_bytes)}\n", style="bold")
        for top, size in detail.dcp_totals:
            text.append(f"  {top}  {human_bytes(size)}\n")
    for problem in detail.problems:
        text.append(f"⚠ {problem}\n", style="bold red")
    text.append("\nConfig mismatch report\n", style="bold underline")
    text.append_text(render_mismatches(detail.mismatches))
