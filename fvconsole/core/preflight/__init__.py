"""Resume preflight: one verdict, before ``sbatch``, on whether the next job resumes on every rank.

- :mod:`.request`: what is asked (the next config, its checkpoint, world size, override dir).
- :mod:`.resolve`, :mod:`.checkpoint`, :mod:`.loader`, :mod:`.rng`, :mod:`.dataset`,
  :mod:`.room`, :mod:`.cache`: one check each, as FastVideo meets them at resume.
- :mod:`.run`: ``run_preflight(request)`` → :class:`~.model.PreflightReport`; :mod:`.model`: the
  records and their wording (the verdict line, folded rank ranges, the fix command).

The top floor of the core: it reads through retention (FastVideo's ``latest``), migration (the
published sets, the reshard receipts, ``sidecars verify``), the fleet (``--nodes``/``--job``), the
checkpoints (DCP storage, disk budget), the cache and the formats. Reads only.
"""

from __future__ import annotations

from fvconsole.core.preflight.fixes import STATE_DIR_FLAG
from fvconsole.core.preflight.model import CHECKS, Check, PreflightReport, ResumePoint
from fvconsole.core.preflight.request import STATE_DIR_ENV, PreflightRequest
from fvconsole.core.preflight.run import run_preflight

__all__ = [
    "CHECKS",
    "Check",
    "PreflightReport",
    "PreflightRequest",
    "ResumePoint",
    "STATE_DIR_ENV",
    "STATE_DIR_FLAG",
    "run_preflight",
]
