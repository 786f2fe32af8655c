"""View 2: migrate a legacy checkpoint to rank-local sidecars.

Preview → (confirm) → execute, through the same core calls as ``fvconsole migrate``:
``preview_migration(request)`` builds the plan (output dir rules included, as the dry run),
``execute_migration(plan)`` writes exactly that plan, ``verify_sidecars`` checks a written set.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.reactive import var
from textual.widgets import Button, Input

from fvconsole.core.journal import JournalWrite, appender
from fvconsole.core.migration import (
    MigrationOperation,
    MigrationPlan,
    MigrationPreview,
    MigrationRequest,
    PublishedSet,
    Reshard,
    defaults_from_published,
    migration_defaults,
    next_sample_ids,
    preview_migration,
    verify_sidecars,
)
from fvconsole.core.shared import FvError, PartialFailure, Progress, plural, run_locked
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.checkpoints.text import export_line
from fvconsole.tui.messages import (
    FormEdited,
    FormSubmitted,
    MigrationActionFailed,
    MigrationExecuted,
    MigrationPreviewed,
    MigrationVerified,
    NextIdsRead,
)
from fvconsole.tui.migration import text as mt
from fvconsole.tui.migration.form import MigrationForm
from fvconsole.tui.migration.panels import (
    HINT,
    PinnedScroll,
    RankRow,
    RankTable,
    ReceiptPanel,
    ReceiptParts,
    Stage,
    TableNote,
    Verdict,
)
from fvconsole.tui.migration.reshard import ReshardPanel
from fvconsole.tui.modals import ConfirmScreen, ErrorScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.progress import ProgressRow
from fvconsole.tui.widgets.statics import BoundStatic


def console_command(plan: MigrationPlan) -> str:
    """How the journal names a console migration (as ``fvconsole console: evict marked`` for an eviction)."""
    parts = [f"fvconsole console: migrate step {plan.step}, world size {plan.world_size}"]
    if plan.request.overwrite:
        parts.append("overwrite")
    if plan.request.skip_source_check:
        parts.append("skip source check")
    return ", ".join(parts)


class MigrationView(BaseView):
    """Form, preview (refusals, mismatches, summary, per-rank table), execute, verify.

    Its state is a handful of reactive attributes, bound to the widgets that draw them:
    ``stage`` (which panels show, whether Execute is enabled), ``verdict`` (the banner),
    ``rank_rows``, ``summary``, ``mismatch`` and ``receipt``. Handlers of the workers'
    messages set them; nothing here updates a widget by hand.
    """

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

    stage: var[Stage] = var(Stage.EDITING, init=False)
    verdict: var[tuple[Text, str]] = var(lambda: (PlainText(HINT, style="italic"), ""), always_update=True,
                                         init=False)
    rank_rows: var[tuple[RankRow, ...]] = var((), init=False)
    summary: var[Text] = var(PlainText, always_update=True, init=False)
    #: Why the "next id" column lacks ids (no pyarrow, too many row groups, unreadable files), under the table.
    ids_note: var[Text] = var(PlainText, always_update=True, init=False)
    mismatch: var[Text] = var(PlainText, always_update=True, init=False)
    receipt: var[ReceiptParts | None] = var(None, always_update=True, init=False)
    #: The preview's elastic resume (every mode's accounting), None when the topology does not change.
    reshard: var[Reshard | None] = var(None, always_update=True, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._preview: MigrationPreview | None = None
        self._busy = False
        self._export: str | None = None  # the export line of the last written or found set
        self._offered: str | None = None  # receipt path of the set the form was filled from
        self.next_ids_note: str | None = None

    def compose(self) -> ComposeResult:
        self._scroll = PinnedScroll(id="mig-scroll")
        self._form = MigrationForm(self.read_only, id="mig-form").data_bind(MigrationView.stage)
        self._progress = ProgressRow(id="mig-progress-row")
        self._banner = Verdict(PlainText(HINT, style="italic"), id="mig-banner",
                               classes="banner").data_bind(MigrationView.verdict)
        self.ranks = RankTable(id="mig-ranks", cursor_type="row", zebra_stripes=True, flex="next_id",
                               shrink={"next_id": 8},
                               sortable=[key for _l, key, _w in mt.RANK_COLUMNS]).data_bind(MigrationView.rank_rows)
        with self._scroll:
            yield self._form
            yield self._progress
            yield self._banner
            yield ReshardPanel(id="mig-reshard-panel").data_bind(MigrationView.reshard)
            yield ReceiptPanel(id="mig-receipt").data_bind(MigrationView.stage, MigrationView.receipt)
            # The rank table comes first so that, stacked at narrow widths, it follows the banner;
            # at wide widths the summary is docked to its left.
            with Container(id="mig-results"):
                with Vertical(id="mig-table-pane"):
                    yield Input(placeholder="filter ranks (Esc closes)", classes="view-filter")
                    yield self.ranks
                    yield TableNote(id="mig-ids-note").data_bind(text=MigrationView.ids_note)
                with Vertical(id="mig-info"):
                    yield BoundStatic(id="mig-summary").data_bind(text=MigrationView.summary)
                    yield BoundStatic(id="mig-mismatch").data_bind(text=MigrationView.mismatch)

    def focus_main(self) -> None:
        """The rank table once there is a plan, else Preview (Enter previews; 1-4 still switch views)."""
        (self.ranks if self.rank_rows else self._form.preview_button).focus()

    # ------------------------------------------------------------ form

    def prefill(self, checkpoint: str, step: int | None) -> None:
        """Fill the form from a checkpoint and the loaded run config (derived values to confirm)."""
        st = self.app.state
        self._form.fill(migration_defaults(checkpoint, step, st.config_path, st.run_config),
                        no_config=st.run_config is None)
        self._offered = None
        self._invalidate("form filled in: check the values, then Preview (ctrl+r)")

    def offer_published(self, found: PublishedSet | None) -> None:
        """After a restart: fill an empty form from the last migration's receipt and show it."""
        if found is None or self._busy or self._preview is not None:
            return
        if self._form.checkpoint and self._offered != found.receipt_path:
            return
        self._form.fill(defaults_from_published(found))
        self._offered = found.receipt_path
        self._export = export_line(found.output_dir)
        self.receipt = mt.published_receipt_text(found)
        self._invalidate("the last migration, from its receipt: Verify (ctrl+y) checks it, Preview plans it again",
                         Stage.FOUND)

    def on_form_edited(self, message: FormEdited) -> None:
        if self.stage.previewed:
            self._invalidate("the form changed: preview again before executing")

    def on_form_submitted(self, message: FormSubmitted) -> None:
        self.action_preview()

    def _invalidate(self, message: str, stage: Stage = Stage.EDITING) -> None:
        """The form changed: drop the plan and everything shown from it (nothing stale stays up)."""
        self._scroll.pinned = None
        self._preview = None
        self.stage = stage
        self.rank_rows = ()
        self.summary = PlainText()
        self.ids_note = PlainText()
        self.mismatch = PlainText()
        self.reshard = None
        self.verdict = (PlainText(message, style="italic"), "")

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
        return self._progress.start(label)

    def _finish(self) -> None:
        self._busy = False
        self._progress.stop()

    def _request(self) -> MigrationRequest | None:
        """The form's request, or None (and the field's problem shown) when it has none."""
        try:
            return self._form.request()
        except FvError as exc:
            self.report_error(exc)
            return None

    def action_preview(self) -> None:
        request = self._request()
        progress = self._start("building the plan …") if request is not None else None
        if request is not None and progress is not None:
            if self.stage.receipt:  # a new plan replaces the receipt on screen
                self.stage = Stage.EDITING
            self.run_preview(request, progress)

    @work(thread=True, exclusive=True, group="mig-preview", exit_on_error=False)
    def run_preview(self, request: MigrationRequest, progress: Progress) -> None:
        with self.failures(MigrationActionFailed):
            self.deliver(MigrationPreviewed(preview_migration(request, progress)))

    def _journaled(self, journal: JournalWrite | None) -> None:
        """Say when the journal line could not be appended (the action stands); refresh History."""
        if journal is None:
            return
        if not journal.written:
            self.notify(f"journal {journal.path}: {journal.error}; the migration itself stands", severity="warning",
                        timeout=10)
        self.app.journal_written()

    def on_migration_action_failed(self, message: MigrationActionFailed) -> None:
        self._finish()
        exc = message.error
        self.report_error(exc)
        self._journaled(message.journal)
        if isinstance(exc, PartialFailure):
            details = json.dumps(exc.report, indent=2, sort_keys=True, default=str)[:4000]
            self.app.push_screen(ErrorScreen("Migration failed part-way", f"{describe_error(exc)}\n\n{details}"))
        self.verdict = (PlainText(f"✗ {describe_error(exc)}"), "refused")

    def on_migration_previewed(self, message: MigrationPreviewed) -> None:
        self._finish()
        preview = message.preview
        self._preview = preview
        self.mismatch = mt.mismatch_report(preview)
        self.reshard = preview.reshard
        if preview.plan is None:
            self.verdict = (mt.refusal_banner(preview), "refused")
            self.summary = PlainText()
            self.rank_rows = ()
            self.stage = Stage.REFUSED
            return
        plan = preview.plan
        self.verdict = (mt.plan_banner(plan, preview.notes, self.read_only), "ok")
        self.summary = mt.plan_summary(plan)
        self.rank_rows = tuple((*cursor.cells(), mt.ID_PENDING) for cursor in plan.ranks)
        self.stage = Stage.PLANNED
        focused = self.app.focused
        if focused is None or focused.id == "mig-preview":  # previewed from the button: look at the ranks
            self.focus_table()
        self._verdict_on_top()
        self.next_ids_note = None
        self.ids_note = PlainText()
        self.read_next_ids(plan)

    # ------------------------------------------------------------ next sample ids

    @work(thread=True, exclusive=True, group="mig-next-ids", exit_on_error=False)
    def read_next_ids(self, plan: MigrationPlan) -> None:
        """Each rank's next sample id, read in a worker (bounded); the table is usable meanwhile."""
        with self.failures(lambda exc: NextIdsRead(plan, None, exc)):
            self.deliver(NextIdsRead(plan, next_sample_ids(plan)))

    def _current_plan(self) -> MigrationPlan | None:
        return self._preview.plan if self._preview is not None else None

    def on_next_ids_read(self, message: NextIdsRead) -> None:
        if self._current_plan() is not message.plan:
            return  # a newer preview (or an edit) superseded this one
        ids = message.result.ids if message.result is not None else {}
        # Refilling 4096 rows costs tens of ms: at most once per preview (an equal value is no change).
        self.rank_rows = tuple(row[:-1] + (mt.ID_NONE if ids.get(int(row[0])) is None else str(ids[int(row[0])]),)
                               for row in self.rank_rows)
        if message.result is not None:
            self.next_ids_note = mt.next_ids_note(message.result)
        else:
            self.next_ids_note = f"next sample ids not read: {describe_error(message.error)}"
        # One note under the table (a missing extra: which one to install), never the same words in every cell.
        self.ids_note = mt.ids_note_text(self.next_ids_note)

    def apply_filter(self, text: str) -> None:
        self.ranks.filter_text = text

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
        """Write the plan and journal it through the one runner, as ``migrate --yes`` runs it.

        A journal that cannot be written never undoes the write: the view reports it.
        """
        with self.failures(MigrationActionFailed):
            operation = MigrationOperation(plan, command=console_command(plan))
            run = run_locked(operation, journal=appender(journal), progress=progress)
            result = operation.settled(run)
            if run.failure is not None:
                self.deliver(MigrationActionFailed(run.failure, run.journal))
                return
            self.deliver(MigrationExecuted(result, run.journal))

    def on_migration_executed(self, message: MigrationExecuted) -> None:
        self._finish()
        result = message.result
        plan, receipt, out = result.plan, result.receipt, result.output_dir
        self._export = export_line(out)
        self.receipt = mt.receipt_text(out, receipt, plan.world_size, plan.checkpoint)
        self.verdict = (mt.executed_banner(result), "ok")
        self.stage = Stage.WRITTEN
        self._verdict_on_top()
        self._preview = None
        self.notify("migration written; the next step is in the receipt panel (y copies it)")
        self._journaled(message.journal)
        self.app.migration_written()

    def _verdict_on_top(self) -> None:
        """Keep the verdict (banner) at the top while the panels below it fill in."""
        self.call_after_refresh(self._scroll.pin, self._banner)

    def on_key(self) -> None:
        self._scroll.pinned = None  # the user takes over

    def action_copy_export(self) -> None:
        if self._export is None:
            self.notify("nothing to copy yet: write (or verify) a migration first", severity="warning")
            return
        self.app.copy_to_clipboard(self._export)
        # OSC 52 asks the terminal; whether it (or tmux) passed it on, the console cannot know.
        self.notify(f"sent to the terminal's clipboard: {self._export}")

    # ------------------------------------------------------------ verify

    def action_verify(self) -> None:
        request = self._request()
        progress = self._start("verifying sidecars …") if request is not None else None
        if request is not None and progress is not None:
            self.run_verify(request, progress)

    @work(thread=True, exclusive=True, group="mig-verify", exit_on_error=False)
    def run_verify(self, request: MigrationRequest, progress: Progress) -> None:
        with self.failures(MigrationActionFailed):
            result = verify_sidecars(request.config_path, request.checkpoint, request.output_dir,
                                     overrides=request.overrides, progress=progress)
            self.deliver(MigrationVerified(result))

    def on_migration_verified(self, message: MigrationVerified) -> None:
        self._finish()
        result = message.result
        if result.ok:
            self._export = export_line(result.sidecar_dir or self._form.output_dir)
            text = PlainText(f"✓ verify: {plural(len(result.ranks), 'sidecar')} match the plan (y copies the export line)")
            upstream = result.upstream_validation
            if upstream is not None:
                text.append(f"\n✓ {upstream.summary()}")
            self.verdict = (text, "ok")
            self.notify("sidecars verified")
            return
        text = PlainText(f"✗ verify failed: {plural(len(result.problems), 'problem')}\n")
        for problem in result.problems[:20]:
            text.append(f"  {describe_error(FvError(problem))}\n")
        self.verdict = (text, "refused")
        self.notify("sidecar verification failed", severity="error")
