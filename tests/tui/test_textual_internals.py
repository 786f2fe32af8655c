"""What ``tui/widgets/textual_private.py`` relies on of Textual's private API is still there.

``RELIED_ON`` names each private method it overrides or calls, with its parameters, and
``RELIED_ON_ATTRIBUTES`` each private attribute it reads. A Textual that moved, renamed or gave
other parameters to any of them fails here, naming each.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from textual.command import CommandPalette

from fvconsole.tui.widgets.textual_private import RELIED_ON, RELIED_ON_ATTRIBUTES

#: What the console relies on, written here by hand from Textual 8's source: a change to
#: ``RELIED_ON`` or ``RELIED_ON_ATTRIBUTES`` must be a change here too, after reading the new Textual.
EXPECTED_MEMBERS = {"CommandPalette": ("_action_command_list", "_gather_commands")}
EXPECTED_ATTRIBUTES = {"CommandPalette": ("_GATHER_COMMANDS_GROUP",)}


def problems(members: Mapping[type, Mapping[str, tuple[str, ...]]],
             attributes: Mapping[type, tuple[str, ...]]) -> list[str]:
    """Each member that is gone or has other parameters, each attribute its class lacks."""
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
        found += [f"{cls.__name__}.{name} is gone" for name in names if not hasattr(cls, name)]
    return found


def test_the_private_textual_api_relied_on_is_still_there() -> None:
    """Fails loudly, naming each member, on a Textual whose internals changed underneath."""
    import textual

    assert {cls.__name__: tuple(members) for cls, members in RELIED_ON.items()} == EXPECTED_MEMBERS
    assert {cls.__name__: names for cls, names in RELIED_ON_ATTRIBUTES.items()} == EXPECTED_ATTRIBUTES
    found = problems(RELIED_ON, RELIED_ON_ATTRIBUTES)
    assert not found, (f"Textual {textual.__version__} changed what tui/widgets/textual_private.py relies on: "
                       + "; ".join(found))


def test_a_changed_member_is_named() -> None:
    """The check can fail: what a Textual without these would look like, named one by one."""
    assert problems({CommandPalette: {"_action_command_list": ("self",), "_no_such_method": ("self",)}},
                    {CommandPalette: ("_no_such_group",)}) == [
        "CommandPalette._action_command_list('self', 'action'): textual_private.py expects ('self',)",
        "CommandPalette._no_such_method is gone", "CommandPalette._no_such_group is gone"]
