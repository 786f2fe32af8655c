"""The migration view's form: the paths, numbers, overrides and boxes of a ``MigrationRequest``,
and its three buttons.

The form owns its fields: the view fills it (``fill``) and reads it (``request``), and learns
of an edit from ``FormEdited`` (Enter: ``FormSubmitted``), never by reading the fields itself.
The view's ``stage`` is bound to it: Execute is enabled only while a plan is shown.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import Button, Checkbox, Input, Label, Select

from fvconsole.core.migration import RESHARD_MODES, MigrationDefaults, MigrationRequest
from fvconsole.core.shared import FvError
from fvconsole.tui.messages import FormEdited, FormSubmitted
from fvconsole.tui.migration.panels import Stage
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.inputs import PathInput, TickBox
from fvconsole.tui.widgets.statics import PlainStatic

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


class MigrationForm(Vertical):
    """The request's fields, the derived values to confirm, and Preview / Execute / Verify."""

    #: The view's stage (bound): Execute is enabled only at ``Stage.PLANNED`` and not read-only.
    stage: var[Stage] = var(Stage.EDITING, init=False)

    def __init__(self, read_only: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.read_only = read_only
        self._paths = {field: PathInput(None, placeholder=placeholder, id=wid, compact=True)
                       for field, wid, _label, placeholder in PATH_FIELDS}
        self._numbers = {field: Input(type="integer", id=wid, compact=True) for field, wid, _label in INT_FIELDS}
        self._overrides = Input(placeholder="the launch's overrides, e.g. training.data.seed=7 …",
                                id="mig-overrides", compact=True)
        self._overwrite = TickBox("overwrite existing sidecars", id="mig-overwrite", compact=True)
        self._skip_source = TickBox("skip source check", id="mig-skip-source", compact=True)
        #: Elastic resume: the mode for a run config of another world size / sp size (blank: none).
        self._reshard = Select([(f"reshard: {mode}", mode) for mode in RESHARD_MODES], prompt="reshard: none",
                               id="mig-reshard", compact=True)
        self.preview_button = Button("Preview ^R", id="mig-preview", variant="primary", compact=True)
        self._execute = Button("Execute (read-only)" if read_only else "Execute ^E", id="mig-execute",
                               variant="error", compact=True, disabled=True)
        self._derived = PlainStatic(id="mig-derived")

    def compose(self) -> ComposeResult:
        for field, _wid, label, _placeholder in PATH_FIELDS:
            with Horizontal(classes="form-row"):
                yield Label(label)
                yield self._paths[field]
        with Horizontal(id="mig-numbers"):
            for field, _wid, label in INT_FIELDS:
                with Horizontal(classes="num-field"):
                    yield Label(label)
                    yield self._numbers[field]
        with Horizontal(classes="form-row"):
            yield Label("overrides")
            yield self._overrides
        with Horizontal(id="mig-flags"):
            yield self._overwrite
            yield self._skip_source
            yield self._reshard
        with Horizontal(id="mig-buttons"):
            yield self.preview_button
            yield self._execute
            yield Button("Verify ^Y", id="mig-verify", compact=True)
        yield self._derived

    def watch_stage(self, stage: Stage) -> None:
        self._execute.disabled = stage is not Stage.PLANNED or self.read_only

    # ------------------------------------------------------------ down: filled by the view

    def fill(self, defaults: MigrationDefaults, no_config: bool = False) -> None:
        """The fields from ``defaults``, quietly (no ``FormEdited``), and how they were derived."""
        for field, box in self._paths.items():
            self._set(box, getattr(defaults, field))
        for field, box in self._numbers.items():
            value = getattr(defaults, field)
            self._set(box, "" if value is None else str(value))
        self._set(self._overrides, " ".join(shlex.quote(o) for o in defaults.overrides))
        text = PlainText().append("Derived values: confirm or edit\n", style="bold")
        for note in defaults.derivation:
            text.append(f"  {note}\n")
        if no_config:
            text.append("  no run config loaded: world size and consumed batches need filling in\n", style="yellow")
        self._derived.update(text)

    @staticmethod
    def _set(box: Input, value: str) -> None:
        with box.prevent(Input.Changed):
            box.value = value

    # ------------------------------------------------------------ read by the view

    @property
    def checkpoint(self) -> str:
        """The checkpoint field as typed (empty: the form was never filled)."""
        return self._paths["checkpoint"].value.strip()

    @property
    def output_dir(self) -> str:
        return self._paths["output_dir"].value.strip()

    def request(self) -> MigrationRequest:
        """The MigrationRequest of the form; FvError naming the field when a value is not usable."""
        paths: dict[str, str] = {}
        for name, _wid, label, _placeholder in PATH_FIELDS:
            text = self._paths[name].value.strip()
            if not text:
                raise FvError(f"migration form: {label} is empty")
            paths[name] = os.path.expanduser(text)
        numbers: dict[str, int] = {}
        for name, _wid, label in INT_FIELDS:
            text = self._numbers[name].value.strip()
            try:
                numbers[name] = int(text)
            except ValueError:
                raise FvError(f"migration form: {label} must be an integer (got {text!r})") from None
        try:
            overrides = tuple(shlex.split(self._overrides.value))
        except ValueError as exc:
            raise FvError(f"migration form: overrides cannot be parsed ({exc})") from None
        return MigrationRequest(
            config_path=paths["config_path"], checkpoint=paths["checkpoint"], output_dir=paths["output_dir"],
            expected_step=numbers["expected_step"], expected_world_size=numbers["expected_world_size"],
            consumed_batches_per_rank=numbers["consumed_batches_per_rank"], overrides=overrides,
            overwrite=self._overwrite.value, skip_source_check=self._skip_source.value,
            reshard=None if self._reshard.is_blank() else str(self._reshard.value),
        )

    # ------------------------------------------------------------ up: edits and Enter

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(FormEdited())

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self.post_message(FormEdited())

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self.post_message(FormEdited())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(FormSubmitted())
