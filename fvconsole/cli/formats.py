"""``--format`` (with ``--json`` as its alias) and ``--output FILE`` for the listing commands.

``--output`` replaces the file atomically (temp in the same directory, fsync, rename), so a
reader such as node-exporter's textfile collector, which reads ``*.prom`` files at any
moment, sees the previous file or the new one, never half of one.
"""

from __future__ import annotations

import argparse
import os

from fvconsole.core.atomic import atomic_write_bytes
from fvconsole.core.errors import FvError, UsageError


def add_format_args(parser: argparse.ArgumentParser, choices: tuple[str, ...], *, output: bool = False) -> None:
    parser.add_argument("--format", choices=choices, default=None,
                        help=f"output format: {', '.join(choices)} (default text)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (same as --format json)")
    if output:
        parser.add_argument("--output", metavar="FILE",
                            help="write the output to FILE instead of stdout, replacing it atomically")


def output_format(args: argparse.Namespace) -> str:
    """The chosen format; ``--json`` with another ``--format`` is a usage error."""
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} contradict each other")
    fmt = "json" if args.json else (args.format or "text")
    args.json = fmt == "json"  # the error path prints {"error": ...} for --format json too
    return fmt


def write_output_file(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (FvError naming the file when it cannot be written)."""
    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise FvError(f"{target}: --output: is a directory")
    try:
        atomic_write_bytes(target, text.encode("utf-8"))
    except OSError as exc:
        raise FvError(f"{target}: --output: cannot write ({exc.strerror or exc})") from None
