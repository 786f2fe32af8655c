"""Command-line entry point: `fvconsole [options]` opens the console, subcommands run headless.

Every subcommand module registers its own parser and imports heavy dependencies (torch,
pyarrow, textual) only inside its handler, so `--help` and `cache ls` stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from fvconsole import __version__
from fvconsole.core.errors import EXIT_REFUSED, FvError
from fvconsole.core.printable import printable

# Subcommand modules, in the order `--help` lists them. Each defines register(subparsers).
_COMMAND_MODULES = ("checkpoints", "migrate", "sidecars", "cache", "fleet", "demo")

DESCRIPTION = """\
fvconsole: the operations console for FastVideo training runs.

Without a subcommand it opens the interactive console (Textual). Subcommands run
headless for scripts and `srun`: every write action is a dry run unless --yes is given,
and --json prints exactly one JSON object on stdout.

exit codes: 0 ok (dry runs included), 1 refused or verification failed (nothing
written), 2 usage error, 3 failed part-way during execution (what was done is reported).
"""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (cheap: no heavy imports)."""
    import importlib

    from fvconsole.cli.common import ArgumentParser  # usage errors show argv escaped

    parser = ArgumentParser(
        prog="fvconsole",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fvconsole {__version__}")
    parser.add_argument("--config", metavar="RUN.yaml", help="run config to load in the console")
    parser.add_argument(
        "--checkpoints",
        metavar="DIR",
        help="training output dir or one checkpoint-<step> dir (default: training.checkpoint.output_dir of --config)",
    )
    parser.add_argument(
        "--cache-root",
        metavar="DIR",
        help="weight shard cache root (default: $FASTVIDEO_WEIGHT_SHARD_CACHE)",
    )
    parser.add_argument("--read-only", action="store_true", help="disable every write action in the console")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"fvconsole.cli.{name}")
        module.register(sub)
    return parser


def _report_error(args: argparse.Namespace | None, exc: FvError) -> int:
    message = " ".join(str(exc).split()) or type(exc).__name__
    if args is not None and getattr(args, "json", False):
        payload = {"error": message}
        payload.update(exc.details)
        print(json.dumps(payload, sort_keys=True, default=str))
    print(f"error: {printable(message)}", file=sys.stderr)  # messages name files: shown escaped
    return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run fvconsole; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            from fvconsole.tui.launch import run_console

            return run_console(args)
        return int(args.func(args) or 0)
    except FvError as exc:
        return _report_error(args, exc)
    except BrokenPipeError:
        # `fvconsole ... | head`: the reader left; that is not an error worth a message.
        # Point stdout at devnull so the interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _report_error(args, FvError(f"{exc.strerror or exc}{where}"))
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last line of defence: no tracebacks for users
        if os.environ.get("FVCONSOLE_DEBUG"):
            raise
        err = FvError(f"internal error: {type(exc).__name__}: {exc} (set FVCONSOLE_DEBUG=1 for a traceback)")
        _report_error(args, err)
        return EXIT_REFUSED
