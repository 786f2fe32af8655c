"""View 2: migrate a legacy checkpoint to rank-local sidecars.

Preview → (confirm) → execute, through the same core calls as ``fvconsole migrate``:
``plan_migration(request)`` builds the plan (output dir rules included, as the dry run),
``execute_migration(plan)`` writes exactly that plan, ``verify_sidecars`` checks a written set.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label
from textual.widgets.data_table import ColumnKey

from fvconsole.core.journal import JournalWrite
from fvconsole.core.migration import (
    MigrationDefaults,
    MigrationFailed,
    MigrationPlan,
    MigrationPreview,
    MigrationRequest,
    MigrationResult,
    NextSampleIds,
    PublishedSet,
    VerifyResult,
    defaults_from_published,
    migration_defaults,
    next_sample_ids,
    plan_migration,
    run_migration,
    verify_sidecars,
)
from fvconsole.core.shared import FvError, PartialFailure, Progress
from fvconsole.tui import migration_text as mt
from fvconsole.tui.base import BaseView, ViewMessage, describe_error
from fvconsole.tui.checkpoints_view import export_line
from fvconsole.tui.modals import ConfirmScreen, ErrorScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets import FastTable, OneLine, PathInput, PathsLine, PlainStatic, ProgressRow

INT_FIELDS = (
    ("expected_step", "mig-step", "expected step"),
    ("expected_world_size", "mig-world", "world size"),
    ("consumed_batches_per_rank", "mig-consumed", "consumed batches/rank"),
)
PATH_FIELDS = (
    ("checkpoint", "mig-checkpoint", "checkpoint", "…/checkpoint-<step>"),
    ("config_path", "mig-config", "run config", "run.yaml"),
    ("output_dir", "mig-output", "output dir", "where the sidecars go (outside the checkpoint)"),
)


def console_command(plan: MigrationPlan) -> str:
    """How the journal names a console migration (as ``fvconsole console: evict marked`` for an eviction)."""
    parts = [f"fvconsole console: migrate step {plan.step}, world size {plan.world_size}"]
    if plan.request.overwrite:
        parts.append("overwrite")
    if plan.request.skip_source_check:
        parts.append("skip source check")
    return ", ".join(parts)


class PinnedScroll(VerticalScroll):
    """A VerticalScroll that keeps one widget (the verdict) at the top while the panels below
    it are still filling in (next sample ids, the receipt), until the user scrolls or types.

    Scrolling once, right after an update, landed wherever the layout happened to be at that
    moment: a row or a screen off, depending on which worker finished first.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pinned: Widget | None = None

    def pin(self, widget: Widget | None) -> None:
        self.pinned = widget
        self._to_pinned()

    def watch_virtual_size(self) -> None:
        self.call_after_refresh(self._to_pinned)

    def _to_pinned(self) -> None:
        if self.pinned is not None and self.pinned.is_mounted:
            self.scroll_to_widget(self.pinned, top=True, animate=False, immediate=True)

    def on_mouse_scroll_up(self) -> None:
        self.pinned = None

    def on_mouse_scroll_down(self) -> None:
        self.pinned = None


