"""Modal screens shared by every view.

``ConfirmScreen(title, body_lines, confirm_label)`` is the one confirmation dialog for every
write action (the fleet view reuses it): it states what will be written or deleted, where,
and starts with focus on **Cancel**, so Enter alone never confirms. It dismisses with a bool::

    def done(ok: bool | None) -> None: ...
    self.app.push_screen(ConfirmScreen("Evict 2 entries", ["/dev/shm/c/abc (1.2 GiB)"], "Evict"), done)
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets import PathInput, PlainStatic

MODAL_CSS = """
ConfirmScreen, ErrorScreen, HelpScreen, PathsScreen { align: center middle; }
#dialog {
    width: 96; max-width: 95%; height: auto; max-height: 90%;
    border: thick $primary; background: $surface; padding: 1 2;
}
#dialog.danger { border: thick $error; }
#dialog-title { text-style: bold; margin-bottom: 1; }
#dialog-body { height: auto; max-height: 24; }
#dialog-buttons { height: auto; align-horizontal: right; margin-top: 1; }
#dialog-buttons Button { margin-left: 2; }
.field-label { margin-top: 1; color: $text-muted; }
"""


#: Width of the description column of the help screen (the dialog is 110 wide).
HELP_DESC_WIDTH = 82


class ConfirmScreen(ModalScreen[bool]):
    """Ask before a write action; focus starts on Cancel; Esc cancels.

    Title and body lines name files, keys and nodes: they are shown as plain text, escaped.
    """

    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("left,right", "switch", "Switch button", show=False)]

    def __init__(self, title: str, body_lines: Sequence[str], confirm_label: str = "Confirm") -> None:
        super().__init__()
        self._title = title
        self._body = list(body_lines)
        self._confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="danger"):
            yield Label(PlainText(self._title), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic("\n".join(self._body))
            with Horizontal(id="dialog-buttons"):
                yield Button(self._confirm_label, variant="error", id="confirm")
                yield Button("Cancel", variant="primary", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_switch(self) -> None:
        target = "#confirm" if self.focused is not None and self.focused.id == "cancel" else "#cancel"
        self.query_one(target, Button).focus()


class ErrorScreen(ModalScreen[None]):
    """Show an error that needs acknowledging (the app keeps running); plain text, escaped."""

    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("escape,enter", "close", "Close")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self._title = title
        self._message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="danger"):
            yield Label(PlainText(self._title, style="bold red"), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic(self._message)
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", variant="primary", id="close")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key, grouped by view."""

    DEFAULT_CSS = MODAL_CSS + "HelpScreen #dialog { width: 110; } HelpScreen #dialog-body { max-height: 60vh; }"
    SCOPED_CSS = False
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, sections: Sequence[tuple[str, Sequence[tuple[str, str]]]], read_only: bool) -> None:
        super().__init__()
        self._sections = sections
        self._read_only = read_only

    def compose(self) -> ComposeResult:
        text = Text()
        for title, rows in self._sections:
            text.append(f"{title}\n", style="bold underline")
            for key, desc in rows:
                text.append(f"  {key:<18}", style="bold cyan")
                lines = textwrap.wrap(desc, HELP_DESC_WIDTH) or [""]
                text.append(lines[0] + "\n")
                for line in lines[1:]:  # continuation lines stay in the description column
                    text.append(" " * 20 + line + "\n")
            text.append("\n")
        text.append(
            "Tables: ↑/↓ PgUp/PgDn Home/End move, Enter opens. Inputs: → accepts a path completion, "
            "Tab moves to the next field. Write actions always ask first; focus starts on Cancel.",
            style="italic",
        )
        if self._read_only:
            text.append("\n\nRead-only mode: execute and evict are disabled.", style="bold yellow")
        with Vertical(id="dialog"):
            yield Label("fvconsole keys", id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Static(text)
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", variant="primary", id="close")

    def on_mount(self) -> None:
        self.query_one("#dialog-body", VerticalScroll).focus()  # ↑ ↓ PgUp PgDn scroll the list

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class PathsScreen(ModalScreen["dict[str, str] | None"]):
    """Pick the run config, checkpoints and cache root (with path completion)."""

    DEFAULT_CSS = MODAL_CSS
    SCOPED_CSS = False
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, config: str | None, checkpoints: str | None, cache_root: str | None, missing: Sequence[str]) -> None:
        super().__init__()
        self._values = {"config": config, "checkpoints": checkpoints, "cache_root": cache_root}
        self._missing = list(missing)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Open paths", id="dialog-title")
            if self._missing:
                yield Static(Text("Not set: " + ", ".join(self._missing), style="yellow"))
            yield Label("Run config YAML", classes="field-label")
            yield PathInput(self._values["config"], placeholder="/path/to/run.yaml", id="path-config")
            yield Label("Checkpoints (output dir or one checkpoint-<step>; empty: from the config)", classes="field-label")
            yield PathInput(self._values["checkpoints"], placeholder="/path/to/output_dir", id="path-checkpoints")
            yield Label("Weight shard cache root", classes="field-label")
            yield PathInput(self._values["cache_root"], placeholder="/dev/shm/fv-wcache", id="path-cache_root")
            yield Static(Text("→ accepts a completion, Tab moves, Enter applies.", style="italic"))
            with Horizontal(id="dialog-buttons"):
                yield Button("Apply", variant="success", id="apply")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#path-config", PathInput).focus()

    def _result(self) -> dict[str, str]:
        return {name: self.query_one(f"#path-{name}", PathInput).value.strip() for name in self._values}

    def on_input_submitted(self, event: PathInput.Submitted) -> None:
        event.stop()
        self.dismiss(self._result())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(self._result() if event.button.id == "apply" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
