"""The console's keys as data, read from the bindings themselves.

The help screen (``?``), the command palette (``ctrl+p``) and the keys table of
``docs/console.md`` are all generated from the ``BINDINGS`` of the app, the views and the
tables: a key is documented by its ``Binding(key, action, description, tooltip=...)`` and
nowhere else. ``description`` is the short name (footer, palette title), ``tooltip`` the
sentence the help screen and the palette show.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from textual.binding import Binding

#: How keys are written for people (Textual's names otherwise: ctrl+r, j, G).
KEY_NAMES = {
    "slash": "/", "question_mark": "?", "escape": "Esc", "enter": "Enter", "space": "Space",
    "home": "Home", "end": "End", "less_than_sign": "<", "greater_than_sign": ">", "asterisk": "*",
    "tab": "Tab", "shift+tab": "Shift+Tab", "up": "↑", "down": "↓", "left": "←", "right": "→",
}


@dataclass(frozen=True)
class KeyHelp:
    """One documented binding."""

    keys: tuple[str, ...]  # as written for people: ("ctrl+r",), ("m", "Enter")
    action: str
    description: str
    help: str
    show: bool  # shown in the footer

    @property
    def key_text(self) -> str:
        return " / ".join(self.keys)


def own_bindings(cls: type) -> list[Binding]:
    """The bindings ``cls`` declares itself (not the ones it inherits)."""
    return [b for b in cls.__dict__.get("BINDINGS", []) if isinstance(b, Binding)]


def is_documented(binding: Binding) -> bool:
    """Refusals (the read-only stand-ins of write keys) share their key's entry, and so does a
    key's footer-only twin (``evict_free('footer')``: shown where the footer has room)."""
    return not binding.action.startswith("refuse") and "('footer')" not in binding.action


def key_help(classes: Iterable[type], merge: bool = True) -> list[KeyHelp]:
    """Documented bindings of ``classes``: one entry per action, or with ``merge`` per help text
    (``1``…``4`` share one line), keys merged in order."""
    rows: dict[str, KeyHelp] = {}
    for cls in classes:
        for binding in own_bindings(cls):
            if not is_documented(binding):
                continue
            help_text = binding.tooltip or binding.description
            slot = help_text if merge else binding.action
            keys = tuple(KEY_NAMES.get(k, k) for k in map(str.strip, binding.key.split(",")))
            found = rows.get(slot)
            if found is not None:
                keys = found.keys + tuple(k for k in keys if k not in found.keys)
            rows[slot] = KeyHelp(keys, binding.action, binding.description, help_text, binding.show)
    return list(rows.values())


def sections(layout: Sequence[tuple[str, Sequence[type]]]) -> list[tuple[str, list[KeyHelp]]]:
    """``[(title, [KeyHelp …])]`` for a layout of ``(title, classes)``."""
    return [(title, key_help(classes)) for title, classes in layout]


def markdown_table(layout: Sequence[tuple[str, Sequence[type]]]) -> str:
    """The keys table of docs/console.md (``| key | where | action |``)."""
    lines = ["| key | where | action |", "| --- | --- | --- |"]
    for title, rows in sections(layout):
        for row in rows:
            keys = " ".join(f"`{k}`" if k != "|" else "`\\|`" for k in row.keys)
            lines.append(f"| {keys} | {title} | {row.help} |")
    return "\n".join(lines) + "\n"
