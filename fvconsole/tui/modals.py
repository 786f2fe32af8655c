"""Modal screens shared by every view.

``ConfirmScreen(title, body_lines, confirm_label)`` is the one confirmation dialog for every
write action (the cache's eviction dialog and the fleet view reuse it): it states what will be
written or deleted, where, and starts with focus on **Cancel**, so Enter alone never confirms.
It dismisses with a bool::

    def done(ok: bool | None) -> None: ...
    self.app.push_screen(ConfirmScreen("Evict 2 entries", ["/dev/shm/c/abc (1.2 GiB)"], "Evict"), done)

Every screen focuses its first widget with ``AUTO_FOCUS`` rather than by querying in
``on_mount``: a screen pushed while the app shuts down may never be composed, and a query
would then raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from fvconsole.tui.keymap import KeyHelp
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.inputs import PathInput
from fvconsole.tui.widgets.statics import PlainStatic

_R = TypeVar("_R")


class Dialog(ModalScreen[_R]):
    """A modal screen that closes once: a second Esc or Enter already queued (keys typed
    faster than the app handles them) must not run the callback again or close the screen
    below it."""

    def dismiss(self, result: Any = None) -> AwaitComplete:
        if self.app.screen is not self:
            return AwaitComplete.nothing()
        return super().dismiss(result)


class ConfirmScreen(Dialog[bool]):
    """Ask before a write action; focus starts on Cancel; Esc cancels.

    Title and body lines name files, keys and nodes: they are shown as plain text, escaped.
    """

    AUTO_FOCUS = "#cancel"
    #: ``y`` and ``n`` answer as the buttons do (lazygit, k9s); Enter answers the focused button,
    #: which starts as Cancel, so the default stays No.
    BINDINGS = [Binding("escape,n", "cancel", "Cancel"), Binding("y", "confirm", "Confirm", show=False),
                Binding("left,right", "switch", "Switch button", show=False)]

    def __init__(self, title: str, body_lines: Sequence[str], confirm_label: str = "Confirm") -> None:
        super().__init__()
        self._title = title
        self._body = list(body_lines)
        self._confirm = Button(f"{confirm_label} (y)", variant="error", id="confirm", compact=True)
        self._cancel = Button("Cancel (n)", variant="primary", id="cancel", compact=True)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="danger"):
            yield Label(PlainText(self._title), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic("\n".join(self._body))
            with Horizontal(id="dialog-buttons"):
                yield self._confirm
                yield self._cancel

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_switch(self) -> None:
        (self._confirm if self.focused is self._cancel else self._cancel).focus()


class _Notice(Dialog[None]):
    """Shows a title and one body until closed (Close or a key of ``BINDINGS``): the error and help dialogs."""

    AUTO_FOCUS = "#close"

    def __init__(self, title: Label, body: Static, classes: str | None = None) -> None:
        super().__init__()
        self._parts = title, body, classes

    def compose(self) -> ComposeResult:
        title, body, classes = self._parts
        with Vertical(id="dialog", classes=classes):
            yield title
            with VerticalScroll(id="dialog-body"):
                yield body
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", variant="primary", id="close", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class ErrorScreen(_Notice):
    """Show an error that needs acknowledging (the app keeps running); plain text, escaped."""

    BINDINGS = [Binding("escape,enter", "close", "Close")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__(Label(PlainText(title, style="bold red"), id="dialog-title"), PlainStatic(message), "danger")


def help_table(sections: Sequence[tuple[str, Sequence[KeyHelp]]], read_only: bool) -> Table:
    """Every key, grouped by view; descriptions wrap to the dialog's width, keys never do."""
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(no_wrap=True, style="bold cyan", min_width=12)
    table.add_column(ratio=1)
    for i, (title, rows) in enumerate(sections):
        if i:
            table.add_row("", "")
        table.add_row(Text(title, style="bold underline"), "")
        for row in rows:
            table.add_row(row.key_text, row.help)
        if not rows:  # a heading with nothing under it read as a list cut short
            table.add_row("", Text("no keys of its own: those under Everywhere and Tables apply", style="italic"))
    table.add_row("", "")
    table.add_row("", Text("In a text field keys type text: Esc goes back to the view's table. "
                           "Write actions always ask first, with focus on Cancel: y confirms, n or Esc cancels.", style="italic"))
    if read_only:
        table.add_row("", Text("Read-only mode: execute and evict are disabled.", style="bold yellow"))
    return table


class HelpScreen(_Notice):
    """Every key, grouped by view, generated from the bindings (see ``tui.keymap``)."""

    AUTO_FOCUS = "#dialog-body"  # ↑ ↓ PgUp PgDn scroll the list, and j k as in the tables
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close"),
                Binding("j", "scroll_keys(1)", "Down", show=False), Binding("k", "scroll_keys(-1)", "Up", show=False)]

    def __init__(self, sections: Sequence[tuple[str, Sequence[KeyHelp]]], read_only: bool) -> None:
        super().__init__(Label("fvconsole keys", id="dialog-title"),
                         Static(help_table(sections, read_only), id="help-keys"))

    def action_scroll_keys(self, lines: int) -> None:
        self.query_one("#dialog-body", VerticalScroll).scroll_relative(y=lines, animate=False)


class PathsScreen(Dialog["dict[str, str] | None"]):
    """Pick the run config, checkpoints and cache root (with path completion)."""

    AUTO_FOCUS = "#path-config"
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, config: str | None, checkpoints: str | None, cache_root: str | None, missing: Sequence[str]) -> None:
        super().__init__()
        self._missing = list(missing)
        placeholders = {"config": "/path/to/run.yaml", "checkpoints": "/path/to/output_dir",
                        "cache_root": "/dev/shm/fv-wcache"}
        self._fields = {name: PathInput(value, placeholder=placeholders[name], id=f"path-{name}")
                        for name, value in (("config", config), ("checkpoints", checkpoints), ("cache_root", cache_root))}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="paths"):
            yield Label("Open paths", id="dialog-title")
            if self._missing:
                yield Static(Text("Not set: " + ", ".join(self._missing), style="yellow"))
            yield Label("Run config YAML", classes="field-label")
            yield self._fields["config"]
            yield Label("Checkpoints (output dir or one checkpoint-<step>; empty: from the config)", classes="field-label")
            yield self._fields["checkpoints"]
            yield Label("Weight shard cache root", classes="field-label")
            yield self._fields["cache_root"]
            yield Static(Text("→ accepts a completion, Tab moves, Enter applies, Esc cancels.", style="italic"))
            with Horizontal(id="dialog-buttons"):
                yield Button("Apply", variant="success", id="apply", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def _result(self) -> dict[str, str]:
        return {name: field.value.strip() for name, field in self._fields.items()}

    def on_input_submitted(self, event: PathInput.Submitted) -> None:
        event.stop()
        self.dismiss(self._result())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(self._result() if event.button.id == "apply" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
