"""`fvconsole --print-completion SHELL`: a completion script generated from the parser by shtab.

Generated, never hand-written, so it cannot drift from the options. shtab is imported only
when a script is asked for: `--help` and the headless commands stay as light as before.
"""

from __future__ import annotations

import argparse

from fvconsole.cli.streams import write_out

SHELLS = ("bash", "zsh", "fish")

# Arguments that name paths, by metavar: the shells then complete file or directory names.
_DIR_METAVARS = frozenset({"DIR", "CKPT", "ROOT"})
_FILE_METAVARS = frozenset({"RUN.yaml"})

BASH_DIR = "~/.local/share/bash-completion/completions"
INSTALL = f"""\
install (then open a new shell):
  bash: mkdir -p {BASH_DIR} && fvconsole --print-completion bash > {BASH_DIR}/fvconsole
  zsh:  mkdir -p ~/.zfunc && fvconsole --print-completion zsh > ~/.zfunc/_fvconsole
        (with fpath+=(~/.zfunc) before compinit in ~/.zshrc)
  fish: mkdir -p ~/.config/fish/completions && fvconsole --print-completion fish > ~/.config/fish/completions/fvconsole.fish"""


def _mark_paths(parser: argparse.ArgumentParser, shtab: object) -> None:
    """Tell shtab which arguments complete as directories or files, in every subparser."""
    for action in parser._actions:
        if action.metavar in _DIR_METAVARS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif action.metavar in _FILE_METAVARS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _mark_paths(sub, shtab)


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for ``shell`` (bash, zsh or fish)."""
    from fvconsole.core.shared import FvError

    try:
        import shtab
    except ImportError:
        raise FvError("shell completion needs the shtab package: python -m pip install shtab") from None
    _mark_paths(parser, shtab)
    script = shtab.complete(parser, shell=shell)
    return script if script.endswith("\n") else script + "\n"  # a file the shell and `cat` end cleanly


class PrintCompletion(argparse.Action):
    """Prints the script and exits, like --version (the rest of the command line is ignored)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, choices=SHELLS, metavar="SHELL", help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        write_out(completion_script(parser, str(values)))
        parser.exit()
