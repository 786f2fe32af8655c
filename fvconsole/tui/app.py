"""The fvconsole Textual app: three views (plus the fleet view when installed), keys, palette.

Layout: header, a paths bar (what is loaded, what is missing), tabbed views, footer with key
hints. All file-system work runs in thread workers (see ``base.BaseView.run_in_thread``);
the event loop only renders.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from fvconsole.core.printable import printable
from fvconsole.tui import backend
from fvconsole.tui.base import BaseView, describe_error
from fvconsole.tui.cache_view import CacheView
from fvconsole.tui.checkpoints_view import CheckpointsView
from fvconsole.tui.migration_view import MigrationView
from fvconsole.tui.modals import HelpScreen, PathsScreen
from fvconsole.tui.plain import PlainText
from fvconsole.tui.state import ConsoleState
from fvconsole.tui.widgets import PlainStatic

try:  # the fleet engineer's view is optional
    from fvconsole.tui.fleet_view import FleetView
except Exception:  # noqa: BLE001 - ImportError or a half-written module must not break the app
    FleetView = None  # type: ignore[assignment,misc]

VIEWS = (("checkpoints", "1", "Checkpoints"), ("migration", "2", "Migration"), ("cache", "3", "Shard cache"))

HELP_SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Everywhere", [
        ("1 / 2 / 3 / 4", "Checkpoints / Migration / Shard cache / Fleet view (or click the tab)"),
        ("/", "filter the current table (rebuilt from memory)"),
        ("Esc", "close the filter; in a form field, back to the view's table"),
        ("r", "refresh the current view from disk (Fleet: rescan the nodes)"),
        ("o", "open paths: run config, checkpoints dir, cache root (→ completes a path)"),
        ("ctrl+p", "command palette: every action by name"),
        ("?", "this help"),
        ("q", "quit"),
        ("Tab / shift+Tab", "move focus between fields, tables and buttons"),
    ]),
    ("1 Checkpoints", [
        ("↑ / ↓", "select a checkpoint; the detail pane shows metadata, DCP keys, config mismatches"),
        ("m / Enter", "migrate the selected checkpoint (opens view 2 prefilled)"),
    ]),
    ("2 Migration", [
        ("ctrl+r / Enter", "preview: build the plan (refusals, mismatches, summary, per-rank table)"),
        ("ctrl+e", "execute the previewed plan (asks first; writes sidecars + receipt)"),
        ("ctrl+y", "verify existing sidecars in the output dir against the form"),
    ]),
    ("3 Shard cache", [
        ("space", "mark / unmark the selected entry"),
        ("e", "evict marked entries (preview, confirm, execute, rescan)"),
        ("c", "evict least-recently-used entries down to the cap ($FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB, 300)"),
        ("i", "evict unusable entries: invalid, and incomplete ones no write is finishing"),
    ]),
    ("4 Fleet", [
        ("ctrl+r / Enter", "scan the nodes (job id and/or node list, cache root; srun in the background)"),
        ("i", "evict invalid + incomplete entries on every node (preview, confirm, run, rescan)"),
        ("e", "evict the key selected in the matrix on every node that holds it"),
        ("c", "evict each node down to its cap ($FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB on that node)"),
    ]),
]


class FvConsoleApp(App[int]):
    """The operations console."""

    TITLE = "fvconsole"
    CSS = """
    #paths { height: auto; padding: 0 1; background: $boost; }
    TabbedContent { height: 1fr; }
    TabPane { padding: 0; }
    """
    BINDINGS = [
        Binding("1", "show('checkpoints')", "Checkpoints", show=False),
        Binding("2", "show('migration')", "Migration", show=False),
        Binding("3", "show('cache')", "Cache", show=False),
        Binding("4", "show('fleet')", "Fleet", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("r", "refresh", "Refresh"),
        Binding("o", "open_paths", "Open paths"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, state: ConsoleState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state
        self.loaded = False  # set once the first state load finished (tests wait on it)

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification (the views' and the fleet view's) is plain text with controls escaped.

        Messages carry file names, ids and node output: as markup, ``[/]`` in one crashed the
        console. ``markup`` is accepted for Textual's signature and ignored.
        """
        super().notify(printable(message, keep_newlines=True), title=printable(title), severity=severity,
                       timeout=timeout, markup=False)

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="paths")
        with TabbedContent(initial="checkpoints", id="views"):
            with TabPane("1 Checkpoints", id="checkpoints"):
                yield CheckpointsView(id="view-checkpoints")
            with TabPane("2 Migration", id="migration"):
                yield MigrationView(id="view-migration")
            with TabPane("3 Shard cache", id="cache"):
                yield CacheView(id="view-cache")
            if FleetView is not None:
                with TabPane("4 Fleet", id="fleet"):
                    yield FleetView(read_only=self.state.read_only, cache_root=self.state.cache_root)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "read-only" if self.state.read_only else ""
        self.load_state(self.state)

    # ------------------------------------------------------------ state

    def load_state(self, new_state: ConsoleState) -> None:
        """Load the run config (and the default checkpoints dir) in a worker, then refresh views."""
        self._render_paths(new_state, loading=True)
        self.run_worker(lambda: self._resolve(new_state), thread=True, exclusive=True, group="state",
                        exit_on_error=False)

    def _resolve(self, st: ConsoleState) -> None:
        worker = get_current_worker()
        run_config, error = None, None
        if st.config_path:
            try:
                run_config = backend.load_config(st.config_path)
            except Exception as exc:  # noqa: BLE001 - shown in the paths bar and a notification
                error = describe_error(exc)
        checkpoints = st.checkpoints_path or backend.config_output_dir(run_config)
        resolved = st.with_paths(checkpoints_path=checkpoints)
        from dataclasses import replace

        resolved = replace(resolved, run_config=run_config, config_error=error)
        if not worker.is_cancelled:
            with contextlib.suppress(RuntimeError):
                self.call_from_thread(self._apply_state, resolved)

    def _apply_state(self, st: ConsoleState) -> None:
        self.state = st
        self._render_paths(st)
        if st.config_error:
            self.notify(st.config_error, severity="error", timeout=10)
        missing = st.missing()
        if missing:
            self.notify("not set: " + ", ".join(missing) + ". Press o to pick paths.", severity="warning",
                        timeout=8)
        for view in self.query(BaseView):
            view.refresh_view()
        self.loaded = True

    def _render_paths(self, st: ConsoleState, loading: bool = False) -> None:
        text = PlainText()
        for label, value, error in (
            ("config", st.config_path, st.config_error),
            ("checkpoints", st.checkpoints_path, None),
            ("cache", st.cache_root, None),
        ):
            text.append(f"{label} ", style="bold")
            if error:
                text.append(f"{value} (unreadable)", style="bold red")
            elif value:
                text.append(value)
            else:
                text.append("not set (press o)", style="yellow")
            text.append("   ")
        if loading:
            text.append("loading …", style="italic")
        if st.read_only:
            text.append(" READ-ONLY ", style="bold black on yellow")
        self.query_one("#paths", Static).update(text)

    # ------------------------------------------------------------ navigation

    def current_view(self) -> BaseView | None:
        pane = self.query_one("#views", TabbedContent).active_pane
        if pane is None:
            return None
        views = list(pane.query(BaseView))
        return views[0] if views else None

    def action_show(self, name: str) -> None:
        tabs = self.query_one("#views", TabbedContent)
        if name == "fleet" and FleetView is None:
            self.notify("the fleet view is not installed", severity="warning")
            return
        tabs.active = name
        self._focus_active()
        self.call_after_refresh(self._focus_active)

    def _focus_active(self) -> None:
        """Focus the main widget of whichever view is active *now* (tab events can arrive late)."""
        view = self.current_view()
        if view is not None:
            view.focus_main()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.call_after_refresh(self._focus_active)

    def open_migration(self, info: Any) -> None:
        """Switch to the migration view, prefilled from a checkpoint."""
        self.query_one(MigrationView).prefill(info.path, info.step)
        self.action_show("migration")

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
            if result is not None:
                new_state = self.state.with_paths(
                    config_path=result["config"], checkpoints_path=result["checkpoints"],
                    cache_root=result["cache_root"])
                if FleetView is not None and new_state.cache_root != st.cache_root:
                    self.query_one(FleetView).offer_cache_root(st.cache_root, new_state.cache_root)
                self.load_state(new_state)

        self.push_screen(screen, done)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(HELP_SECTIONS, self.state.read_only))

    # ------------------------------------------------------------ command palette

    def _in_view(self, name: str, action: Callable[[], None]) -> Callable[[], None]:
        """A palette callback that first shows the view the action belongs to."""

        def run() -> None:
            self.action_show(name)
            action()

        return run

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        ro = " (disabled: read-only)" if self.state.read_only else ""
        migration = self.query_one(MigrationView)
        cache = self.query_one(CacheView)
        yield SystemCommand("Checkpoints view", "Show the checkpoints (1)", lambda: self.action_show("checkpoints"))
        yield SystemCommand("Migration view", "Show the migration form (2)", lambda: self.action_show("migration"))
        yield SystemCommand("Shard cache view", "Show the weight shard cache (3)", lambda: self.action_show("cache"))
        yield SystemCommand("Open paths", "Pick run config, checkpoints and cache root (o)", self.action_open_paths)
        yield SystemCommand("Refresh", "Reload the current view from disk (r)", self.action_refresh)
        yield SystemCommand("Preview migration", "Build the migration plan from the form (ctrl+r)",
                            self._in_view("migration", migration.action_preview))
        yield SystemCommand("Execute migration" + ro, "Write the previewed sidecars, asks first (ctrl+e)",
                            self._in_view("migration", migration.action_execute))
        yield SystemCommand("Verify sidecars", "Check existing sidecars against the form (ctrl+y)",
                            self._in_view("migration", migration.action_verify))
        yield SystemCommand("Evict marked cache entries" + ro, "Plan, confirm and evict marked entries (e)",
                            self._in_view("cache", cache.action_evict_marked))
        yield SystemCommand("Evict cache to cap" + ro, "Evict LRU entries down to the cap (c)",
                            self._in_view("cache", cache.action_evict_cap))
        yield SystemCommand("Evict invalid cache entries" + ro, "Evict entries that cannot be used (i)",
                            self._in_view("cache", cache.action_evict_invalid))
        if FleetView is not None:
            fleet = self.query_one(FleetView)
            yield SystemCommand("Fleet view", "Show the node-local caches across Slurm nodes (4)",
                                lambda: self.action_show("fleet"))
            yield SystemCommand("Fleet: scan nodes", "srun `cache ls` on every selected node (ctrl+r)",
                                self._in_view("fleet", fleet.action_scan))
            yield SystemCommand("Fleet: evict invalid + incomplete" + ro,
                                "Preview, confirm and evict unusable entries on every node (i)",
                                self._in_view("fleet", fleet.action_evict_invalid))
            yield SystemCommand("Fleet: evict selected key" + ro,
                                "Preview, confirm and evict the matrix's selected key on every node (e)",
                                self._in_view("fleet", fleet.action_evict_key))
            yield SystemCommand("Fleet: evict each node to its cap" + ro,
                                "Preview, confirm and evict LRU entries down to each node's cap (c)",
                                self._in_view("fleet", fleet.action_evict_cap))
        yield SystemCommand("Key help", "List every key (?)", self.action_help)
