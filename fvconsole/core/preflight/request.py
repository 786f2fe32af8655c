"""What preflight is asked: the next job's run config, its checkpoint, world size and override dir.

One value for both front ends: the command line builds it with :meth:`PreflightRequest.from_flags`
(``FASTVIDEO_DATALOADER_STATE_DIR`` read from the environment preflight sees, and said so), the
console from the loaded config and the selected checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fvconsole.core.preflight.fixes import STATE_DIR_FLAG
from fvconsole.core.shared.fields_json import fields_json

#: FastVideo's ``_DATALOADER_STATE_OVERRIDE_ENV``.
STATE_DIR_ENV = "FASTVIDEO_DATALOADER_STATE_DIR"


@dataclass(frozen=True)
class PreflightRequest:
    """The next job as preflight judges it."""

    config_path: str
    overrides: tuple[str, ...] = ()
    #: ``--resume``: overrides the config's ``training.checkpoint.resume_from_checkpoint``.
    resume: str | None = None
    #: ``--world-size``: what ``torch.distributed`` will report (None: the config's ``num_gpus``).
    world_size: int | None = None
    #: The override dir the job will have (None: none), and where that was read.
    dataloader_state_dir: str | None = None
    state_dir_source: str | None = None
    cache_root: str | None = None
    nodes: str | None = None
    job: str | None = None
    strict: bool = False

    def to_json(self) -> dict:
        return fields_json(self)

    @classmethod
    def from_flags(cls, config_path: str, *, overrides: Sequence[str] = (), resume: str | None = None,
                   world_size: int | None = None, dataloader_state_dir: str | None = None,
                   cache_root: str | None = None, nodes: str | None = None, job: str | None = None,
                   strict: bool = False, environ: Mapping[str, str] = os.environ) -> PreflightRequest:
        """The request of a command line: ``--dataloader-state-dir``, else the environment's
        ``FASTVIDEO_DATALOADER_STATE_DIR`` (stripped, as FastVideo reads it; empty means unset)."""
        source = STATE_DIR_FLAG if dataloader_state_dir else None
        if not dataloader_state_dir:
            dataloader_state_dir = environ.get(STATE_DIR_ENV, "").strip() or None
            source = f"${STATE_DIR_ENV}" if dataloader_state_dir else None
        return cls(config_path, tuple(overrides), resume, world_size, dataloader_state_dir, source,
                   cache_root, nodes, job, strict)
