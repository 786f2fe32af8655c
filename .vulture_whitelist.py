"""What vulture cannot see being used, each with the reason (``[tool.vulture]`` in pyproject.toml).

vulture reads this file as code: every name below counts as used. ``tests/architecture/test_dead_code.py``
also *executes* it, so an entry whose object is renamed or removed fails the suite instead of
excusing nothing. Textual's by-name hooks (``on_*``, ``action_*``, ``compose``, ``BINDINGS``...)
are ``ignore_names`` patterns in pyproject.toml, not lines here.
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
from types import SimpleNamespace
from typing import Any

from rich.text import Text
from textual.app import App
from textual.widget import Widget
from textual.widgets import Input, TabbedContent

from fvconsole.cli import InstalledVersion
from fvconsole.cli.completion import PrintCompletion
from fvconsole.cli.streams import _Stdout
from fvconsole.core.checkpoints.listing import CheckpointInfo
from fvconsole.core.formats.runconfig import TrainingKeys
from fvconsole.core.migration.output_dir import OutputState
from fvconsole.core.migration.sample_ids import NextSampleIds
from fvconsole.core.shared.locks import LockState, Reader, ReaderRecord
from fvconsole.demo import fleet_builders
from fvconsole.demo.workspace import DemoWorkspace
from fvconsole.tui import state, wording
from fvconsole.tui.app import FvConsoleApp
from fvconsole.tui.base import BaseView
from fvconsole.tui.fleet.view import FleetView
from fvconsole.tui.widgets.inputs import PathSuggester, TickBox
from fvconsole.tui.widgets.strip_table import StripTable
from fvconsole.tui.widgets.tables import FastTable
from fvconsole.tui.widgets.textual_private import RELIED_ON, RELIED_ON_ATTRIBUTES


def _params(function: Any) -> SimpleNamespace:
    """A function's parameters by name (a name missing from the signature fails here)."""
    return SimpleNamespace(**inspect.signature(function).parameters)


def _fields(cls: type) -> SimpleNamespace:
    """A dataclass's fields by name."""
    return SimpleNamespace(**{f.name: f for f in dataclasses.fields(cls)})


# Parameters a caller's protocol imposes (unused in the body, required in the signature).
_params(InstalledVersion.__call__).option_string  # argparse.Action.__call__(parser, namespace, values, option_string)
_params(PrintCompletion.__call__).option_string  # argparse.Action.__call__, as above
_params(FvConsoleApp.check_action).parameters  # Textual calls check_action(action, parameters)
_params(BaseView.check_action).parameters  # Textual calls check_action(action, parameters)
_params(FvConsoleApp.notify).markup  # App.notify's keyword, accepted and ignored: notifications are never markup

# Protocols and framework attributes.
_Stdout.writelines  # the file-object protocol: print(), logging and tracebacks may call it on sys.stdout
reprlib.Repr().maxlevel  # safe_read.short_repr configures the stdlib Repr through these attributes
reprlib.Repr().maxstring  # as above
reprlib.Repr().maxother  # as above
reprlib.Repr().maxlong  # as above
PathSuggester.get_suggestion  # textual.suggester.Suggester's hook, awaited by Input
FastTable.Sorted.control  # Textual's Message.control: what on_fast_table_sorted handlers match on
Widget.virtual_size  # Textual reactive: FastTable sets it to size its scroll region
App.sub_title  # Textual reactive: the header's "read-only"
TabbedContent.active  # Textual reactive: which view tab is shown
Input.cursor_blink  # Textual reactive: the headless tour stops the blink for identical SVGs
FvConsoleApp.HORIZONTAL_BREAKPOINTS  # Textual reads these class variables for -narrow/-wide classes
Widget.can_focus  # set on the tab bar (tui/app.py): Textual's focus chain reads it, so Tab stays in the view
Widget.border_title  # set on the focused pane (tui/base.py): Textual draws it in the pane's border
FvConsoleApp.VERTICAL_BREAKPOINTS  # as above, -short/-tall
Text().no_wrap  # Rich reads it when rendering: FastTable's fitted cells never wrap
StripTable.ALLOW_SELECT  # Textual reads it: no text selection by mouse in a table (as DataTable)
StripTable.COMPONENT_CLASSES  # Textual reads it: the components the table's CSS styles
StripTable.validate_cursor_coordinate  # Textual calls validate_<reactive> before setting it
Widget.scroll_target_x, Widget.scroll_target_y  # Textual's scrolling reads them: a cleared table starts at the top
StripTable.get_row_at, StripTable.get_cell_at  # DataTable's API, kept for the tests and the tour that read cells by place
RELIED_ON, RELIED_ON_ATTRIBUTES  # Textual's private API the console uses: tests/tui/test_textual_internals.py checks them against the installed Textual
TickBox.BUTTON_INNER  # Textual's ToggleButton draws self.BUTTON_INNER: TickBox sets it to the state (X or blank)

# Fields read by name: core/migration/inputs.py: read_params checks each TrainingKeys field by its
# name (getattr), which also names its dotted path in a refusal.
_fields(TrainingKeys).streaming_read_batch_size  # read_params, by name
_fields(TrainingKeys).dataloader_num_workers  # as above
_fields(TrainingKeys).streaming_shuffle_row_groups  # as above
_fields(TrainingKeys).streaming_manifest_path  # as above

# Data read outside the package: by the JSON a user gets, by the tests, by the docs.
_fields(CheckpointInfo).dataloader_keys  # `checkpoints ls --json` emits it (to_json: every field, via core/shared/fields_json.py)
_fields(LockState).record_problem  # `cache evict --yes --json` emits it under "lock" (to_json via fields_json)
_fields(DemoWorkspace).created_at  # `fvconsole demo --json` prints it (to_json is the instance __dict__)
_fields(NextSampleIds).row_groups_read  # part of the result; tests/tui/test_tui_app.py checks how many were read
FleetView.view_result  # the fleet view's last result, which tests/tui/test_fleet_tui.py reads
wording.CONTROLS  # remedy -> console control; tests/migration/test_reasons_receipts.py checks each control exists
_fields(OutputState).upstream_receipts  # new with issue 22 item 3 (06dc9b1): recorded, not read yet; its owner uses or drops it
# The snapshot tour (tests/tour.py, not shipped) freezes the console's clocks and drives a stand-in fleet.
state.freeze_clock  # tests/tour.py: frozen_display
state.freeze_free_space  # tests/tour.py: frozen_display
state.freeze_process_warnings  # tests/tour.py: frozen_display
fleet_builders.local_dispatcher  # tests/tour.py: the fleet stop of the tour
ReaderRecord.of_checkpoint  # issue 37 item 3: what a migration calls to leave a reader's record (tests/shared/test_reader_records.py)
Reader.judged_alive  # issue 37 item 3: a prune words a live reader by it (seen running, or another host's)
