"""Command-line entry point: `fvconsole [options]` opens the console, subcommands run headless.

Every subcommand module registers its own parser and imports heavy dependencies (torch,
pyarrow, textual) only inside its handler, so `--help` and `cache ls` stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
from collections.abc import Sequence

from fvconsole import installed_version
from fvconsole.cli.outcome import CommandOutcome, Interruption, Invocation
from fvconsole.cli.parser import CliUsageError, json_requested, parse_command_line, parsed_prog, usage_hint
from fvconsole.cli.streams import (
    OutputError,
    discard_stdout,
    flush_stdout,
    guarded_streams,
    write_err,
    write_out,
)
from fvconsole.core.shared import (
    EXIT_PARTIAL,
    EXIT_REFUSED,
    EXIT_USAGE,
    FvError,
    Stop,
    UsageError,
    as_interrupted,
    interrupt_handlers,
    printable,
)

# Subcommand modules, in the order `--help` lists them. Each defines register(subparsers).
_COMMAND_MODULES = ("checkpoints", "migrate", "sidecars", "preflight", "cache", "fleet", "history", "demo")

DESCRIPTION = """\
fvconsole: the operations console for FastVideo training runs.

Without a subcommand it opens the interactive console (Textual). Subcommands run
headless for scripts and `srun`: every write action is a dry run unless --yes is given,
and --json prints exactly one JSON object on stdout.

Without a terminal (stdin or stdout not a TTY) the console does not start: exit 2.

exit codes: 0 ok (dry runs included), 1 refused or verification failed (nothing
written), 2 usage error, 3 failed part-way during execution, or the output could not
be written after the write (what was done is reported on stderr); 130/143/129
interrupted by Ctrl-C/SIGTERM/SIGHUP before anything was changed (after a change: 3).
"""


class InstalledVersion(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the installed version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser._print_message(f"fvconsole {installed_version()}\n", sys.stdout)
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser (cheap: no heavy imports); all of it unless ``argv`` names a command.

    When ``argv`` starts with a command's name, argparse can only parse it with that
    command's subparser, so only that command's module is imported and registered: a
    `migrate --yes` on a login node does not pay for importing the cache and fleet commands.
    Anything else (no command, a top-level option first, ``--help``) gets the full parser.
    """
    import importlib

    from fvconsole.cli.completion import INSTALL, PrintCompletion
    from fvconsole.cli.options import add_config, add_journal
    from fvconsole.cli.parser import CliParser

    parser = CliParser(
        prog="fvconsole",
        description=DESCRIPTION,
        epilog=f"shell completion (generated from this parser):\n{INSTALL}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=InstalledVersion)
    parser.add_argument("--print-completion", action=PrintCompletion,
                        help="print the completion script for SHELL (bash, zsh, fish) and exit")
    add_config(parser, "run config to load in the console")
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
    parser.add_argument("-r", "--read-only", action="store_true", help="disable every write action in the console")
    add_journal(parser, "the journal the console's History view reads and its migrations and evictions append to "
                        "(default $FVCONSOLE_JOURNAL, else $XDG_STATE_HOME/fvconsole/journal.jsonl)", default=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CliParser)
    first = argv[0] if argv else None
    for name in (first,) if first in _COMMAND_MODULES else _COMMAND_MODULES:
        module = importlib.import_module(f"fvconsole.cli.{name}")
        module.register(sub)
    return parser


def has_terminal() -> bool:
    """Whether both stdin and stdout are terminals (the console needs both)."""
    return all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))


def _say(line: str) -> None:
    write_err(line + "\n")


def _emit_error_json(payload: dict | None) -> None:
    """Flush what the command printed, then the error object under --json (payload given).

    If stdout itself fails here, the error line on stderr still tells what happened.
    """
    try:
        flush_stdout()
        if payload is not None:
            write_out(json.dumps(payload, sort_keys=True, default=str) + "\n")
            flush_stdout()
    except OutputError:
        discard_stdout()


#: The JSON error's ``code`` of an interruption (Ctrl-C, SIGTERM, SIGHUP); ``interrupted_by`` names the signal.
INTERRUPTED = "interrupted"


class InternalError(FvError):
    """A defect of fvconsole, not of the input: said in one line (no traceback), exit 1."""

    kind = "internal"


def _report_error(args: argparse.Namespace | None, exc: FvError, *, json_out: bool = False) -> CommandOutcome:
    message = " ".join(str(exc).split()) or type(exc).__name__
    json_out = json_out or (args is not None and getattr(args, "json", False))
    _emit_error_json({"error": message, "code": exc.error_code, **exc.details} if json_out else None)
    _say(f"error: {printable(message)}")
    if exc.exit_code == EXIT_USAGE:  # found by a command after parsing: the same hint as argparse's
        _say(usage_hint(parsed_prog(args)))
    return CommandOutcome(exc.exit_code, exc.reason)


def _report_usage(exc: CliUsageError, argv: Sequence[str]) -> int:
    """argparse errors: one `error:` line, a `try: ... --help` line, {"error"} under --json; exit 2."""
    _emit_error_json({"error": exc.message, "code": UsageError.kind} if json_requested(argv) else None)
    _say(f"error: {printable(exc.message)}")
    _say(exc.hint)
    return EXIT_USAGE


