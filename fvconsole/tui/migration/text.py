"""What the migration view shows, as text: plan summary, refusals, mismatch report, receipt."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from fvconsole.core.migration import (
    MigrationPlan,
    MigrationPreview,
    MigrationResult,
    NextSampleIds,
    PublishedSet,
)
from fvconsole.core.shared import Reason, plural
from fvconsole.tui.checkpoints.text import export_line, render_mismatches
from fvconsole.tui.plain import PlainText
from fvconsole.tui.wording import reason_text, refusal_text

#: The per-rank table: (label, key, width).
RANK_COLUMNS = (
    ("rank", "rank", 5), ("SP grp", "sp", 6), ("rg pos", "rgpos", 6), ("offset", "offset", 6),
    ("yielded", "yielded", 7), ("next sample", "next_sample", 11), ("next rg", "next_rg", 7),
    ("next id", "next_id", 13),
)
#: The "next id" cell while the ids are being read, and when a rank has none.
ID_PENDING, ID_NONE = "…", "-"
#: The plan summary's word for what FastVideo's loader does with the manifest's columns at resume
#: (a plan exists only for these: the other verdicts refuse).
COLUMN_VERDICTS = {"match": "match", "rebuild": "manifest rebuilt at resume", "not-checked": "differ, not checked"}
#: Refusal fields that stop the config comparison (no run config or no embedded config to compare).
NOT_COMPARED_FIELDS = ("config", "checkpoint", "metadata.json", "metadata.config")


def rank_sort_key(index: int) -> Any:
    """Sort a rank-table column numerically where it holds numbers (ids stay text)."""

    def key(row: tuple[str, ...]) -> Any:
        cell = row[index]
        return (0, int(cell), "") if cell.lstrip("-").isdigit() else (1, 0, cell)

    return key


def plan_summary(plan: MigrationPlan) -> Text:
    """Step, ranks, SP groups, samples per worker and epoch progress of a plan."""
    groups = plan.world_size // max(plan.sp_world_size, 1)
    text = PlainText()
    text.append("Plan\n", style="bold underline")
    rows = (
        ("step", plan.step),
        ("ranks (world size)", plan.world_size),
        ("SP groups", f"{groups} × sp {plan.sp_world_size}"),
        ("batch / grad accum", f"{plan.batch_size} / {plan.gradient_accumulation_steps}"),
        ("consumed batches/rank", plan.consumed_batches_per_rank),
        ("yielded samples/rank", plan.yielded_samples_per_rank),
        ("samples per worker", plan.samples_per_worker),
        ("epoch progress", f"{plan.epoch_progress * 100:.1f}%"),
        ("row groups / rows", f"{plan.num_row_groups} / {plan.total_rows}"),
        ("manifest fingerprint", f"{plan.manifest_fingerprint[:12]}…"),
    )
    if plan.columns is not None:
        rows += (("Parquet columns", f"{COLUMN_VERDICTS.get(plan.columns.verdict, plan.columns.verdict)} "
                                     f"({plan.columns.data_type})"),)
    for label, value in rows:
        text.append(f"  {label:<22}", style="grey62")
        text.append(f"{value}\n", style="bold" if label == "epoch progress" else "")
    if plan.columns is not None and plan.columns.verdict == "rebuild":  # "not-checked" is a warning above
        text.append(f"ⓘ {plan.columns.message}\n", style="grey62")
    for note in plan.notes:
        text.append(f"⚠ {reason_text(note)}\n", style="yellow")
    return text


def ids_note_text(note: str | None) -> Text:
    """The note under the rank table: why its "next id" column lacks ids (empty: it has them)."""
    return PlainText(f"ⓘ {note}", style="grey62") if note else PlainText()


def next_ids_note(result: NextSampleIds) -> str | None:
    """Why some next ids are missing, if they are."""
    if result.too_many_row_groups is not None:
        return (f"next sample ids not read: {result.too_many_row_groups} distinct row groups "
                f"(more than {result.limit} are not read for a preview)")
    if not result.problems:
        return None
    shown = "; ".join(result.problems[:3])
    return shown + (f" (+{len(result.problems) - 3} more)" if len(result.problems) > 3 else "")


def mismatch_report(preview: MigrationPreview) -> Text:
    """The mismatch report of a preview; never "matches" when the comparison could not run."""
    text = PlainText().append("Config mismatch report\n", style="bold underline")
    if not preview.mismatches:
        stopped = [r for r in preview.refusals if r.field in NOT_COMPARED_FIELDS]
        if stopped:
            return text.append(f"not compared: {stopped[0].field} refused (see above)\n", style="yellow")
    return text.append_text(render_mismatches(preview.mismatches))


def refusal_banner(preview: MigrationPreview) -> Text:
    """``✗ REFUSED`` and one line per refusal, worded with the form's own fields and checkboxes."""
    text = PlainText(f"✗ REFUSED: {plural(len(preview.refusals), 'problem')}; nothing can be written")
    for refusal in preview.refusals:
        text.append("\n  • ").append(refusal_text(refusal.why))
    return text


