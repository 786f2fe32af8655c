"""View 1's prune: marks (space), the judgement on a fresh scan, the confirmation, the locked execution.

Why a module of its own: the checkpoints view lists and explains; this mixin adds the one write
action it offers, and words what the operator confirms (what goes, what stays and why, the
bytes freed; the confirmation scrolls past a screenful and fits 80x24). Reasons are worded by
:mod:`fvconsole.tui.wording` (the console's words, never a flag). The view keeps ``listed``
(the rows), ``table.marked`` (the marked checkpoints' paths) and ``_prune_running`` (a prune is
being judged or run; not ``_pruning``, Textual's own flag on a widget being removed, which hid
the view while a prune ran).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from textual import work

from fvconsole.core.journal import appender
from fvconsole.core.retention import (
    LockedPrune,
    PruneOperation,
    PrunePlan,
    PruneRules,
    plan_prune,
    scan_output_dir,
)
from fvconsole.core.shared import human_bytes, plural, run_locked
from fvconsole.tui import state
from fvconsole.tui.checkpoints.text import ORPHANS
from fvconsole.tui.messages import CheckpointsPruned, PruneFailed, PrunePlanned
from fvconsole.tui.modals import ConfirmScreen, ErrorScreen
from fvconsole.tui.wording import reason_text


def prune_command(plan: PrunePlan) -> str:
    """How the journal names a console prune (``fvconsole history`` shows it)."""
    steps = " ".join(str(d.step) for d in plan.delete if not d.leftover)
    return f"fvconsole (console): checkpoints prune {plan.output_dir} marked {steps}".rstrip()


def confirm_lines(plan: PrunePlan, published: Mapping[int, str] | None = None) -> list[str]:
    """The confirmation's body: each checkpoint that goes (size, why; a published sidecar set it
    orphans, by step in ``published``: the set's dir), each that stays (why), the total."""
    published = published or {}
    lines = [f"Delete {len(plan.delete)} from {plan.output_dir}:"]
    for item in plan.delete:
        lines.append(f"  checkpoint-{item.step}  {human_bytes(item.bytes):>9}  "
                     + "; ".join(reason_text(r) for r in item.why))
        if not item.leftover and item.step in published:
            lines.append(f"    ⚠ {ORPHANS}: {published[item.step]}")
    lines.append("Keep:" if plan.kept else "Keep: nothing")
    for kept in plan.kept:
        lines.append(f"  checkpoint-{kept.step}  {reason_text(kept.why[0])}")
    lines.append(f"Frees {human_bytes(plan.freed_bytes)}. Each one is renamed out of the checkpoint-<step> "
                 "pattern first, re-checked, then removed; nothing else is touched.")
    lines += [f"⚠ {note}" for note in plan.notes]
    return lines


def result_summary(done: LockedPrune) -> str:
    result = done.result
    return f"pruned {plural(len(result.removed), 'checkpoint')}, freed {human_bytes(result.freed_bytes)}"


def result_lines(done: LockedPrune) -> list[str]:
    """What the execution did, for the error dialog when it failed part-way."""
    result = done.result
    lines = [result_summary(done)]
    lines += [f"left in place: checkpoint-{left.step}: {reason_text(left.why)}" for left in result.left]
    lines += list(result.errors[:40])
    return lines


class PruneMarks:
    """Marks and the prune action of :class:`~fvconsole.tui.checkpoints.view.CheckpointsView`."""

    listed: tuple[Any, ...]
    table: Any  # the view's CheckpointTable: its ``marked`` holds the marks
    _prune_running: bool

    def action_toggle_mark(self) -> None:
        table = self.table
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.marked = table.marked ^ {key}
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)

    def action_refuse(self, what: str) -> None:
        self.refuse_read_only(what)

    def action_prune_marked(self) -> None:
        if self.refuse_read_only("prune"):
            return
        path = self.app.state.checkpoints_path
        marked = {r.info.step for r in self.listed if r.info.path in self.table.marked}
        if not path or not marked:
            self.notify("mark checkpoints with space first", severity="warning")
            return
        if self._prune_running:
            self.notify("busy: wait for the running prune", severity="warning")
            return
        self._prune_running = True
        self.plan_prune(path, PruneRules(marked=frozenset(marked)))

    @work(thread=True, exclusive=True, group="ckpt-prune-plan", exit_on_error=False)
    def plan_prune(self, path: str, rules: PruneRules) -> None:
        """Judge the marks on a fresh scan: the confirmation shows exactly what is judged now."""
        with self.failures(PruneFailed):
            self.deliver(PrunePlanned(plan_prune(scan_output_dir(path, now=state.now()), rules)))

    def on_prune_planned(self, message: PrunePlanned) -> None:
        self._prune_running = False
        plan = message.plan
        if not plan.delete:
            kept = "; ".join(f"checkpoint-{k.step}: {reason_text(k.why[0])}" for k in plan.kept
                             if k.step in plan.rules.marked)
            self.notify(f"nothing to prune: {kept}", severity="warning", timeout=10)
            return
        published = {r.info.step: r.published.output_dir for r in self.listed if r.published is not None}
        self.app.push_screen(ConfirmScreen(f"Prune {plural(len(plan.delete), 'checkpoint')}?",
                                           confirm_lines(plan, published), "Prune"),
                             lambda ok: self._prune_confirmed(plan, ok))

    def _prune_confirmed(self, plan: PrunePlan, ok: bool | None) -> None:
        if not ok:
            self.notify("prune cancelled: nothing deleted")
            return
        if self.refuse_read_only("prune") or self._prune_running:
            return
        self._prune_running = True
        self.prune(plan, prune_command(plan), self.app.state.journal())

    @work(thread=True, exclusive=True, group="ckpt-prune", exit_on_error=False)
    def prune(self, plan: PrunePlan, command: str, journal: str) -> None:
        """Under the output dir's lock: judged again, and only what was confirmed and still may go is removed."""
        confirmed = {d.path for d in plan.delete}

        def make_plan() -> PrunePlan:
            fresh = plan_prune(scan_output_dir(plan.output_dir, now=state.now()), plan.rules)
            return replace(fresh, delete=tuple(d for d in fresh.delete if d.path in confirmed or d.leftover))

        with self.failures(PruneFailed):
            run = run_locked(PruneOperation(plan.output_dir, make_plan, command=command), journal=appender(journal))
            self.deliver(CheckpointsPruned(LockedPrune.of(run)))

    def on_checkpoints_pruned(self, message: CheckpointsPruned) -> None:
        self._prune_running = False
        done = message.done
        if done.result.ok:
            self.notify(result_summary(done))
        else:
            self.notify(f"prune failed part-way: {result_summary(done)}", severity="error", timeout=10)
            self.app.push_screen(ErrorScreen("Prune failed part-way", "\n".join(result_lines(done))))
        for warning in done.warnings:
            self.notify(warning, severity="warning", timeout=15)
        if done.journal is not None:
            if not done.journal.written:
                self.notify(f"journal {done.journal.path}: {done.journal.error}; the prune itself is done",
                            severity="warning", timeout=10)
            self.app.journal_written()
        self.table.marked = frozenset()
        self.refresh_view()

    def on_prune_failed(self, message: PruneFailed) -> None:
        self._prune_running = False
        self.report_error(message.error)