def _report_output_failure(args: argparse.Namespace | None, invocation: Invocation | None, exc: OutputError,
                           code: int | None) -> int:
    """stdout failed (full disk, closed, reader gone): say what was already done, if anything.

    After a recorded write: exit 3 and what was written. Before it, when --yes asked for a
    write: exit 1, nothing written. A read-only command whose reader left (`| head`) keeps its
    exit code quietly; any other output failure is exit 1.
    """
    discard_stdout()
    done = invocation.written if invocation is not None else None
    reason = f"error: could not write the output ({exc})"
    if done:
        _say(f"{reason}; {printable(done)}")
        return EXIT_PARTIAL
    if getattr(args, "yes", False):
        _say(f"{reason}; nothing was written")
        return EXIT_REFUSED
    if exc.errno == errno.EPIPE:
        return code or 0
    _say(reason)
    return max(code or 0, EXIT_REFUSED)


def _report_interrupt(args: argparse.Namespace | None, invocation: Invocation | None, stopped: Interruption, *,
                      json_out: bool = False) -> int:
    """Ctrl-C, SIGTERM or SIGHUP: one line saying what was already done; exit 3 after a change.

    Before anything was changed the exit code is the shell's 128 + signal (130, 143, 129),
    with what the cleanup did (a write command) or "nothing was changed" (--yes).
    """
    stop = stopped.stop
    done = (invocation.written if invocation is not None else None) or stop.done
    if done:
        message, code = f"interrupted by {stop.name}; {done}", EXIT_PARTIAL
    else:
        after = stop.note or ("nothing was changed" if getattr(args, "yes", False) else None)
        message, code = f"interrupted by {stop.name}" + (f"; {after}" if after else ""), stop.exit_code
    json_out = json_out or (args is not None and getattr(args, "json", False))
    _emit_error_json({**stopped.details, "error": message, "code": INTERRUPTED, "interrupted_by": stop.name}
                     if json_out else None)
    _say(f"error: {printable(message)}")
    return code


def _no_terminal() -> int:
    _say("error: the console needs a terminal; use a subcommand (fvconsole --help)")
    return EXIT_USAGE


def _run(args: argparse.Namespace, invocation: Invocation) -> int | Interruption:
    if args.command is None:
        if not has_terminal():
            return _no_terminal()
        from fvconsole.tui.launch import run_console

        return run_console(args)
    return args.func(args, invocation) or 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run fvconsole; returns the process exit code (usage errors raise SystemExit(2), like --help's 0)."""
    return run(sys.argv[1:] if argv is None else argv).exit_code


def run(argv: Sequence[str]) -> CommandOutcome:
    """Run ``fvconsole <argv>`` in-process: how it ended (exit code, and the refusal as data).

    Usage errors raise SystemExit(2), like --help's 0. Each run passes its own
    :class:`~fvconsole.cli.outcome.Invocation` to its command, so runs in one process never share state.
    """
    with guarded_streams(), contextlib.ExitStack() as handlers:
        return _dispatch(list(argv), handlers)


def _dispatch(argv: list[str], handlers: contextlib.ExitStack) -> CommandOutcome:
    args = None
    invocation = None
    code = None
    try:
        try:
            args = parse_command_line(build_parser(argv), argv)
        except SystemExit:  # --help, --version, --print-completion: make their output's failure ours
            flush_stdout()
            raise
        except CliUsageError as exc:
            raise SystemExit(_report_usage(exc, argv)) from None
        invocation = Invocation.of(args, argv)
        if args.command is not None:
            # A subcommand: SIGTERM/SIGHUP unwind like Ctrl-C (cleanup, one line, exit code),
            # until its outcome is reported. The console (no command) keeps Textual's handling.
            handlers.enter_context(interrupt_handlers())
        ran = _run(args, invocation)
        if isinstance(ran, Interruption):  # stopped by a signal: the runner's account, as the command returned it
            return CommandOutcome(_report_interrupt(args, invocation, ran))
        code = int(ran)
        flush_stdout()
        return CommandOutcome(code)
    except OutputError as exc:
        code = _report_output_failure(args, invocation, exc, code)
        if args is None:  # while printing --help: keep argparse's way of ending
            raise SystemExit(code) from None
        return CommandOutcome(code)
    except FvError as exc:
        return _report_error(args, exc, json_out=args is None and json_requested(argv))
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _report_error(args, FvError(f"{exc.strerror or exc}{where}"))
    except KeyboardInterrupt as exc:  # outside a runner (a read, printing the result): only its signal
        stopped = Interruption(Stop(as_interrupted(exc).signum))
        return CommandOutcome(_report_interrupt(args, invocation, stopped, json_out=args is None and json_requested(argv)))
    except Exception as exc:  # noqa: BLE001 - last line of defence: no tracebacks for users
        if os.environ.get("FVCONSOLE_DEBUG"):
            raise
        err = InternalError(f"internal error: {type(exc).__name__}: {exc} (set FVCONSOLE_DEBUG=1 for a traceback)")
        _report_error(args, err)
        return CommandOutcome(EXIT_REFUSED)
