"""Every use of Textual's private API in the console, in one module behind a small interface.

The interface the rest of the console uses:

- :class:`ConsolePalette`, Textual's command palette without two races. Textual offers no
  public way to catch them: the failing calls run inside the palette's own key action and its
  own search worker (``_action_command_list``, ``_gather_commands``), so the fix overrides them.
- The output side of Textual's Linux driver, which ``tui/terminal.py: ConsoleDriver`` bounds:
  :func:`wrap_driver_output` (the file its output thread writes to), :func:`driver_output_thread`
  and :func:`queue_output` (a put that gives up after a timeout). Why: the driver has no public
  way to watch or bound its output; a terminal that hangs up or stops reading otherwise leaves
  the console stuck in ``Queue.put`` for good (D40).

The console's tables once lived here too (``DataTable`` with its drawing overridden, for
``pagedown`` under 50 ms). Issue 35 item 6 tried the public route and it drew a page faster:
they are now ``tui/widgets/strip_table.py``, a ``ScrollView`` drawing ``Strip`` s on Textual's
public API, and nothing of ``DataTable`` is relied on any more.

Textual is pinned ``<9`` in pyproject. ``RELIED_ON`` names each private member used here with
its parameters, ``RELIED_ON_ATTRIBUTES`` each private attribute;
``tests/tui/test_textual_internals.py`` checks them against the installed Textual, so a Textual
that changed underneath fails it loudly, naming what changed
(``tests/architecture/test_textual_private.py`` fails on a private Textual name anywhere else
in the package).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import IO, TypeVar

from textual import work
from textual.command import CommandPalette
from textual.css.query import NoMatches
from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver

#: Textual's private members this module overrides or calls, by class, with their parameters
#: (checked against the installed Textual by ``tests/tui/test_textual_internals.py``).
RELIED_ON: dict[type, dict[str, tuple[str, ...]]] = {
    CommandPalette: {
        "_action_command_list": ("self", "action"),
        "_gather_commands": ("self", "search_value"),
    },
}
#: Textual's private attributes read here: CommandPalette's worker group, the Linux driver's
#: output file and thread, and that thread's queue.
RELIED_ON_ATTRIBUTES: dict[type, tuple[str, ...]] = {
    LinuxDriver: ("_file", "_writer_thread"),
    WriterThread: ("_queue",),
    CommandPalette: ("_GATHER_COMMANDS_GROUP",),
}


class ConsolePalette(CommandPalette):
    """Textual's command palette, minus a race: PgUp/PgDn typed before its list has been laid
    out looked up a line that does not exist yet (KeyError from OptionList). Then there is
    nothing to page through, so the key does nothing.

    Why private: both races happen inside the palette (its key action, its search worker);
    Textual offers no public hook around either, and the public route, a palette of our own,
    would rewrite a widget the console only needs to stop crashing.
    """

    def _action_command_list(self, action: str) -> None:
        try:
            super()._action_command_list(action)
        except (KeyError, IndexError):
            if action not in ("page_up", "page_down"):
                raise

    @work(exclusive=True, group=CommandPalette._GATHER_COMMANDS_GROUP)
    async def _gather_commands(self, search_value: str) -> None:
        """Textual's search worker, minus a second race: a palette closed by a key typed while
        it searched has no command list left to fill (NoMatches); that search has no one to
        answer, so it ends quietly."""
        try:
            await CommandPalette._gather_commands.__wrapped__(self, search_value)
        except NoMatches:
            if self.is_attached and self.app.screen is self:
                raise


# ------------------------------------------------------------ the terminal driver's output

_Wrapped = TypeVar("_Wrapped")


def wrap_driver_output(driver: LinuxDriver, wrap: Callable[[IO[str]], _Wrapped]) -> _Wrapped:
    """Make the driver's output thread write to ``wrap(its file)``, and return that.

    Call it before application mode starts (the thread takes the file when it starts). Why
    private: Textual's output thread dies on the first failed write (EIO from a hung-up
    terminal) with a traceback, and nobody hears of it; a wrapped file reports the failure."""
    wrapped = wrap(driver._file)
    driver._file = wrapped  # type: ignore[assignment]  # a file in all the thread uses: write, flush, fileno
    return wrapped


def driver_output_thread(driver: LinuxDriver) -> threading.Thread | None:
    """The thread that writes the driver's output to the terminal (None outside application
    mode): whether it still lives tells a stuck or dead terminal from a slow one."""
    return driver._writer_thread


def queue_output(thread: threading.Thread, data: str | None, timeout: float) -> None:
    """Queue ``data`` (None: the thread's stop mark) for the output thread, waiting at most
    ``timeout`` seconds for room (``queue.Full`` then). The driver's own ``write`` waits forever,
    where no signal handler of the event loop can run."""
    assert isinstance(thread, WriterThread), thread
    thread._queue.put(data, timeout=timeout)
