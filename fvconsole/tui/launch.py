"""Open the console from the command line (textual is imported here, never by `--help`)."""

from __future__ import annotations

import argparse


def run_console(args: argparse.Namespace) -> int:
    """Run the app until the user quits; returns the exit code."""
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState

    app = FvConsoleApp(ConsoleState.from_args(args))
    app.exit_on_signals = True
    app.run()
    return int(app.return_code or 0)