def plan_banner(plan: MigrationPlan, notes: Sequence[Reason], read_only: bool) -> Text:
    """``✓ plan ready`` and the preview's warnings (``MigrationPreview.notes``), in the console's words."""
    text = PlainText(f"✓ plan ready: {plan.world_size} sidecars for step {plan.step} → ")
    text.append(plan.output_dir, style="bold")
    for note in notes:
        text.append(f"\n⚠ {reason_text(note)}", style="yellow")
    if not read_only:
        text.append("\nReview, then Execute (ctrl+e).", style="italic")
    return text


def executed_banner(result: MigrationResult) -> Text:
    """``✓ done`` and the warnings execution found (staging dirs left alone, a stale lock taken over),
    in the console's words: what ``migrate --yes`` prints as it finds them."""
    sidecars = len(result.receipt.get("sidecars", []))
    text = PlainText(f"✓ done: {sidecars} sidecars + receipt written; the next step is below (y copies it)")
    for note in result.found_by_execution:
        text.append(f"\n⚠ {reason_text(note)}", style="yellow")
    return text


def confirm_body(plan: MigrationPlan) -> list[str]:
    last = plan.world_size - 1
    body = [
        f"Write {plan.world_size} rank-local sidecars (dataloader_state_rank0.pt … rank{last}.pt)",
        "and migration_receipt.json (written last) into:",
        f"  {plan.output_dir}",
        "",
        "Source checkpoint (read only, never modified):",
        f"  {plan.checkpoint}",
        "Run config:",
        f"  {plan.config_path}",
        f"step {plan.step}, world size {plan.world_size}, sp {plan.sp_world_size}, "
        f"{plan.yielded_samples_per_rank} samples consumed per rank",
    ]
    if plan.reshard is not None and plan.reshard.mode is not None:
        r, acc = plan.reshard, plan.reshard.accounting(plan.reshard.mode)
        body += ["",
                 f"Elastic resume, mode {r.mode}: world size {r.source.world_size} -> {r.target.world_size}, "
                 f"sp {r.source.sp_world_size} -> {r.target.sp_world_size}; every rank starts epoch {plan.epoch} "
                 f"at sample {plan.yielded_samples_per_rank}",
                 f"  epoch {r.source.epoch}: {acc.consumed} consumed, {acc.to_read} to read, {acc.repeated} repeated, "
                 f"{acc.unread} unread"]
    if plan.links:
        body.append(f"A checkpoint view: {len(plan.links)} entries linked to the source (resume_from_checkpoint).")
    if plan.request.overwrite:
        body.append("Existing sidecars in the output dir WILL be replaced (overwrite).")
    return body


def receipt_text(output_dir: str, receipt: Mapping[str, Any], world_size: int, checkpoint: str,
                 title: str = "✓ migration written") -> tuple[Text, str, Text, str, Text]:
    """The receipt panel: (its title, the receipt's path, what was written, the export line to
    resume with, the note under it).

    The receipt's path and the export line are returned apart: the view shows each on one
    unwrapped line (a path wrapped mid-name, ``…/migratio`` ``n_receipt.json``, reads wrong).
    """
    sidecars = receipt.get("sidecars") or []
    head = PlainText(title, style="bold green")
    text = PlainText()
    text.append(f"{len(sidecars)} sidecars, step {receipt.get('step')}, world size {receipt.get('world_size')}, "
                f"created {receipt.get('created_at_utc')}\n")
    text.append("Next step: resume from the unchanged legacy checkpoint with (y copies it)", style="bold")
    note = PlainText(f"world size must stay {world_size}; checkpoint {checkpoint}", style="grey62")
    return head, os.path.join(output_dir, "migration_receipt.json"), text, export_line(output_dir), note


def published_receipt_text(found: PublishedSet) -> tuple[Text, str, Text, str, Text]:
    """The receipt panel for a set found on disk (after a restart)."""
    receipt = {"sidecars": [None] * found.sidecars_present, "step": found.step, "world_size": found.world_size,
               "created_at_utc": found.created_at_utc}
    title = "✓ last migration (from its receipt); the form is filled from it: ctrl+y verifies it"
    if not found.complete:
        title = f"⚠ last migration: {found.sidecars_present} of {found.world_size} sidecars present"
    return receipt_text(found.output_dir, receipt, found.world_size, found.checkpoint, title)
