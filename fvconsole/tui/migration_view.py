"""View 2: migrate a legacy checkpoint to rank-local sidecars.

Preview → (confirm) → execute, all through the same core calls as ``fvconsole migrate``:
``preview_migration(request)`` builds the plan, ``execute_plan(plan)`` writes exactly that plan.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Checkbox, DataTable, Input, Label, Static

from fvconsole.core.errors import FvError, PartialFailure
from fvconsole.tui import backend
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.checkpoints_view import render_mismatches
from fvconsole.tui.modals import ConfirmScreen, ErrorScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets import FastTable, PathInput, PlainStatic, ProgressRow, ThreadProgress

INT_FIELDS = (
    ("expected_step", "mig-step", "expected step"),
    ("expected_world_size", "mig-world", "expected world size"),
    ("consumed_batches_per_rank", "mig-consumed", "consumed batches/rank"),
)
RANK_COLUMNS = (
    ("rank", 5), ("SP grp", 6), ("rg pos", 6), ("offset", 6),
    ("yielded", 8), ("next sample", 11), ("next rg", 7), ("next id", 14),
)
#: The "next id" cell while the ids are being read, and when a rank has none.
ID_PENDING, ID_NONE = "…", "-"


def rank_row(cursor: Any, next_id: str = ID_PENDING) -> tuple[str, ...]:
    """One row of the per-rank table (strings: cheap to filter and render)."""
    return (
        str(cursor.rank), str(cursor.sp_group_index), str(cursor.row_group_position), str(cursor.row_offset),
        str(cursor.yielded_samples), str(cursor.next_sample_index),
        str(cursor.next_row_group) if cursor.next_row_group >= 0 else "-", next_id,
    )


def plan_summary(plan: Any) -> Text:
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
        ("manifest fingerprint", f"{plan.manifest_fingerprint[:16]}…"),
    )
    for label, value in rows:
        text.append(f"  {label:<22}", style="grey62")
        text.append(f"{value}\n", style="bold" if label == "epoch progress" else "")
    for warning in plan.warnings:
        text.append(f"⚠ {warning}\n", style="yellow")
    return text


#: Refusal fields that stop the config comparison (no run config or no embedded config to compare).
NOT_COMPARED_FIELDS = ("config", "checkpoint", "metadata.json", "metadata.config")


def mismatch_report(preview: Any) -> Text:
    """The mismatch report of a preview; never "matches" when the comparison could not run."""
    text = PlainText().append("Config mismatch report\n", style="bold underline")
    if not preview.mismatches:
        stopped = [r for r in preview.refusals if r.field in NOT_COMPARED_FIELDS]
        if stopped:
            return text.append(f"not compared: {stopped[0].field} refused (see above)\n", style="yellow")
    return text.append_text(render_mismatches(preview.mismatches))


class MigrationView(BaseView):
    """Form, preview (refusals, mismatches, summary, per-rank table), execute, verify."""

    write_actions = frozenset({"execute"})
    refuse_action = "refuse_execute"

    DEFAULT_CSS = """
    MigrationView #mig-left { width: 58; height: 1fr; padding: 0 1; }
    MigrationView #mig-right { width: 1fr; height: 1fr; border-left: solid $primary; }
    MigrationView .form-row { height: 1; }
    MigrationView .form-row Label { width: 23; color: $text-muted; }
    MigrationView .form-row Input { width: 1fr; }
    MigrationView #mig-flags { height: 1; margin-top: 1; }
    MigrationView #mig-derived { height: auto; color: $text-muted; margin: 1 0; }
    MigrationView #mig-buttons { height: 1; margin-bottom: 1; }
    MigrationView #mig-buttons Button { margin-right: 1; }
    MigrationView #mig-details { height: 1fr; }
    MigrationView #mig-banner { height: auto; padding: 0 1; }
    MigrationView #mig-banner.refused { background: $error 30%; color: $text; text-style: bold; }
    MigrationView #mig-banner.ok { background: $success 20%; }
    MigrationView #mig-receipt { height: auto; display: none; padding: 0 1;
                                 border: round $success; }
    MigrationView #mig-ranks { height: 1fr; }
    MigrationView #mig-mismatch-scroll { height: auto; max-height: 12; padding: 0 1; }
    MigrationView .view-filter { display: none; }
    """
    BINDINGS = [
        Binding("ctrl+r", "preview", "Preview", priority=True),
        Binding("ctrl+e", "execute", "Execute", priority=True),
        Binding("ctrl+e", "refuse_execute", "Execute", show=False, priority=True),
        Binding("ctrl+y", "verify", "Verify", priority=True),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._preview: Any = None
        self._rank_rows: list[tuple[str, ...]] = []
        self._busy = False
        self._last_receipt: dict | None = None
        self.next_ids_note: str | None = None

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="mig-left"):
                for label, wid, placeholder in (
                    ("checkpoint", "mig-checkpoint", "…/checkpoint-<step>"),
                    ("run config", "mig-config", "run.yaml"),
                    ("output dir", "mig-output", "where the sidecars go (outside the checkpoint)"),
                ):
                    with Horizontal(classes="form-row"):
                        yield Label(label)
                        yield PathInput(None, placeholder=placeholder, id=wid, compact=True)
                for _field, wid, label in INT_FIELDS:
                    with Horizontal(classes="form-row"):
                        yield Label(label)
                        yield Input(type="integer", id=wid, compact=True)
                with Horizontal(classes="form-row"):
                    yield Label("overrides")
                    yield Input(placeholder="k.a.b=value …", id="mig-overrides", compact=True)
                with Horizontal(id="mig-flags"):
                    yield Checkbox("overwrite existing sidecars", id="mig-overwrite", compact=True)
                    yield Checkbox("skip source check", id="mig-skip-source", compact=True)
                yield PlainStatic(id="mig-derived")
                with Horizontal(id="mig-buttons"):
                    yield Button("Preview ^R", id="mig-preview", variant="primary", compact=True)
                    yield Button("Execute ^E", id="mig-execute", variant="error", compact=True, disabled=True)
                    yield Button("Verify ^Y", id="mig-verify", compact=True)
                yield ProgressRow(id="mig-progress-row")
                with VerticalScroll(id="mig-details"):
                    yield PlainStatic(id="mig-summary")
            with Vertical(id="mig-right"):
                yield PlainStatic(PlainText("Select a legacy checkpoint in view 1 and press m, or fill the form; "
                                  "then Preview (ctrl+r).", style="italic"), id="mig-banner")
                yield PlainStatic(id="mig-receipt")
                with VerticalScroll(id="mig-mismatch-scroll"):
                    yield PlainStatic(id="mig-mismatch")
                yield Input(placeholder="filter ranks (Esc closes)", classes="view-filter")
                yield FastTable(id="mig-ranks", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#mig-ranks", DataTable)
        for label, width in RANK_COLUMNS:
            table.add_column(label, key=label, width=width)
        if self.read_only:
            execute = self.query_one("#mig-execute", Button)
            execute.label = "Execute (read-only)"

    def focus_main(self) -> None:
        """The rank table once there is a plan, else Preview (Enter previews; 1-4 still switch views)."""
        target = "#mig-ranks" if self._rank_rows else "#mig-preview"
        self.query_one(target).focus()

    def focus_table(self) -> None:
        self.query_one("#mig-ranks", DataTable).focus()

    # ------------------------------------------------------------ form

    def prefill(self, checkpoint: str, step: int | None) -> None:
        """Fill the form from a checkpoint and the loaded run config (derived values to confirm)."""
        st = self.app.state
        defaults = backend.migration_defaults(checkpoint, step, st.config_path, st.run_config)
        self._set("#mig-checkpoint", defaults.checkpoint)
        self._set("#mig-config", defaults.config_path)
        self._set("#mig-output", defaults.output_dir)
        for field, wid, _label in INT_FIELDS:
            value = getattr(defaults, field)
            self._set(f"#{wid}", "" if value is None else str(value))
        text = PlainText().append("Derived values: confirm or edit\n", style="bold")
        for note in defaults.derivation:
            text.append(f"  {note}\n")
        if st.run_config is None:
            text.append("  no run config loaded: world size and consumed batches need filling in\n", style="yellow")
        self.query_one("#mig-derived", Static).update(text)
        self._invalidate("form prefilled: press Preview (ctrl+r)")

    def _set(self, selector: str, value: str) -> None:
        box = self.query_one(selector, Input)
        with box.prevent(Input.Changed):
            box.value = value

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.has_class("view-filter"):
            super().on_input_changed(event)
            return
        if self._preview is not None:
            self._invalidate("the form changed: preview again before executing")

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if self._preview is not None:
            self._invalidate("the form changed: preview again before executing")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.has_class("view-filter"):
            super().on_input_submitted(event)
            return
        event.stop()
        self.action_preview()

    def _invalidate(self, message: str) -> None:
        """The form changed: drop the plan and everything shown from it (nothing stale stays up)."""
        self._preview = None
        self.query_one("#mig-execute", Button).disabled = True
        if self._rank_rows:
            self._rank_rows = []
            self.apply_filter(self.filter_text)
            self.query_one("#mig-summary", Static).update("")
            self.query_one("#mig-mismatch", Static).update("")
        banner = self.query_one("#mig-banner", Static)
        banner.set_classes("")
        banner.update(PlainText(message, style="italic"))

    def build_request(self) -> Any:
        """The MigrationRequest of the form; FvError naming the field when a value is not usable."""
        values: dict[str, Any] = {}
        for name, wid in (("checkpoint", "mig-checkpoint"), ("config_path", "mig-config"), ("output_dir", "mig-output")):
            text = self.query_one(f"#{wid}", Input).value.strip()
            if not text:
                raise FvError(f"migration form: field '{name}' is empty")
            values[name] = os.path.expanduser(text)
        for name, wid, label in INT_FIELDS:
            text = self.query_one(f"#{wid}", Input).value.strip()
            try:
                values[name] = int(text)
            except ValueError:
                raise FvError(f"migration form: field '{name}' ({label}) must be an integer (got {text!r})") from None
        try:
            overrides = tuple(shlex.split(self.query_one("#mig-overrides", Input).value))
        except ValueError as exc:
            raise FvError(f"migration form: field 'overrides' cannot be parsed ({exc})") from None
        values["overrides"] = overrides
        values["overwrite"] = self.query_one("#mig-overwrite", Checkbox).value
        values["skip_source_check"] = self.query_one("#mig-skip-source", Checkbox).value
        return backend.make_request(**values)

    # ------------------------------------------------------------ preview

    def on_button_pressed(self, event: Button.Pressed) -> None:
        actions = {"mig-preview": self.action_preview, "mig-execute": self.action_execute,
                   "mig-verify": self.action_verify}
        if event.button.id in actions:
            event.stop()
            actions[event.button.id]()

    def _start(self, label: str) -> ThreadProgress | None:
        if self._busy:
            self.notify("busy: wait for the running action to finish", severity="warning")
            return None
        self._busy = True
        return self.query_one("#mig-progress-row", ProgressRow).start(label)

    def _finish(self) -> None:
        self._busy = False
        self.query_one("#mig-progress-row", ProgressRow).stop()

    def action_preview(self) -> None:
        try:
            request = self.build_request()
        except FvError as exc:
            self.report_error(exc)
            return
        progress = self._start("building the plan …")
        if progress is None:
            return
        self.query_one("#mig-receipt", Static).display = False
        self.run_in_thread(lambda: backend.preview(request, progress), self._show_preview,
                           group="mig-preview", on_error=self._failed)

    def _failed(self, exc: BaseException) -> None:
        self._finish()
        self.report_error(exc)
        if isinstance(exc, PartialFailure):
            details = json.dumps(exc.report, indent=2, sort_keys=True, default=str)[:4000]
            self.app.push_screen(ErrorScreen("Migration failed part-way", f"{exc}\n\n{details}"))
        banner = self.query_one("#mig-banner", Static)
        banner.set_classes("refused")
        banner.update(PlainText(f"✗ {exc}"))

    def _show_preview(self, preview: Any) -> None:
        self._finish()
        self._preview = preview
        banner = self.query_one("#mig-banner", Static)
        self.query_one("#mig-mismatch", Static).update(mismatch_report(preview))
        if preview.refusals:
            text = PlainText(f"✗ REFUSED: {len(preview.refusals)} problem(s); nothing can be written")
            for refusal in preview.refusals:
                if not refusal.message.startswith(refusal.field):
                    text.append(f"\n  {refusal.field}: ", style="bold")
                    text.append(refusal.message)
                else:
                    text.append(f"\n  {refusal.message}")
            banner.set_classes("refused")
            banner.update(text)
            self.query_one("#mig-summary", Static).update("")
            self._rank_rows = []
            self.apply_filter(self.filter_text)
            self.query_one("#mig-execute", Button).disabled = True
            return
        plan = preview.plan
        text = PlainText(f"✓ plan ready: {plan.world_size} sidecars for step {plan.step} → {plan.output_dir}")
        for warning in preview.warnings:
            text.append(f"\n⚠ {warning}", style="yellow")
        if not self.read_only:
            text.append("\nReview, then Execute (ctrl+e).", style="italic")
        banner.set_classes("ok")
        banner.update(text)
        self.query_one("#mig-summary", Static).update(plan_summary(plan))
        self._rank_rows = [rank_row(cursor) for cursor in plan.ranks]
        self.apply_filter(self.filter_text)
        self.query_one("#mig-execute", Button).disabled = self.read_only
        focused = self.app.focused
        if focused is None or focused.id == "mig-preview":  # previewed from the button: look at the ranks
            self.focus_table()
        self._load_next_ids(plan)

    # ------------------------------------------------------------ next sample ids

    def _load_next_ids(self, plan: Any) -> None:
        """Read each rank's next sample id in a worker (bounded); the table is usable meanwhile."""
        self.next_ids_note = None
        self.run_in_thread(lambda: backend.next_sample_ids(plan), lambda ids: self._show_next_ids(plan, ids),
                           group="mig-next-ids", on_error=lambda exc: self._next_ids_failed(plan, exc))

    def _current_plan(self) -> Any:
        return self._preview.plan if self._preview is not None else None

    def _show_next_ids(self, plan: Any, result: backend.NextSampleIds) -> None:
        if self._current_plan() is not plan:
            return  # a newer preview (or an edit) superseded this one
        self._fill_id_column(result.ids)
        self._set_next_ids_note(plan, result.note)

    def _next_ids_failed(self, plan: Any, exc: BaseException) -> None:
        if self._current_plan() is plan:
            self._fill_id_column({})
            self._set_next_ids_note(plan, f"next sample ids not read: {describe_error(exc)}")

    def _fill_id_column(self, ids: dict) -> None:
        """Replace the pending "next id" cells; refill the table only if a cell changed.

        Refilling 4096 rows costs tens of milliseconds, so it happens at most once per preview.
        """
        rows = [row[:-1] + (self._id_cell(ids.get(int(row[0]))),) for row in self._rank_rows]
        if rows != self._rank_rows:
            self._rank_rows = rows
            self.apply_filter(self.filter_text)

    def _set_next_ids_note(self, plan: Any, note: str | None) -> None:
        self.next_ids_note = note
        if note is not None:
            self.query_one("#mig-summary", Static).update(plan_summary(plan).append(f"ⓘ {note}\n", style="grey62"))

    @staticmethod
    def _id_cell(value: Any) -> str:
        return ID_NONE if value is None else str(value)

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#mig-ranks", DataTable)
        cursor = table.cursor_row
        table.clear()
        rows = self._rank_rows
        if text:
            rows = [row for row in rows if any(text == cell or text in cell for cell in row)]
        table.add_rows(rows)
        if 0 < cursor < len(rows):  # a refill (the ids arrived) keeps the operator's place
            table.move_cursor(row=cursor)

    # ------------------------------------------------------------ execute

    def action_refuse_execute(self) -> None:
        self.refuse_read_only("executing a migration")

    def action_execute(self) -> None:
        if self.refuse_read_only("executing a migration"):
            return
        plan = self._preview.plan if self._preview is not None else None
        if plan is None:
            self.notify("preview a valid plan first (ctrl+r)", severity="warning")
            return
        last = plan.world_size - 1
        body = [
            f"Write {plan.world_size} rank-local sidecars (dataloader_state_rank0.pt … rank{last}.pt)",
            "and migration_receipt.json (written last) into:",
            f"  {plan.output_dir}",
            "",
            f"Source checkpoint (read only, never modified): {plan.checkpoint}",
            f"Run config: {plan.config_path}",
            f"step {plan.step}, world size {plan.world_size}, sp {plan.sp_world_size}, "
            f"{plan.yielded_samples_per_rank} samples consumed per rank",
        ]
        if plan.request.overwrite:
            body.append("Existing sidecars in the output dir WILL be replaced (overwrite).")
        self.app.push_screen(ConfirmScreen("Write migration sidecars?", body, "Write sidecars"),
                             lambda ok: self._confirmed(plan, ok))

    def _confirmed(self, plan: Any, ok: bool | None) -> None:
        if not ok:
            self.notify("migration cancelled: nothing written")
            return
        if self.refuse_read_only("executing a migration"):
            return
        progress = self._start("writing sidecars …")
        if progress is None:
            return
        self.run_in_thread(lambda: backend.execute(plan, progress), lambda r: self._executed(plan, r),
                           group="mig-exec", on_error=self._failed)

    def _executed(self, plan: Any, receipt: dict) -> None:
        self._finish()
        self._last_receipt = receipt
        out = plan.output_dir
        text = PlainText().append("✓ migration written\n", style="bold green")
        text.append(f"receipt  {os.path.join(out, 'migration_receipt.json')}\n")
        text.append(f"{len(receipt.get('sidecars', []))} sidecars, step {receipt.get('step')}, world size "
                    f"{receipt.get('world_size')}, created {receipt.get('created_at_utc')}\n")
        text.append("Next step: resume from the unchanged legacy checkpoint with\n", style="bold")
        export = f"export FASTVIDEO_DATALOADER_STATE_DIR={shlex.quote(out)}"
        if len(export) > 74:  # keep it one shell command when the panel wraps it
            export = f"export FASTVIDEO_DATALOADER_STATE_DIR=\\\n{shlex.quote(out)}"
        text.append(export + "\n", style="bold cyan")
        text.append(f"(world size must stay {plan.world_size}; checkpoint: {plan.checkpoint})", style="grey62")
        receipt_box = self.query_one("#mig-receipt", Static)
        receipt_box.update(text)
        receipt_box.display = True
        banner = self.query_one("#mig-banner", Static)
        banner.set_classes("ok")
        banner.update(PlainText(f"✓ done: {len(receipt.get('sidecars', []))} sidecars + receipt in {out}"))
        self.query_one("#mig-execute", Button).disabled = True
        self._preview = None
        self.notify("migration written; next step shown in the receipt panel")

    # ------------------------------------------------------------ verify

    def action_verify(self) -> None:
        try:
            request = self.build_request()
        except FvError as exc:
            self.report_error(exc)
            return
        progress = self._start("verifying sidecars …")
        if progress is None:
            return
        self.run_in_thread(lambda: backend.verify(request, progress), self._verified, group="mig-verify",
                           on_error=self._failed)

    def _verified(self, result: Any) -> None:
        self._finish()
        banner = self.query_one("#mig-banner", Static)
        if result.ok:
            banner.set_classes("ok")
            banner.update(PlainText(f"✓ verify: {len(result.ranks)} sidecar(s) match the plan"))
            self.notify("sidecars verified")
        else:
            banner.set_classes("refused")
            text = PlainText(f"✗ verify failed: {len(result.problems)} problem(s)\n")
            for problem in result.problems[:20]:
                text.append(f"  {problem}\n")
            banner.update(text)
            self.notify("sidecar verification failed", severity="error")