class MigrationView(BaseView):
    """Form, preview (refusals, mismatches, summary, per-rank table), execute, verify."""

    TITLE = "2 Migration"
    TABLE = "mig-ranks"
    write_actions = frozenset({"execute"})
    refuse_action = "refuse_execute"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "preview", "Preview", priority=True,
                tooltip="preview: build the plan from the form (also Enter in a field): refusals, "
                        "mismatches, summary, per-rank table"),
        Binding("ctrl+e", "execute", "Execute", priority=True,
                tooltip="write the previewed sidecars and receipt (asks first, focus on Cancel)"),
        Binding("ctrl+e", "refuse_execute", "Execute", show=False, priority=True),
        Binding("ctrl+y", "verify", "Verify", priority=True,
                tooltip="verify the sidecars in the output dir against the form"),
        Binding("y", "copy_export", "Copy export",
                tooltip="copy the export FASTVIDEO_DATALOADER_STATE_DIR=… line to the clipboard"),
    ]

    @dataclass
    class Previewed(ViewMessage):
        preview: MigrationPreview

    @dataclass
    class Executed(ViewMessage):
        result: MigrationResult
        journal: JournalWrite | None = None

    @dataclass
    class Verified(ViewMessage):
        result: VerifyResult

    @dataclass
    class ActionFailed(ViewMessage):
        error: BaseException
        journal: JournalWrite | None = None  # a migration that failed part-way is journaled too

    @dataclass
    class NextIdsRead(ViewMessage):
        plan: MigrationPlan
        result: NextSampleIds | None
        error: BaseException | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._preview: MigrationPreview | None = None
        self._rank_rows: list[tuple[str, ...]] = []
        self._busy = False
        self._export: str | None = None  # the export line of the last written or found set
        self._offered: str | None = None  # receipt path of the set the form was filled from
        self.next_ids_note: str | None = None

    def compose(self) -> ComposeResult:
        with PinnedScroll(id="mig-scroll"):
            with Vertical(id="mig-form"):
                for _field, wid, label, placeholder in PATH_FIELDS:
                    with Horizontal(classes="form-row"):
                        yield Label(label)
                        yield PathInput(None, placeholder=placeholder, id=wid, compact=True)
                with Horizontal(id="mig-numbers"):
                    for _field, wid, label in INT_FIELDS:
                        with Horizontal(classes="num-field"):
                            yield Label(label)
                            yield Input(type="integer", id=wid, compact=True)
                with Horizontal(classes="form-row"):
                    yield Label("overrides")
                    yield Input(placeholder="k.a.b=value …", id="mig-overrides", compact=True)
                with Horizontal(id="mig-flags"):
                    yield Checkbox("overwrite existing sidecars", id="mig-overwrite", compact=True)
                    yield Checkbox("skip source check", id="mig-skip-source", compact=True)
                with Horizontal(id="mig-buttons"):
                    yield Button("Preview ^R", id="mig-preview", variant="primary", compact=True)
                    yield Button("Execute ^E", id="mig-execute", variant="error", compact=True, disabled=True)
                    yield Button("Verify ^Y", id="mig-verify", compact=True)
                yield PlainStatic(id="mig-derived")
            yield ProgressRow(id="mig-progress-row")
            yield PlainStatic(PlainText("Select a legacy checkpoint in view 1 and press m, or fill the form; "
                                        "then Preview (ctrl+r).", style="italic"), id="mig-banner", classes="banner")
            with Vertical(id="mig-receipt"):
                yield PlainStatic(id="mig-receipt-title")
                yield PathsLine(id="mig-receipt-path")
                yield PlainStatic(id="mig-receipt-text")
                yield OneLine(id="mig-export")
                yield PlainStatic(id="mig-receipt-note")
            # The rank table comes first so that, stacked at narrow widths, it follows the banner;
            # at wide widths the summary is docked to its left.
            with Container(id="mig-results"):
                with Vertical(id="mig-table-pane"):
                    yield Input(placeholder="filter ranks (Esc closes)", classes="view-filter")
                    yield FastTable(id="mig-ranks", cursor_type="row", zebra_stripes=True, flex="next_id",
                                    shrink={"next_id": 8},
                                    sortable=[key for _l, key, _w in mt.RANK_COLUMNS])
                with Vertical(id="mig-info"):
                    yield PlainStatic(id="mig-summary")
                    yield PlainStatic(id="mig-mismatch")

    def on_mount(self) -> None:
        table = self.query_one("#mig-ranks", FastTable)
        for label, key, width in mt.RANK_COLUMNS:
            table.add_column(label, key=key, width=width)
        if self.read_only:
            self.query_one("#mig-execute", Button).label = "Execute (read-only)"

    def focus_main(self) -> None:
        """The rank table once there is a plan, else Preview (Enter previews; 1-4 still switch views)."""
        target = "#mig-ranks" if self._rank_rows else "#mig-preview"
        self.query_one(target).focus()

    # ------------------------------------------------------------ form

    def prefill(self, checkpoint: str, step: int | None) -> None:
        """Fill the form from a checkpoint and the loaded run config (derived values to confirm)."""
        st = self.app.state
        self._fill(migration_defaults(checkpoint, step, st.config_path, st.run_config),
                   no_config=st.run_config is None)
        self._offered = None
        self.query_one("#mig-receipt").display = False
        self._invalidate("form filled in: check the values, then Preview (ctrl+r)")

    def offer_published(self, found: PublishedSet | None) -> None:
        """After a restart: fill an empty form from the last migration's receipt and show it."""
        if found is None or self._busy or self._preview is not None:
            return
        if self.query_one("#mig-checkpoint", Input).value.strip() and self._offered != found.receipt_path:
            return
        self._fill(defaults_from_published(found))
        self._offered = found.receipt_path
        self._export = export_line(found.output_dir)
        self._show_receipt(mt.published_receipt_text(found))
        self._invalidate("the last migration, from its receipt: Verify (ctrl+y) checks it, Preview plans it again")

    def _fill(self, defaults: MigrationDefaults, no_config: bool = False) -> None:
        self._set("#mig-checkpoint", defaults.checkpoint)
        self._set("#mig-config", defaults.config_path)
        self._set("#mig-output", defaults.output_dir)
        for field, wid, _label in INT_FIELDS:
            value = getattr(defaults, field)
            self._set(f"#{wid}", "" if value is None else str(value))
        self._set("#mig-overrides", " ".join(shlex.quote(o) for o in defaults.overrides))
        text = PlainText().append("Derived values: confirm or edit\n", style="bold")
        for note in defaults.derivation:
            text.append(f"  {note}\n")
        if no_config:
            text.append("  no run config loaded: world size and consumed batches need filling in\n", style="yellow")
        self.query_one("#mig-derived", PlainStatic).update(text)

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
        self.query_one("#mig-scroll", PinnedScroll).pinned = None
        self._preview = None
        self.query_one("#mig-execute", Button).disabled = True
        if self._rank_rows:
            self._rank_rows = []
            self.apply_filter(self.filter_text)
        self.query_one("#mig-summary", PlainStatic).update("")
        self.query_one("#mig-mismatch", PlainStatic).update("")
        self._set_banner(PlainText(message, style="italic"), "")

    def _set_banner(self, text: PlainText, kind: str) -> None:
        banner = self.query_one("#mig-banner", PlainStatic)
        banner.set_classes(f"banner {kind}".strip())
        banner.update(text)

    def build_request(self) -> MigrationRequest:
        """The MigrationRequest of the form; FvError naming the field when a value is not usable."""
        paths: dict[str, str] = {}
        for name, wid, label, _placeholder in PATH_FIELDS:
            text = self.query_one(f"#{wid}", Input).value.strip()
            if not text:
                raise FvError(f"migration form: {label} is empty")
            paths[name] = os.path.expanduser(text)
        numbers: dict[str, int] = {}
        for name, wid, label in INT_FIELDS:
            text = self.query_one(f"#{wid}", Input).value.strip()
            try:
                numbers[name] = int(text)
            except ValueError:
                raise FvError(f"migration form: {label} must be an integer (got {text!r})") from None
        try:
            overrides = tuple(shlex.split(self.query_one("#mig-overrides", Input).value))
        except ValueError as exc:
            raise FvError(f"migration form: overrides cannot be parsed ({exc})") from None
        return MigrationRequest(
            config_path=paths["config_path"], checkpoint=paths["checkpoint"], output_dir=paths["output_dir"],
            expected_step=numbers["expected_step"], expected_world_size=numbers["expected_world_size"],
            consumed_batches_per_rank=numbers["consumed_batches_per_rank"], overrides=overrides,
            overwrite=self.query_one("#mig-overwrite", Checkbox).value,
            skip_source_check=self.query_one("#mig-skip-source", Checkbox).value,
        )

    # ------------------------------------------------------------ actions

    def on_button_pressed(self, event: Button.Pressed) -> None:
        actions = {"mig-preview": self.action_preview, "mig-execute": self.action_execute,
                   "mig-verify": self.action_verify}
        if event.button.id in actions:
            event.stop()
            actions[event.button.id]()

    def _start(self, label: str) -> Progress | None:
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
        if progress is not None:
            self.query_one("#mig-receipt").display = False
            self.run_preview(request, progress)

    @work(thread=True, exclusive=True, group="mig-preview", exit_on_error=False)
    def run_preview(self, request: MigrationRequest, progress: Progress) -> None:
        with self.failures(self.ActionFailed):
            self.deliver(self.Previewed(plan_migration(request, progress)))

    def _journaled(self, journal: JournalWrite | None) -> None:
        """Say when the journal line could not be appended (the action stands); refresh History."""
        if journal is None:
            return
        if not journal.written:
            self.notify(f"journal {journal.path}: {journal.error}; the migration itself stands", severity="warning",
                        timeout=10)
        self.app.journal_written()

    def on_migration_view_action_failed(self, message: ActionFailed) -> None:
        self._finish()
        exc = message.error
        self.report_error(exc)
        self._journaled(message.journal)
        if isinstance(exc, PartialFailure):
            details = json.dumps(exc.report, indent=2, sort_keys=True, default=str)[:4000]
            self.app.push_screen(ErrorScreen("Migration failed part-way", f"{describe_error(exc)}\n\n{details}"))
        self._set_banner(PlainText(f"✗ {describe_error(exc)}"), "refused")

    def on_migration_view_previewed(self, message: Previewed) -> None:
        self._finish()
        preview = message.preview
        self._preview = preview
        self.query_one("#mig-mismatch", PlainStatic).update(mt.mismatch_report(preview))
        if preview.plan is None:
            self._set_banner(mt.refusal_banner(preview), "refused")
            self.query_one("#mig-summary", PlainStatic).update("")
            self._rank_rows = []
            self.apply_filter(self.filter_text)
            self.query_one("#mig-execute", Button).disabled = True
            return
        plan = preview.plan
        self._set_banner(mt.plan_banner(plan, preview.notes, self.read_only), "ok")
        self.query_one("#mig-summary", PlainStatic).update(mt.plan_summary(plan))
        self._rank_rows = [(*cursor.cells(), mt.ID_PENDING) for cursor in plan.ranks]
        self.apply_filter(self.filter_text)
        self.query_one("#mig-execute", Button).disabled = self.read_only
        focused = self.app.focused
        if focused is None or focused.id == "mig-preview":  # previewed from the button: look at the ranks
            self.focus_table()
        self._verdict_on_top()
        self.next_ids_note = None
        self.read_next_ids(plan)

    # ------------------------------------------------------------ next sample ids

    @work(thread=True, exclusive=True, group="mig-next-ids", exit_on_error=False)
    def read_next_ids(self, plan: MigrationPlan) -> None:
        """Each rank's next sample id, read in a worker (bounded); the table is usable meanwhile."""
        with self.failures(lambda exc: self.NextIdsRead(plan, None, exc)):
            self.deliver(self.NextIdsRead(plan, next_sample_ids(plan)))

    def _current_plan(self) -> MigrationPlan | None:
        return self._preview.plan if self._preview is not None else None

    def on_migration_view_next_ids_read(self, message: NextIdsRead) -> None:
        if self._current_plan() is not message.plan:
            return  # a newer preview (or an edit) superseded this one
        ids = message.result.ids if message.result is not None else {}
        install = mt.install_cell(message.result)
        if install is not None:  # no pyarrow (the lean install): say which extra reads the ids
            self._widen_id_column(len(install))
        rows = [row[:-1] + (install or (mt.ID_NONE if ids.get(int(row[0])) is None else str(ids[int(row[0])])),)
                for row in self._rank_rows]
        if rows != self._rank_rows:  # refilling 4096 rows costs tens of ms: at most once per preview
            self._rank_rows = rows
            self.apply_filter(self.filter_text)
        if message.result is not None:
            self.next_ids_note = mt.next_ids_note(message.result)
        else:
            self.next_ids_note = f"next sample ids not read: {describe_error(message.error)}"
        if self.next_ids_note is not None:
            self.query_one("#mig-summary", PlainStatic).update(mt.plan_summary(message.plan, self.next_ids_note))

    def _widen_id_column(self, width: int) -> None:
        """Make the "next id" column wide enough for ``width`` cells (the install hint)."""
        table = self.query_one("#mig-ranks", FastTable)
        column = table.columns.get(ColumnKey("next_id"))
        if column is not None and column.width < width:
            column.width = width
            table.refresh(layout=True)

    def apply_filter(self, text: str) -> None:
        table = self.query_one("#mig-ranks", FastTable)
        cursor = table.cursor_row
        table.clear()
        keys = {key: mt.rank_sort_key(i) for i, (_l, key, _w) in enumerate(mt.RANK_COLUMNS)}
        rows = table.ordered(self._rank_rows, keys)
        if text:
            rows = [row for row in rows if any(text == cell or text in cell for cell in row)]
        table.add_rows(rows)
        if 0 < cursor < len(rows):  # a refill (the ids arrived) keeps the operator's place
            table.move_cursor(row=cursor)

    def on_fast_table_sorted(self, event: FastTable.Sorted) -> None:
        self.apply_filter(self.filter_text)

    # ------------------------------------------------------------ execute

    def action_refuse_execute(self) -> None:
        self.refuse_read_only("executing a migration")

    def action_execute(self) -> None:
        if self.refuse_read_only("executing a migration"):
            return
        plan = self._current_plan()
        if plan is None:
            self.notify("preview a valid plan first (ctrl+r)", severity="warning")
            return
        self.app.push_screen(ConfirmScreen("Write migration sidecars?", mt.confirm_body(plan), "Write sidecars"),
                             lambda ok: self._confirmed(plan, ok))

    def _confirmed(self, plan: MigrationPlan, ok: bool | None) -> None:
        if not ok:
            self.notify("migration cancelled: nothing written")
            return
        if self.refuse_read_only("executing a migration"):
            return
        progress = self._start("writing sidecars …")
        if progress is not None:
            self.run_execute(plan, progress, self.app.state.journal())

    @work(thread=True, exclusive=True, group="mig-exec", exit_on_error=False)
    def run_execute(self, plan: MigrationPlan, progress: Progress, journal: str) -> None:
        """Write the plan and journal it: ``run_migration``, as ``migrate --yes`` runs it.

        A journal that cannot be written never undoes the write: the view reports it.
        """
        with self.failures(self.ActionFailed):
            try:
                run = run_migration(plan, command=console_command(plan), journal_path=journal, progress=progress)
            except MigrationFailed as exc:
                self.deliver(self.ActionFailed(exc, exc.journal))
                return
            self.deliver(self.Executed(run.result, run.journal))

    def on_migration_view_executed(self, message: Executed) -> None:
        self._finish()
        result = message.result
        plan, receipt, out = result.plan, result.receipt, result.output_dir
        self._export = export_line(out)
        self._show_receipt(mt.receipt_text(out, receipt, plan.world_size, plan.checkpoint))
        self._set_banner(mt.executed_banner(result), "ok")
        self._verdict_on_top()
        self.query_one("#mig-execute", Button).disabled = True
        self._preview = None
        self.notify("migration written; the next step is in the receipt panel (y copies it)")
        self._journaled(message.journal)
        self.app.migration_written()

    def _verdict_on_top(self) -> None:
        """Keep the verdict (banner) at the top while the panels below it fill in."""
        scroll = self.query_one("#mig-scroll", PinnedScroll)
        self.call_after_refresh(scroll.pin, self.query_one("#mig-banner"))

    def on_key(self) -> None:
        self.query_one("#mig-scroll", PinnedScroll).pinned = None  # the user takes over

    def _show_receipt(self, parts: tuple[Text, str, Text, str, Text]) -> None:
        """The receipt panel; its export line on one unwrapped line, so a mouse copy has no breaks,
        and the receipt's path on one line that elides its middle when it does not fit."""
        title, receipt, head, export, note = parts
        self.query_one("#mig-receipt-title", PlainStatic).update(title)
        self.query_one("#mig-receipt-path", PathsLine).show([("receipt", receipt, "")])
        self.query_one("#mig-receipt-text", PlainStatic).update(head)
        self.query_one("#mig-export", OneLine).update(Text(export, style="bold cyan"))
        self.query_one("#mig-receipt-note", PlainStatic).update(note)
        self.query_one("#mig-receipt").display = True

    def action_copy_export(self) -> None:
        if self._export is None:
            self.notify("nothing to copy yet: write (or verify) a migration first", severity="warning")
            return
        self.app.copy_to_clipboard(self._export)
        self.notify(f"copied to the clipboard: {self._export}")

    # ------------------------------------------------------------ verify

    def action_verify(self) -> None:
        try:
            request = self.build_request()
        except FvError as exc:
            self.report_error(exc)
            return
        progress = self._start("verifying sidecars …")
        if progress is not None:
            self.run_verify(request, progress)

    @work(thread=True, exclusive=True, group="mig-verify", exit_on_error=False)
    def run_verify(self, request: MigrationRequest, progress: Progress) -> None:
        with self.failures(self.ActionFailed):
            result = verify_sidecars(request.config_path, request.checkpoint, request.output_dir,
                                     overrides=request.overrides, progress=progress)
            self.deliver(self.Verified(result))

    def on_migration_view_verified(self, message: Verified) -> None:
        self._finish()
        result = message.result
        if result.ok:
            self._export = export_line(result.sidecar_dir or self.query_one("#mig-output", Input).value.strip())
            text = PlainText(f"✓ verify: {len(result.ranks)} sidecar(s) match the plan (y copies the export line)")
            upstream = result.upstream_validation
            if upstream is not None:
                text.append(f"\n✓ {upstream.summary()}")
            self._set_banner(text, "ok")
            self.notify("sidecars verified")
            return
        text = PlainText(f"✗ verify failed: {len(result.problems)} problem(s)\n")
        for problem in result.problems[:20]:
            text.append(f"  {describe_error(FvError(problem))}\n")
        self._set_banner(text, "refused")
        self.notify("sidecar verification failed", severity="error")
