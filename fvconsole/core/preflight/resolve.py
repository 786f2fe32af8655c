"""The *resolve* check: the checkpoint ``resume_from_checkpoint`` resolves to, as FastVideo resolves it.

FastVideo's ``_resolve_resume_checkpoint``: an empty value is a fresh start; ``latest`` takes the
highest ``checkpoint-<step>`` of ``output_dir`` with a ``dcp/`` directory (none, or no output dir:
a fresh start); a path is resolved (``expanduser`` + ``resolve``) and must exist; a ``dcp/``
dir stands for its checkpoint; a ``checkpoint-<step>`` dir must hold ``dcp/``; any other dir is
an output dir whose latest is taken, and none there is FastVideo's ``ValueError``. ``latest``
is retention's reading of the output dir (``core/retention/fastvideo.py``); an incomplete checkpoint
that it picks while a complete one exists is a warning naming its gaps in ``core/checkpoints/gaps.py``'s
words ("an interrupted save" only for a missing ``dcp/.metadata`` or RNG file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from fvconsole.core.checkpoints.listing import CheckpointInfo, checkpoint_step, discover_checkpoints
from fvconsole.core.preflight.fixes import prune_command
from fvconsole.core.preflight.model import Check, ResumePoint
from fvconsole.core.retention.fastvideo import fastvideo_outlook
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import real

RESUME_PATH = "training.checkpoint.resume_from_checkpoint"
OUTPUT_PATH = "training.checkpoint.output_dir"


@dataclass(frozen=True)
class Resolution:
    """Where the resume goes (None: a fresh start, or FastVideo fails: see ``check``)."""

    point: ResumePoint | None
    check: Check
    #: The output dir's checkpoints, as listed (for the room check and the warnings).
    infos: tuple[CheckpointInfo, ...] = ()


def _latest(out: str, config: Any) -> tuple[str | None, tuple[CheckpointInfo, ...]]:
    """FastVideo's ``_find_latest_checkpoint(out)``: the checkpoint dir, and the dir's listing."""
    infos = tuple(discover_checkpoints(out, read_dcp=False))
    step = fastvideo_outlook(out, infos, config).latest
    if step is None:
        return None, infos
    found = next((i.path for i in infos if i.step == step and i.has_dcp), None)
    return found or os.path.join(out, f"checkpoint-{step}"), infos


def _incomplete_warning(chosen: str, infos: tuple[CheckpointInfo, ...], out: str) -> Check | None:
    """The warning when ``latest`` picks an incomplete checkpoint while a complete one exists: its gaps by
    kind (``gap_brief``: a FIFO at ``dcp/.metadata`` is no interrupted save), then each gap's line."""
    info = next((i for i in infos if i.path == chosen), None)
    if info is None or info.complete:
        return None
    complete = max((i for i in infos if i.complete), key=lambda i: i.step, default=None)
    if complete is None:
        return None
    why = "; ".join(g.summary for g in info.gaps) or "incomplete"  # what it lacks, not just its first problems
    brief = info.gaps_brief
    what = "an interrupted save" if brief == "interrupted save" else f"incomplete: {brief}"
    return Check("resolve", "warn", f"latest picks {info.name}, {what} ({why}), while "
                 f"{complete.name} is complete", fix=prune_command(out))


def resolve_resume(value: Any, output_dir: Any, config: Any) -> Resolution:
    """The resolve check for ``resume_from_checkpoint`` = ``value`` under ``output_dir``."""
    if not value:
        return Resolution(None, Check("resolve", "ok", f"{RESUME_PATH} is not set: a fresh start"))
    if str(value).strip().lower() == "latest":
        if not isinstance(output_dir, str) or not output_dir:
            return Resolution(None, Check("resolve", "fail", f"{RESUME_PATH} is 'latest' but {OUTPUT_PATH} "
                                          "is not set"))
        out = real(output_dir)
        if not os.path.exists(out):
            return Resolution(None, Check("resolve", "warn", f"latest: {out} does not exist: FastVideo starts "
                                          "from scratch"))
        try:
            chosen, infos = _latest(out, config)
        except FvError as exc:
            return Resolution(None, Check("resolve", "fail", str(exc)))
        if chosen is None:
            return Resolution(None, Check("resolve", "warn", f"latest: no checkpoint-<step> with dcp/ under "
                                          f"{out}: FastVideo starts from scratch"), infos)
        point = ResumePoint(chosen, checkpoint_step(chosen) or 0)
        warning = _incomplete_warning(chosen, infos, out)
        return Resolution(point, warning or Check("resolve", "ok", f"latest: {point.name} (step {point.step}) "
                                                  f"in {out}"), infos)
    return _resolve_path(str(value), config)


def _resolve_path(value: str, config: Any) -> Resolution:
    path = real(value)
    if not os.path.exists(path):
        return Resolution(None, Check("resolve", "fail", f"resume_from_checkpoint not found: {path}"))
    if os.path.isdir(path) and os.path.basename(path) == "dcp":
        path = os.path.dirname(path)
    if os.path.isdir(path) and checkpoint_step(path) is not None:
        if not os.path.isdir(os.path.join(path, "dcp")):
            return Resolution(None, Check("resolve", "fail", f"Missing dcp dir under checkpoint: "
                                          f"{os.path.join(path, 'dcp')}"))
        try:
            infos = tuple(discover_checkpoints(os.path.dirname(path), read_dcp=False))
        except FvError:
            infos = ()
        point = ResumePoint(path, checkpoint_step(path) or 0)
        return Resolution(point, Check("resolve", "ok", f"{point.name} (step {point.step})"), infos)
    if not os.path.isdir(path):
        return Resolution(None, Check("resolve", "fail", f"resume_from_checkpoint {path} is neither a "
                                      "checkpoint-<step> dir nor an output dir (NotADirectoryError)"))
    try:
        chosen, infos = _latest(path, config)
    except FvError as exc:
        return Resolution(None, Check("resolve", "fail", str(exc)))
    if chosen is None:
        return Resolution(None, Check("resolve", "fail", "Could not resolve resume checkpoint: no "
                                      f"checkpoint-<step> with dcp/ in {path} (ValueError)"))
    point = ResumePoint(chosen, checkpoint_step(chosen) or 0)
    return Resolution(point, Check("resolve", "ok", f"{point.name} (step {point.step}), the latest in {path}"),
                      infos)
