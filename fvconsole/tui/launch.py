"""Open the console from the command line (placeholder until the TUI lands)."""

from __future__ import annotations

import argparse

from fvconsole.core.errors import FvError


def run_console(args: argparse.Namespace) -> int:
    raise FvError("the interactive console is not built yet; use a subcommand (see --help)")
