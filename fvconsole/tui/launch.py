"""Open the console from the command line (textual is imported here, never by `--help`)."""

from __future__ import annotations

import argparse
import os
import threading


def run_console(args: argparse.Namespace) -> int:
    """Run the app until the user quits; returns the exit code.

    When the terminal hung up or stopped reading (D40), the process ends here with
    ``os._exit``, once every worker thread has finished: the interpreter's normal exit would
    flush ``stderr`` into the dead terminal (exit 120), or wait for the lock of ``stderr`` held
    by Textual's output thread, stuck in a write that never returns."""
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState
    from fvconsole.tui.terminal import ConsoleDriver

    app = FvConsoleApp(ConsoleState.from_args(args), driver_class=ConsoleDriver)
    app.exit_on_signals = True
    app.run()
    code = int(app.return_code or 0)
    if app.terminal_gone:
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        os._exit(code)
    return code
