"""View 1's resume preflight: the verdict for the checkpoint the loaded config resumes from, and on a
key (w: will it resume) for the selected checkpoint.

Why a module of its own: the checkpoints view lists and explains; this mixin adds the one judgement
an operator wants before resubmitting (``core/preflight``), run in a worker thread (it reads every
rank's files) and shown in three lines above the table: the verdict, each check with its status,
and for a no-go the command that fixes its first problem. The selected checkpoint's full report
(one line per finding) goes to the detail pane. The wording is here, in pure functions that tests
call without an app; the records and their sentences are the core's (``PreflightReport.verdict``,
``fix_line``).
"""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual import work

from fvconsole.core.preflight import CHECKS, PreflightReport, PreflightRequest, run_preflight
from fvconsole.tui.base import Claim
from fvconsole.tui.messages import PreflightFailed, PreflightJudged
from fvconsole.tui.plain import PlainText, one_line

STYLES = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def summary_text(report: PreflightReport, width: int, subject: str) -> Text:
    """Three lines at most: the verdict (``subject``: what was judged), each check's worst status, the fix."""
    text = PlainText()
    text.append(f"preflight ({subject}): ", style="bold")
    text.append(one_line(report.verdict, max(width - len(subject) - 15, 20)),
                style="bold green" if report.go else "bold red")
    text.append("\n")
    for i, (name, status) in enumerate(report.statuses().items()):
        text.append(" · " if i else "")
        text.append(status, style=STYLES[status])
        text.append(f" {name}")
    if report.fix_line:
        text.append("\n")
        text.append(one_line(report.fix_line, width), style="italic")
    return text


def report_text(report: PreflightReport, width: int) -> Text:
    """The detail pane: where the inputs came from, every finding with its status, the fix, the verdict."""
    text = PlainText()
    head = (f"Preflight of {report.resume.name} (step {report.resume.step})" if report.resume is not None
            else "Preflight: a fresh start")
    text.append(f"{head} on {report.world_size} ranks, sp size {report.sp_size}\n", style="bold")
    for note in report.notes:
        text.append(f"  {note}\n", style="dim")
    order = {name: i for i, name in enumerate(CHECKS)}
    for check in sorted(report.checks, key=lambda c: order.get(c.check, len(order))):
        text.append(f"{check.status:<4} ", style=STYLES[check.status])
        text.append(f"{check.check:<10} {check.detail}\n")
    if report.fix_line:
        text.append(f"{report.fix_line}\n", style="italic")
    text.append(report.verdict, style="bold green" if report.go else "bold red")
    return text


class PreflightVerdict:
    """Mixin for the checkpoints view: ``preflight_run`` (the config's resume) and ``action_preflight`` (w)."""

    app: Any
    _detail: Any  # the view's detail pane (FitStatic)
    detail_claim: Claim  # the view's claim on it: w's report shows only if no cursor move came after w
    _preflight_panel: Any  # the three lines above the table (FitStatic)
    panel_claim: Claim  # the latest listing's verdict, never an earlier one that finished later
    #: The last verdict for the config's resume (None: none yet, or no config loaded).
    _preflight: PreflightReport | None = None

    def preflight_request(self, resume: str | None) -> PreflightRequest | None:
        """The request for the loaded config (None without one); ``resume``: a checkpoint, else the config's."""
        state = self.app.state
        config = state.run_config
        if not state.config_path or config is None:
            return None
        return PreflightRequest.from_flags(state.config_path, overrides=tuple(getattr(config, "overrides", ())),
                                           resume=resume, environ=os.environ)

    def preflight_run(self) -> None:
        """Judge the loaded config's resume (after each listing); nothing without a config."""
        request = self.preflight_request(None)
        if request is None:
            self._preflight_panel.update(PlainText(
                "preflight: load a run config (--config) to judge the next job's resume", style="dim"))
            return
        self._preflight_panel.update(PlainText("preflight: judging …", style="italic"))
        self.judge_resume(request, False, self.panel_claim.take())

    def action_preflight(self) -> None:
        """Judge a resume from the selected checkpoint (w): the full report in the detail pane."""
        info = self.selected_info()
        if info is None:
            self.notify("select a checkpoint first", severity="warning")
            return
        request = self.preflight_request(info.path)
        if request is None:
            self.notify("preflight needs a run config: pass --config", severity="warning")
            return
        claim = self.detail_claim.take()
        self._detail.update(PlainText(f"preflight of {info.name}: judging …", style="italic"))
        self.judge_resume(request, True, claim)

    @work(thread=True, exclusive=False, group="ckpt-preflight", exit_on_error=False)
    def judge_resume(self, request: PreflightRequest, selected: bool, claim: int) -> None:
        with self.failures(lambda exc: PreflightFailed(exc, selected, claim)):
            self.deliver(PreflightJudged(run_preflight(request), selected, claim))

    def _holds(self, selected: bool, claim: int) -> bool:
        """The pane the result is for (the detail pane for w, else the panel) still waits for it."""
        return (self.detail_claim if selected else self.panel_claim).holds(claim)

    def on_preflight_judged(self, message: PreflightJudged) -> None:
        report = message.report
        if not self._holds(message.selected, message.claim):
            return
        if message.selected:
            self._detail.show(lambda width: report_text(report, width))
            return
        self._preflight = report
        subject = report.resume.name if report.resume is not None else "fresh start"
        self._preflight_panel.show(lambda width: summary_text(report, width, subject))

    def on_preflight_failed(self, message: PreflightFailed) -> None:
        if not self._holds(message.selected, message.claim):
            return
        pane = self._detail if message.selected else self._preflight_panel
        pane.update(PlainText(one_line(f"preflight: {message.error}", 160), style="bold red"))
