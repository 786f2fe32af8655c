"""What ``tui/widgets/textual_private.py`` relies on of Textual's private API is still there, and
what the tests' own ``tests/textual_test_private.py`` relies on.

``RELIED_ON`` names each private method it overrides or calls, with its parameters, and
``RELIED_ON_ATTRIBUTES`` each private attribute it reads or sets (the command palette's,
the Linux driver's output file and thread). A Textual that moved, renamed or gave
other parameters to any of them fails here, naming each, instead of drawing something else or
hanging on a dead terminal. The tests' module lists its own the same way (``key_event``'s key
tables, the app's frame display, the Input's completion): a change there fails here, not as keys
that send something else or a benchmark that times nothing.
"""

from __future__ import annotations

import inspect
import io
from collections.abc import Callable, Mapping

import textual_test_private
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver
from textual.widgets import DataTable
from textual_test_private import WriterThread

from fvconsole.tui.widgets.textual_private import RELIED_ON, RELIED_ON_ATTRIBUTES

#: What the console relies on, written here by hand from Textual 8's source: a change to
#: ``RELIED_ON`` or ``RELIED_ON_ATTRIBUTES`` must be a change here too, after reading the new Textual.
EXPECTED_MEMBERS = {
    "CommandPalette": ("_action_command_list", "_gather_commands"),
}
EXPECTED_ATTRIBUTES = {
    "LinuxDriver": ("_file", "_writer_thread"),
    "WriterThread": ("_queue",),
    "CommandPalette": ("_GATHER_COMMANDS_GROUP",),
}
#: What ``tests/textual_test_private.py`` relies on, written here by hand the same way.
EXPECTED_TEST_MEMBERS = {
    "textual.keys": {"_character_to_key": ("character",), "_get_unicode_name_from_key": ("key",)},
}
EXPECTED_TEST_ATTRIBUTES = {
    "App": ("_display",),
    "Input": ("_suggestion",),
}

#: An instance to look an attribute up on, for a class whose ``__init__`` sets it (others: the class).
HOLDERS: dict[type, Callable[[], object]] = {
    LinuxDriver: lambda: LinuxDriver(App()),  # needs a running event loop: the test is async
    WriterThread: lambda: WriterThread(io.StringIO()),  # made, never started
}


def problems(members: Mapping[type, Mapping[str, tuple[str, ...]]],
             attributes: Mapping[type, tuple[str, ...]]) -> list[str]:
    """Each member that is gone or has other parameters, each attribute its holder lacks."""
    found = []
    for cls, named in members.items():
        for name, parameters in named.items():
            member = inspect.getattr_static(cls, name, None)
            if member is None:
                found.append(f"{cls.__name__}.{name} is gone")
                continue
            signature = tuple(inspect.signature(getattr(member, "__func__", member)).parameters)
            if signature != parameters:
                found.append(f"{cls.__name__}.{name}{signature}: textual_private.py expects {parameters}")
    for cls, names in attributes.items():
        holder = HOLDERS.get(cls, lambda cls=cls: cls)()
        found += [f"{cls.__name__}.{name} is gone" for name in names if not hasattr(holder, name)]
    return found


async def test_the_private_textual_api_relied_on_is_still_there() -> None:
    """Fails loudly, naming each member, on a Textual whose internals changed underneath."""
    import textual

    assert {cls.__name__: tuple(members) for cls, members in RELIED_ON.items()} == EXPECTED_MEMBERS
    assert {cls.__name__: names for cls, names in RELIED_ON_ATTRIBUTES.items()} == EXPECTED_ATTRIBUTES
    found = problems(RELIED_ON, RELIED_ON_ATTRIBUTES)
    assert not found, (f"Textual {textual.__version__} changed what tui/widgets/textual_private.py relies on: "
                       + "; ".join(found))


async def test_a_changed_member_is_named() -> None:
    """The check can fail: what a Textual without these would look like, named one by one
    (DataTable: any Textual class with a private method will do)."""
    assert problems({DataTable: {"_render_line": ("self", "y"), "_no_such_method": ("self",)}},
                    {LinuxDriver: ("_writer_thread", "_no_such_file"), WriterThread: ("_no_such_queue",)}) == [
        "DataTable._render_line('self', 'y', 'x1', 'x2', 'base_style'): textual_private.py expects ('self', 'y')",
        "DataTable._no_such_method is gone", "LinuxDriver._no_such_file is gone", "WriterThread._no_such_queue is gone"]


async def test_the_private_textual_api_the_tests_rely_on_is_still_there() -> None:
    """The same for ``tests/textual_test_private.py``: each private function it calls has the
    parameters it passes, each private attribute it reads or sets is still there."""
    import textual

    relied_on = textual_test_private.RELIED_ON
    assert {holder.__name__: dict(members) for holder, members in relied_on.items()} == EXPECTED_TEST_MEMBERS
    assert ({cls.__name__: names for cls, names in textual_test_private.RELIED_ON_ATTRIBUTES.items()}
            == EXPECTED_TEST_ATTRIBUTES)
    found = problems(relied_on, textual_test_private.RELIED_ON_ATTRIBUTES)
    assert not found, (f"Textual {textual.__version__} changed what tests/textual_test_private.py relies on: "
                       + "; ".join(found))
