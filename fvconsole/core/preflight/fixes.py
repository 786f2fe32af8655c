"""The command lines preflight names, built in one place: the fix of a no-go, and its own options.

A no-go names the fvconsole command that fixes its first problem (``migrate`` for missing or
mis-sized dataloader state, with ``--reshard nearest`` on a topology change; ``checkpoints prune
--incomplete`` for an interrupted save ``latest`` picks; ``sidecars verify`` for a published set
that no longer verifies): command-line text, shown as is by the console too (a command to run),
its flags spelled by ``core/shared/flags.py``. The notes and warnings beside them reach the console
as they are, so they name no flag (the console has no options): an input a command line gave is
named by its flag's constant (``WORLD_FLAG``, ``STATE_DIR_FLAG``), any other text says none.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from fvconsole.core.shared import flags

WORLD_FLAG, STATE_DIR_FLAG = flags.WORLD_SIZE, flags.DATALOADER_STATE_DIR
CONFIG, SET, CHECKPOINT, OUTPUT_DIR, RESHARD = flags.CONFIG, flags.SET, flags.CHECKPOINT, flags.OUTPUT_DIR, flags.RESHARD
INCOMPLETE, SIDECAR_DIR = flags.INCOMPLETE, flags.SIDECAR_DIR


def migrate_command(config: str, overrides: Sequence[str], checkpoint: str, out: str, reshard: bool) -> str:
    """The ``fvconsole migrate`` dry run that writes the state this job needs (``--yes`` executes it)."""
    words = ["fvconsole", "migrate", CONFIG, config]
    for item in overrides:
        words += [SET, item]
    words += [CHECKPOINT, checkpoint, OUTPUT_DIR, out]
    if reshard:
        words += [RESHARD, "nearest"]
    return shlex.join(words)


def prune_command(output_dir: str) -> str:
    """The prune that removes the interrupted saves ``latest`` would pick."""
    return shlex.join(["fvconsole", "checkpoints", "prune", output_dir, INCOMPLETE])


def verify_command(config: str, checkpoint: str, sidecar_dir: str) -> str:
    return shlex.join(["fvconsole", "sidecars", "verify", CONFIG, config, CHECKPOINT, checkpoint,
                       SIDECAR_DIR, sidecar_dir])


def resharded_by(mode: object) -> str:
    return f"fvconsole's migration (reshard mode {mode})"


def no_state_dir_note(env: str) -> str:
    return f"no dataloader override dir (none given, and {env} unset where preflight runs)"


def export_state_dir(env: str, set_dir: str) -> str:
    """The job's fix when its published set exists but the job would not be given it."""
    return f"export {env}={shlex.quote(set_dir)}"


def pass_state_dir(env: str) -> str:
    return f"export {env} as that dir in the job, and give preflight the same dir"
