"""Common plumbing for the views: workers that report back with typed messages, errors, the `/`
filter, Esc back to the view's table.

Workers: a view's file-system work runs in ``@work(thread=True)`` methods that call the core
and post a typed message (``tui/messages.py``: ``CacheScanned``, ``MigrationPreviewed`` …) back to the
view with :meth:`BaseView.deliver`; the view handles it on the event loop. A worker superseded
by a newer one of its group (``exclusive=True``) posts nothing, and a message posted while
the app shuts down is dropped by Textual, so a late result never reaches a removed widget.
Workers of different groups that fill one pane take a :class:`Claim` on it: the last action wins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input
from textual.worker import get_current_worker

from fvconsole.core.shared import FvError
from fvconsole.tui.messages import WorkFailed
from fvconsole.tui.widgets.tables import FastTable
from fvconsole.tui.wording import reason_text


def describe_error(exc: BaseException) -> str:
    """One line for a notification: FvError text in the console's words, OSError with its file, else the type."""
    if isinstance(exc, FvError):
        return " ".join((reason_text(exc.reason) if exc.reason is not None else str(exc)).split())
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return f"internal error: {type(exc).__name__}: {exc}"


class Claim:
    """Who fills a pane now. Each action that fills it (a cursor move, a key) takes a new number and hands it to
    the worker it starts; the worker's result is shown only while its number is still the latest. Why not
    ``exclusive``: the workers are of different groups (a detail read, a preflight), and a worker that checked
    it was not cancelled may still post after a newer action began; the number is checked on the event loop."""

    def __init__(self) -> None:
        self._latest = 0

    def take(self) -> int:
        self._latest += 1
        return self._latest

    def holds(self, number: int) -> bool:
        return number == self._latest


def pane_title(name: str, focused: bool) -> str:
    """A pane's border title: its name, marked while it has focus."""
    return f"▶ {name} ◀" if focused else name


class BaseView(Vertical):
    """A view (tab) of the console. Subclasses implement ``refresh_view`` and ``apply_filter``."""

    #: Shown in the help screen and the command palette ("1 Checkpoints").
    TITLE: ClassVar[str] = ""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back_to_table", "Back to table", show=False,
                tooltip="close the filter; from a field or button, back to the view's table"),
    ]

    #: Panes whose top border names them and says which has focus: widget id → name. Focus
    #: must show by more than a colour (a monochrome terminal, a colour-blind operator): the
    #: focused pane's title reads ``▶ name ◀`` and its border turns heavy (views.tcss).
    PANES: ClassVar[dict[str, str]] = {}
    #: The id of the view's table: where Esc and showing the view put the focus.
    TABLE: ClassVar[str] = ""

    filter_text: str = ""
    _writing = False

    @property
    def _busy(self) -> bool:
        """A write (eviction, migration) of this view is running. When it ends, a ``q``
        pressed meanwhile takes effect (``FvConsoleApp.action_quit``)."""
        return self._writing

    @_busy.setter
    def _busy(self, value: bool) -> None:
        was, self._writing = self._writing, bool(value)
        if was and not value:
            quit_after = getattr(self.app, "quit_after_write", None)
            if quit_after is not None:
                self.app.call_later(quit_after)

    @classmethod
    def for_state(cls, state: Any, **kwargs: Any) -> BaseView:
        """The view as the app composes it; a view that needs the start-up state overrides this."""
        return cls(**kwargs)

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
        state = getattr(self.app, "state", None)
        return bool(state is not None and state.read_only)

    def filter_input(self) -> Input:
        return self.query_one(".view-filter", Input)

    # ------------------------------------------------------------ workers

    def deliver(self, message: Message) -> None:
        """Post a worker's result to this view, unless a newer worker of its group superseded it."""
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    @contextmanager
    def failures(self, message: Callable[[BaseException], Message] = WorkFailed) -> Iterator[None]:
        """In a worker: turn any exception into ``message(exc)`` for the view (never a crash)."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message, then a notification
            self.deliver(message(exc))

    def on_work_failed(self, message: WorkFailed) -> None:
        self.report_error(message.error)

    def report_error(self, exc: BaseException) -> None:
        """Show a problem as an error notification; the app keeps running."""
        self.notify(describe_error(exc), severity="error", timeout=10)

    def refuse_read_only(self, what: str) -> bool:
        """True (and a notification) when a write action is invoked in read-only mode."""
        if self.read_only:
            self.notify(f"read-only mode: {what} is disabled", severity="warning")
            return True
        return False

    # ------------------------------------------------------------ focus

    def on_mount(self) -> None:
        self.mark_focused_pane()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.mark_focused_pane()

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self.mark_focused_pane()

    def mark_focused_pane(self) -> None:
        """Title each of the view's panes: ``▶ name ◀`` while it (or a widget in it) has focus."""
        for pane_id, name in self.PANES.items():
            for pane in self.query(f"#{pane_id}"):
                pane.border_title = pane_title(name, pane.has_focus_within)

    # ------------------------------------------------------------ filter + Esc

    def open_filter(self) -> None:
        """Show the filter and focus it now, not after a refresh: keys already queued behind `/`
        (a paste, a fast typist) must land in the filter, never on the view's actions."""
        box = self.filter_input()
        box.display = True
        self.screen.set_focus(box)

    def action_back_to_table(self) -> None:
        """Esc: close the filter if open; in any case, back to the view's table (so 1-4, q work)."""
        box = self.filter_input()
        if box.display:
            box.value = ""
            box.display = False
            self.filter_text = ""
            self.apply_filter("")
        self.focus_table()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.has_class("view-filter"):
            event.stop()
            self.filter_text = event.value.strip().lower()
            self.apply_filter(self.filter_text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.has_class("view-filter"):
            event.stop()
            self.focus_table()

    # ------------------------------------------------------------ hooks

    def refresh_view(self) -> None:
        """Reload from disk (in a worker)."""

    def refresh_requested(self) -> None:
        """`r` pressed in this view (a load of new paths calls ``refresh_view`` directly)."""
        self.refresh_view()

    def apply_filter(self, text: str) -> None:
        """Rebuild the main table from memory keeping rows that contain ``text``."""

    def focus_main(self) -> None:
        """Focus the view's main widget when the view is shown."""
        self.focus_table()

    def focus_table(self) -> None:
        """Focus the view's table (Esc)."""
        self.query_one(f"#{self.TABLE}", FastTable).focus()
