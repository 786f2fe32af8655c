"""``--format`` (with ``--json`` as its alias) and ``--output FILE`` for the listing commands.

``--output`` goes through the output-file door (:mod:`fvconsole.core.shared.output_file`): a regular
file (or an absent path) is replaced atomically (temp in the same directory, fsync, rename),
so a reader such as node-exporter's textfile collector, which reads ``*.prom`` files at any
moment, sees the previous file or the new one, never half of one; a FIFO or character device
(``/dev/stdout``, ``/dev/null``) is written through in place; anything else is refused.
"""

from __future__ import annotations

import argparse

from fvconsole.cli.options import add_json
from fvconsole.core.shared import UsageError, write_output


def add_format_args(parser: argparse.ArgumentParser, choices: tuple[str, ...], *, output: bool = False) -> None:
    parser.add_argument("--format", choices=choices, default=None,
                        help=f"output format: {', '.join(choices)} (default text)")
    add_json(parser, "print one JSON object (same as --format json)")
    if output:
        parser.add_argument("--output", metavar="FILE",
                            help="write the output to FILE instead of stdout (a regular file is replaced atomically, "
                                 "a FIFO or device written through)")


def output_format(args: argparse.Namespace) -> str:
    """The chosen format; ``--json`` with another ``--format`` is a usage error."""
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} contradict each other")
    fmt = "json" if args.json else (args.format or "text")
    args.json = fmt == "json"  # the error path prints {"error": ...} for --format json too
    return fmt


def write_output_file(path: str, text: str) -> None:
    """``--output FILE``: ``text`` to the file through the output-file door (``core.shared.output_file``)."""
    write_output(path, text.encode("utf-8"), "--output")
