"""The fvconsole Textual app: five views, keys, help and palette generated from the bindings.

Layout: header, a paths line (what is loaded, what is missing), tabbed views, footer with key
hints. Styles live in ``styles/*.tcss``; the screen carries ``-narrow``/``-wide`` and
``-short``/``-tall`` classes (breakpoints) so every view rearranges itself down to 80×24.
All file-system work runs in thread workers; the event loop only renders.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.await_complete import AwaitComplete
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane, Tabs
from textual.worker import get_current_worker

from fvconsole.core.formats import load_run_config
from fvconsole.core.migration import PublishedSet, config_output_dir, latest
from fvconsole.core.shared import printable
from fvconsole.tui import keymap
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.cache.view import CacheView
from fvconsole.tui.checkpoints.view import CheckpointsView
from fvconsole.tui.fleet.view import FleetView
from fvconsole.tui.history.view import HistoryView
from fvconsole.tui.messages import StateLoaded
from fvconsole.tui.migration.view import MigrationView
from fvconsole.tui.modals import HelpScreen, PathsScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.state import ConsoleState
from fvconsole.tui.terminal import ConsoleDriver
from fvconsole.tui.widgets.statics import PathsLine
from fvconsole.tui.widgets.tables import FastTable
from fvconsole.tui.widgets.textual_private import ConsolePalette

#: (tab id, view class) in tab order; the digit of a view is its position. Adding a view is one
#: entry here: its key (the next digit), tab, help section and palette commands follow from
#: its TITLE and BINDINGS (docs/development.md, "Adding a view").
VIEWS: tuple[tuple[str, type[BaseView]], ...] = (
    ("checkpoints", CheckpointsView), ("migration", MigrationView), ("cache", CacheView), ("fleet", FleetView),
    ("history", HistoryView),
)

_V = TypeVar("_V", bound=BaseView)

#: Seconds after SIGTERM/SIGHUP when a console that has still not exited (and runs no write)
#: is ended with ``os._exit``: the bounded exit takes well under this.
LAST_RESORT = 5.0


class FvConsoleApp(App[int]):
    """The operations console."""

    TITLE = "fvconsole"
    #: The first view's table, not the first focusable widget: with the tab bar out of the Tab
    #: chain that was view 1's hidden filter field, which took the digits typed next.
    AUTO_FOCUS = "#ckpt-table"
    CSS_PATH: ClassVar[list[str]] = ["styles/console.tcss", "styles/views.tcss", "styles/dialogs.tcss"]
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-short"), (36, "-tall")]

    BINDINGS: ClassVar[list[BindingType]] = [
        *[Binding(str(i), f"show('{name}')", cls.TITLE.split(" ", 1)[1], show=False,
                  tooltip="show a view: " + ", ".join(c.TITLE for _n, c in VIEWS) + " (or click its tab)")
          for i, (name, cls) in enumerate(VIEWS, 1)],
        Binding("slash", "filter", "Filter", show=False,
                tooltip="filter the view's table (rebuilt from memory; Esc closes)"),
        Binding("r", "refresh", "Refresh", show=False, tooltip="reload the view from disk (Fleet: rescan the nodes)"),
        Binding("o", "open_paths", "Open paths", show=False,
                tooltip="pick the run config, checkpoints dir and cache root (→ accepts a completion)"),
        Binding("ctrl+p", "command_palette", "Palette", show=False, tooltip="command palette: every action by name"),
        Binding("tab", "app.focus_next", "Next field", show=False,
                tooltip="move focus to the next field, table or button"),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False,
                tooltip="move focus to the previous field, table or button"),
        Binding("question_mark", "help", "Help", tooltip="this list of keys"),
        Binding("q", "quit", "Quit", tooltip="quit"),
    ]

    def __init__(self, state: ConsoleState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state
        self.loaded = False  # set once the first state load finished
        self._offer_last_migration = True
        #: Every view by its tab id, in tab order (composed once: the app reaches a view through this).
        self.views: dict[str, BaseView] = {}
        self._paths = PathsLine(id="paths")

    @classmethod
    def key_layout(cls) -> list[tuple[str, Sequence[type]]]:
        """Which bindings the help screen, the palette and docs/console.md list, under which title."""
        return [("Everywhere", (cls, BaseView)), ("Tables", (FastTable,)),
                *[(view.TITLE, (view,)) for _name, view in VIEWS]]

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification is plain text with controls escaped.

        Messages carry file names, ids and node output: as markup, ``[/]`` in one crashed the
        console. ``markup`` is accepted for Textual's signature and ignored.
        """
        super().notify(printable(message, keep_newlines=True), title=printable(title), severity=severity,
                       timeout=timeout, markup=False)

    # ------------------------------------------------------------ shutdown safety

    @property
    def exiting(self) -> bool:
        """The app was asked to exit (``exit`` or an unhandled error set its return code) or has
        stopped running: keys still queued must not start anything."""
        return self.return_code is not None or not self.is_running

    def push_screen(self, screen: Any, callback: Any = None, wait_for_dismiss: bool = False) -> Any:
        """No screen is pushed once the app exits (``q`` then ``?`` within a few ms crashed it)."""
        if self.exiting:
            return None
        return super().push_screen(screen, callback, wait_for_dismiss=wait_for_dismiss)

    def action_command_palette(self) -> None:
        if self.use_command_palette and not self.exiting and not CommandPalette.is_open(self):
            self.push_screen(ConsolePalette(id="--command-palette"))

    def pop_screen(self) -> AwaitComplete:
        """A stray second close (Textual's command palette dismisses twice on two quick Enters)
        finds only the main screen left: nothing to close, not a crash."""
        if len(self.screen_stack) <= 1:
            return AwaitComplete.nothing()
        return super().pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Nothing runs while exiting; view digits never fire while a text field has focus."""
        if self.exiting:
            return False
        return not (action == "show" and isinstance(self.focused, Input))

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        yield self._paths
        self._tabs = TabbedContent(initial="checkpoints", id="views")
        with self._tabs:
            for i, (name, cls) in enumerate(VIEWS, 1):
                with TabPane(f"{i} {cls.TITLE.split(' ', 1)[1]}", id=name):
                    self.views[name] = cls.for_state(self.state, id=f"view-{name}")
                    yield self.views[name]
        yield Footer(compact=True)

    #: Set by the launcher (not under ``run_test``): SIGTERM and SIGHUP end the console like `q`.
    exit_on_signals: bool = False

    def on_mount(self) -> None:
        self.sub_title = "read-only" if self.state.read_only else ""
        # Tab cycles within the view: the tab bar is reached with 1-5 or a click, never by
        # Tab (focused, it took the view's keys out of the footer and off the keyboard).
        self._tabs.query_one(Tabs).can_focus = False
        if self.exit_on_signals:
            self._exit_on_signals()
        self.load_state(self.state)

    def _exit_on_signals(self) -> None:
        """SIGTERM (``kill``, ``timeout``) and SIGHUP end the console through Textual's own exit,
        which restores the terminal; the default action killed the process with the terminal
        left raw, without echo and in the alternate screen. A signal the user chose to ignore
        (``nohup``) stays ignored. A write already running in a worker thread is finished
        before the process exits (the interpreter waits for it), never cut in half.

        Plain ``signal.signal`` handlers, not the event loop's: those run only when the loop
        does, and a loop waiting for a terminal that never reads never gets to them (D40).
        These run in the main thread wherever it waits; they bound the driver's waits for the
        terminal, ask the loop to exit, and arm the last resort."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, lambda signum, _frame, loop=loop: self._signalled(loop, signum))

    #: The exit code of the first SIGTERM/SIGHUP (128 + its number), once one arrived.
    _signal_code: int | None = None
    #: The console's terminal driver, once it has attached itself (not under ``run_test``).
    terminal: ConsoleDriver | None = None

    def terminal_attached(self, driver: ConsoleDriver) -> None:
        """Called by the driver Textual builds for this app: the signal handlers and the launcher
        bound its waits for the terminal and ask it whether the terminal is gone."""
        self.terminal = driver

    def _signalled(self, loop: asyncio.AbstractEventLoop, signum: int) -> None:
        """A signal handler: nothing here waits, takes a lock the main thread may hold, or
        touches the DOM."""
        if self._signal_code is not None:
            return
        self._signal_code = code = 128 + signum
        driver = self.terminal
        if driver is not None:
            driver.stopping()
        with contextlib.suppress(RuntimeError):  # the loop has closed: the process is ending
            loop.call_soon_threadsafe(self._exit_with, code)
        threading.Thread(target=self._last_resort, args=(code,), name="fvconsole-last-resort", daemon=True).start()

    def _exit_with(self, code: int) -> None:
        if not self.exiting:
            self.exit(return_code=code)

    def _last_resort(self, code: int) -> None:
        """If the process still runs ``LAST_RESORT`` seconds after the signal, and no write
        runs, put back the terminal's modes and end it: something waits that never returns."""
        time.sleep(LAST_RESORT)
        while any(view._writing for view in self.views.values()):
            time.sleep(0.5)
        driver = self.terminal
        if driver is not None:
            driver.restore_modes()
        os._exit(code)

    @property
    def terminal_gone(self) -> bool:
        """The terminal hung up or stopped reading: the launcher ends the process with ``os._exit``."""
        driver = self.terminal
        return driver is not None and driver.gone

    def terminal_hung_up(self) -> None:
        """The driver saw the terminal go away: end the console as SIGHUP does (on the loop)."""
        self._exit_with(128 + signal.SIGHUP)

    # ------------------------------------------------------------ state

    def load_state(self, new_state: ConsoleState) -> None:
        """Load the run config (and the default checkpoints dir) in a worker, then refresh views."""
        self._render_paths(new_state, loading=True)
        self.resolve_state(new_state)

    @work(thread=True, exclusive=True, group="state", exit_on_error=False)
    def resolve_state(self, st: ConsoleState) -> None:
        run_config, error = None, None
        if st.config_path:
            try:
                run_config = load_run_config(st.config_path)
            except Exception as exc:  # noqa: BLE001 - shown in the paths line and a notification
                error = describe_error(exc)
        checkpoints = st.checkpoints_path or config_output_dir(run_config)
        resolved = replace(st.with_paths(checkpoints_path=checkpoints), run_config=run_config, config_error=error)
        if not get_current_worker().is_cancelled:
            self.post_message(StateLoaded(resolved))

    def on_state_loaded(self, message: StateLoaded) -> None:
        st = message.state
        self.state = st
        self._render_paths(st)
        if st.config_error:
            self.notify(st.config_error, severity="error", timeout=10)
        missing = st.missing()
        if missing:
            self.notify("not set: " + ", ".join(missing) + ". Press o to pick paths.", severity="warning",
                        timeout=8)
        for view in self.views.values():
            view.refresh_view()
        self.loaded = True

    def _render_paths(self, st: ConsoleState, loading: bool = False) -> None:
        suffix = PlainText()
        if loading:
            suffix.append("loading … ", style="italic")
        if st.read_only:
            suffix.append(" READ-ONLY ", style="bold black on yellow")
        self._paths.show(
            [("config", st.config_path, "bold red" if st.config_error else ""),
             ("checkpoints", st.checkpoints_path, ""), ("cache", st.cache_root, "")], suffix)

    def published_sets_found(self, sets: Iterable[PublishedSet]) -> None:
        """Checkpoints listed: offer the last migration (from its receipt) once, after a start."""
        if self._offer_last_migration:
            self._offer_last_migration = False
            self.view(MigrationView).offer_published(latest(sets))

    def journal_written(self) -> None:
        """A console action appended to the journal: the History view reads it again."""
        self.view(HistoryView).refresh_view()

    def migration_written(self) -> None:
        """A migration published a set: the checkpoints view shows its checkpoint as migrated."""
        self.view(CheckpointsView).refresh_view()

    # ------------------------------------------------------------ navigation

    def view(self, cls: type[_V]) -> _V:
        """The app's one view of class ``cls``."""
        return next(view for view in self.views.values() if isinstance(view, cls))

    def current_view(self) -> BaseView | None:
        return self.views.get(self._tabs.active)

    def action_show(self, name: str) -> None:
        self._tabs.active = name
        self._focus_active()
        self.call_after_refresh(self._focus_active)

    def _focus_active(self) -> None:
        """Focus the main widget of whichever view is active *now* (tab events can arrive late),
        unless focus is in that view already (a field focused on purpose keeps it)."""
        view = self.current_view()
        focused = self.focused
        if view is not None and not self.exiting and (focused is None or view not in focused.ancestors_with_self):
            view.focus_main()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.call_after_refresh(self._focus_active)

    def open_migration(self, checkpoint: str, step: int | None) -> None:
        """Switch to the migration view, prefilled from a checkpoint."""
        self.view(MigrationView).prefill(checkpoint, step)
        self.action_show("migration")

    async def on_key(self, event: events.Key) -> None:
        """A key the focused text field would type, arriving here as an unhandled key, was
        queued for the widget focused before it: type it into the field.

        Textual hands each key to the widget focused when the key is read, so in a paste or a
        fast burst (`/evict`) the keys behind `/` reach the table after `/` has focused the
        filter, bubble up, and are dropped (the field's focus chain consumes printable keys,
        so no binding runs). The field would have stopped a key sent to it, so any such key
        here was meant for it: it is posted to the field (which stops it: it never comes back
        here). Other keys go on to ``App``'s own key handler (bindings), which
        Textual calls after this one (a class's handler runs before its bases').
        """
        focused = self.focused
        if focused is not None and event.is_printable and focused.check_consume_key(event.key, event.character):
            event.stop()
            event.prevent_default()  # App's key handler (next in the MRO) would look for a binding
            focused.post_message(events.Key(event.key, event.character))

    def action_filter(self) -> None:
        view = self.current_view()
        if view is not None:
            view.open_filter()

    def action_refresh(self) -> None:
        view = self.current_view()
        if view is not None:
            view.refresh_requested()

    def action_open_paths(self) -> None:
        st = self.state
        screen = PathsScreen(st.config_path, st.checkpoints_path, st.cache_root, st.missing())

        def done(result: dict[str, str] | None) -> None:
            if result is None:
                return
            new_state = self.state.with_paths(config_path=result["config"], checkpoints_path=result["checkpoints"],
                                              cache_root=result["cache_root"])
            if new_state.cache_root != st.cache_root:
                self.view(FleetView).offer_cache_root(st.cache_root, new_state.cache_root)
            self.load_state(new_state)

        self.push_screen(screen, done)

    #: ``q`` was pressed while a write ran: quit as soon as none runs.
    _quit_pending = False

    async def action_quit(self) -> None:
        """Quit; while an eviction or a migration writes, once it has finished (a write is
        never cut in half, and the key is not lost either)."""
        if any(view._busy for view in self.views.values()):
            if not self._quit_pending:
                self._quit_pending = True
                self.notify("a write is running: the console quits when it has finished", timeout=30)
            return
        self.exit()

    def quit_after_write(self) -> None:
        """A view's write ended: quit now if ``q`` was pressed meanwhile and nothing else writes."""
        if self._quit_pending and not self.exiting and not any(view._busy for view in self.views.values()):
            self.notify("the write has finished: quitting")
            self.exit()

    def action_help_quit(self) -> None:
        """ctrl+c (Textual's hint that it does not quit), in plain words: Textual's own text is
        markup, which the console's plain notifications would show raw (``[b]ctrl+q[/b]``)."""
        self.notify("Press q (or ctrl+q) to quit the console.", title="Do you want to quit?")

    def action_help(self) -> None:
        """Every key, the view on screen's first (as lazygit shows the current context's), then
        those of everywhere and of the tables, then the other views'."""
        layout = self.key_layout()
        view = self.current_view()
        title = type(view).TITLE if view is not None else None
        first = [(f"{name} (this view)", classes) for name, classes in layout if name == title]
        rest = [(name, classes) for name, classes in layout if name != title]
        self.push_screen(HelpScreen(keymap.sections(first + rest), self.state.read_only))

    # ------------------------------------------------------------ command palette

    def _in_view(self, name: str, view: BaseView, action: str) -> Callable[[], Any]:
        """A palette callback that shows the view the action belongs to, then runs it there."""

        async def run() -> None:
            self.action_show(name)
            if view.read_only and action in view.write_actions:
                # run_action would drop it silently (check_action hides write actions): say why, as the key does
                description = next((b.description for b in view.BINDINGS if getattr(b, "action", None) == action),
                                   action)
                view.refuse_read_only(description.lower())
                return
            await view.run_action(action)

        return run

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every documented binding of the app and the views, by name (generated, see ``tui.keymap``)."""
        yield from super().get_system_commands(screen)
        if self.exiting:
            return
        ro = " (disabled: read-only)" if self.state.read_only else ""
        titles = {f"show('{name}')": cls.TITLE for name, cls in VIEWS}
        for row in keymap.key_help([type(self)], merge=False):
            if row.action in ("command_palette", "app.focus_next", "app.focus_previous", "quit"):
                continue
            # The view keys share one help line (`?`); in the palette each says which view it shows.
            help_text = f"show view {titles[row.action]} (or click its tab)" if row.action in titles else row.help
            yield SystemCommand(row.description, f"{help_text} ({row.key_text})",
                                lambda action=row.action: self.run_action(action))
        for name, cls in VIEWS:
            view = self.views[name]
            title = cls.TITLE.split(" ", 1)[1]
            for row in keymap.key_help([cls], merge=False):
                suffix = ro if row.action in cls.write_actions else ""
                yield SystemCommand(f"{title}: {row.description}{suffix}", f"{row.help} ({row.key_text})",
                                    self._in_view(name, view, row.action))
