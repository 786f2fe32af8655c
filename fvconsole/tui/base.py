"""Common plumbing for the views: thread workers that report back, errors, the `/` filter."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, ClassVar

from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input
from textual.worker import Worker, get_current_worker

from fvconsole.core.errors import FvError


def describe_error(exc: BaseException) -> str:
    """One line for a notification: FvError text as is, OSError with its file, else the type."""
    if isinstance(exc, FvError):
        return " ".join(str(exc).split())
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return f"internal error: {type(exc).__name__}: {exc}"


class BaseView(Vertical):
    """A view (tab) of the console. Subclasses implement ``refresh_view`` and ``apply_filter``."""

    BINDINGS = [Binding("escape", "close_filter", "Close filter", show=False)]

    filter_text: str = ""

    #: Actions that write: shown and enabled only without --read-only. With --read-only their
    #: keys are bound to ``refuse_action`` instead, which says why nothing happens.
    write_actions: ClassVar[frozenset[str]] = frozenset()
    refuse_action: ClassVar[str] = "refuse"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Textual's hook: hide write actions in read-only mode, and their refusal otherwise."""
        if action in self.write_actions:
            return not self.read_only
        if action == self.refuse_action:
            return self.read_only
        return True

    @property
    def read_only(self) -> bool:
        return bool(getattr(self.app, "state", None) and self.app.state.read_only)

    def filter_input(self) -> Input:
        return self.query_one(".view-filter", Input)

    def run_in_thread(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None],
        *,
        group: str,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> Worker:
        """Run ``fn`` in a thread worker; deliver its result (or error) on the event loop.

        A worker superseded by a newer one in the same group delivers nothing.
        """
        report = on_error or self.report_error

        def job() -> None:
            worker = get_current_worker()
            try:
                result = fn()
            except Exception as exc:  # noqa: BLE001 - every failure becomes a notification
                if not worker.is_cancelled:
                    self._deliver(report, exc)
                return
            if not worker.is_cancelled:
                self._deliver(on_done, result)

        return self.run_worker(job, thread=True, exclusive=True, group=group, exit_on_error=False)

    def _deliver(self, callback: Callable[[Any], None], value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the app is shutting down
            self.app.call_from_thread(callback, value)

    def report_error(self, exc: BaseException) -> None:
        """Show a problem as an error notification; the app keeps running."""
        self.notify(describe_error(exc), severity="error", timeout=10)

    def refuse_read_only(self, what: str) -> bool:
        """True (and a notification) when a write action is invoked in read-only mode."""
        if self.read_only:
            self.notify(f"read-only mode: {what} is disabled", severity="warning")
            return True
        return False

    # ------------------------------------------------------------ filter

    def open_filter(self) -> None:
        box = self.filter_input()
        box.display = True
        box.focus()

    def action_close_filter(self) -> None:
        """Esc: close the filter; in a form field, go back to the view's table (so 1-4, q work)."""
        box = self.filter_input()
        if box.display:
            box.value = ""
            box.display = False
            self.apply_filter("")
            self.focus_main()
        elif isinstance(self.app.focused, Input):
            self.focus_table()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.has_class("view-filter"):
            event.stop()
            self.filter_text = event.value.strip().lower()
            self.apply_filter(self.filter_text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.has_class("view-filter"):
            event.stop()
            self.focus_main()

    # ------------------------------------------------------------ hooks

    def refresh_view(self) -> None:
        """Reload from disk (in a worker)."""

    def refresh_requested(self) -> None:
        """`r` pressed in this view (a load of new paths calls ``refresh_view`` directly)."""
        self.refresh_view()

    def apply_filter(self, text: str) -> None:
        """Rebuild the main table from memory keeping rows that contain ``text``."""

    def focus_main(self) -> None:
        """Focus the view's main widget."""

    def focus_table(self) -> None:
        """Focus the view's table (Esc from a form field); the main widget unless overridden."""
        self.focus_main()
