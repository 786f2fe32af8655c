"""Every use of Textual's private API by the tests, benchmarks and scripts, in one module.

The console keeps its own in ``fvconsole/tui/widgets/textual_private.py``; this is the tests'
counterpart (issue 35, item 6). Everything else goes the public way: ``app.return_code`` for "the
app was asked to exit", ``app.message_queue_size`` for "no message waiting", ``app.post_message``
to queue a key without waiting, ``app.clipboard``, a screen's ``screen_layout_refresh_signal`` to
count layouts, and ``console_apps.shown_notifications``/``Notified`` (what ``App.notify`` posted)
for the notifications. What is left has no public route; each helper says why:

- :func:`key_event`: the ``Key`` event ``Pilot.press`` sends for a key name, built without
  waiting for the app (a burst of keys).
- :func:`input_suggestion`: the completion an ``Input`` offers after its value.
- :func:`on_each_frame`: a hook called with every frame the app composes (the benchmark's clock).
- ``WriterThread``: the class of the Linux driver's output thread, which
  ``tests/tui/test_textual_internals.py`` makes one of to check what the console relies on.

``RELIED_ON`` names each private function used here with its parameters, ``RELIED_ON_ATTRIBUTES``
each private attribute; ``tests/tui/test_textual_internals.py`` checks them against the installed
Textual, so a Textual that changed underneath fails there, naming what changed, instead of
silently sending other keys or timing nothing. ``tests/architecture/test_textual_private_outside.py``
fails on a private Textual name anywhere else in tests/, benchmarks/ and scripts/.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

import textual.keys
from textual import events
from textual.app import App
from textual.drivers._writer_thread import WriterThread
from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key
from textual.widgets import Input

__all__ = ["RELIED_ON", "RELIED_ON_ATTRIBUTES", "WriterThread", "input_suggestion", "key_event", "on_each_frame"]

#: Textual's private functions called here, by module, with their parameters.
RELIED_ON: dict[Any, dict[str, tuple[str, ...]]] = {
    textual.keys: {
        "_character_to_key": ("character",),
        "_get_unicode_name_from_key": ("key",),
    },
}
#: Textual's private attributes read or set here: the app's frame display, the Input's completion.
RELIED_ON_ATTRIBUTES: dict[type, tuple[str, ...]] = {
    App: ("_display",),
    Input: ("_suggestion",),
}


def key_event(key: str) -> events.Key:
    """The ``Key`` event Textual's driver sends for ``key``, built as ``Pilot.press`` builds it.

    Why private: ``Pilot.press`` waits for the app after each key, and the public
    ``textual.keys.key_to_character`` gives another character than ``Pilot.press`` sends for
    some keys (``"slash"``: None, where ``Pilot.press`` sends ``"/"``); the tables ``Pilot.press``
    uses are behind these two private functions.
    """
    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    return events.Key(key, char)


def input_suggestion(box: Input) -> str:
    """The completion ``box`` offers after its value ("" while it has none).

    Why private: ``Input`` keeps it in its private reactive ``_suggestion`` with no public
    accessor, and what it draws is cut to the box's width (a long path scrolls).
    """
    return box._suggestion


def on_each_frame(app: App[Any], hook: Callable[[Any, Any], None]) -> None:
    """Call ``hook(screen, renderable)`` with every frame ``app`` composes, just before Textual
    displays it (``renderable`` may be None: nothing to draw).

    Why private: Textual posts no public event per frame drawn, and ``Pilot``'s ``press`` and
    ``pause`` wait for idle periods of 20 ms each, so they cannot time anything below ~60 ms;
    the frames go through the app's private ``_display``.
    """
    display = app._display

    def hooked(screen: Any, renderable: Any) -> None:
        hook(screen, renderable)
        display(screen, renderable)

    app._display = hooked  # type: ignore[method-assign]
