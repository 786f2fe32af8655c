"""Options that several commands have, each declared here once: one meaning, one declaration.

The spelling comes from ``core/shared/flags.py``; the help may say what the option means for
the command that has it. A command module calls these instead of ``add_argument`` for them,
so ``--grace`` of ``cache ls``, ``cache evict``, ``fleet cache`` and ``checkpoints prune`` is one
option, not four (``tests/cli/test_cli_flags.py`` proves no flag is declared twice for one
meaning). The eviction selectors are declared by ``cli/selectors.py``.
"""

from __future__ import annotations

import argparse

from fvconsole.cli.common import seconds
from fvconsole.core.shared import flags

#: Every command's --json help, unless it says more.
JSON_HELP = "print one JSON object"


def add_json(parser: argparse.ArgumentParser, help_text: str = JSON_HELP) -> None:
    """``--json``: exactly one JSON object on stdout."""
    parser.add_argument(flags.JSON, action="store_true", help=help_text)


def add_yes(parser: argparse.ArgumentParser, help_text: str = "execute (default: dry run)") -> None:
    """``--yes`` (``-y``), and ``--dry-run``: what the command does without ``--yes``, said out loud
    (habits from ``hf cache``); both together are a usage error (exit 2)."""
    either = parser.add_mutually_exclusive_group()
    either.add_argument(flags.YES_SHORT, flags.YES, action="store_true", help=help_text)
    either.add_argument(flags.DRY_RUN, action="store_true", help="only show the plan (the default)")


def add_grace(parser: argparse.ArgumentParser, help_text: str, default: str | None = None) -> None:
    """``--grace D``: something newer than D may still be being written, so it is left alone."""
    parser.add_argument(flags.GRACE, metavar="D", default=default, help=help_text)


def add_force(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--force``: also entries in use or being written."""
    parser.add_argument(flags.FORCE, action="store_true", help=help_text)


def add_wait(parser: argparse.ArgumentParser, help_text: str, default: float | None = None) -> None:
    """``--wait SECONDS``: how long ``--yes`` waits for another evictor of the root."""
    parser.add_argument(flags.WAIT, type=seconds(flags.WAIT), default=default, metavar="SECONDS", help=help_text)


def add_deep(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--deep`` of a cache verification: every byte of every shard is read."""
    parser.add_argument(flags.DEEP, action="store_true", help=help_text)


def add_torch_check(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--torch-check``: every sidecar also loaded by ``torch.load(weights_only=True)`` (imports torch)."""
    parser.add_argument("--torch-check", action="store_true", help=help_text)


def add_config(parser: argparse.ArgumentParser, help_text: str, *, required: bool = False) -> None:
    """``--config RUN.yaml``: the run config."""
    parser.add_argument(flags.CONFIG, required=required, metavar="RUN.yaml", help=help_text)


def add_checkpoint(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--checkpoint CKPT``: one ``checkpoint-<step>`` dir."""
    parser.add_argument(flags.CHECKPOINT, required=True, metavar="CKPT", help=help_text)


def add_journal(parser: argparse.ArgumentParser, help_text: str, *, default: object = argparse.SUPPRESS) -> None:
    """``--journal PATH``. SUPPRESS (the default) for a command's: not given there, ``fvconsole --journal
    PATH CMD ...`` (given before the command, as for the console) still counts instead of being reset."""
    parser.add_argument("--journal", metavar="PATH", default=default, help=help_text)


def add_nodes(parser: argparse.ArgumentParser, help_text: str = "Slurm hostlist, e.g. n[1-3] or gpu[01-04],login1") -> None:
    """``--nodes NODELIST``: the fleet's nodes (`fleet`, `preflight`'s cache check)."""
    parser.add_argument("--nodes", metavar="NODELIST", help=help_text)


def add_job(parser: argparse.ArgumentParser,
            help_text: str = "target the nodes of this running job (srun --jobid --overlap)") -> None:
    """``--job JOBID``: the nodes of a running Slurm job (`fleet`, `preflight`'s cache check)."""
    parser.add_argument("--job", metavar="JOBID", help=help_text)
