"""How many more saves of the latest size fit on an output dir's filesystem.

Operators budget "save size x retention vs free space" (FastVideo's saves of a 33B run are
~741 GB each); a save that runs out of space half-way is an interrupted checkpoint that
FastVideo's "latest" resume then picks. Free space is ``statvfs``'s ``f_bavail x f_frsize``
(what an unprivileged writer such as the training job can use), as in ``core/cache``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from fvconsole.core.checkpoints.listing import CheckpointInfo, checkpoint_step
from fvconsole.core.shared.fields_json import fields_json


@dataclass(frozen=True)
class DiskBudget:
    """The output dir's filesystem and the newest complete save of known size."""

    path: str  # the output dir measured (the parent of a single checkpoint dir)
    free_bytes: int | None  # None: statvfs failed
    total_bytes: int | None
    latest: str | None  # the checkpoint whose size is the budget's unit
    latest_bytes: int | None
    saves_fit: int | None  # free // latest_bytes; None when either is unknown

    def to_json(self) -> dict[str, Any]:
        # latest_complete_path: `latest` named for what it is (the newest complete checkpoint, the size
        # a save costs); `latest` stays for the scripts that read it (issue 38 item 15).
        return fields_json(self, latest_complete_path=self.latest)


def _unit(infos: list[CheckpointInfo]) -> CheckpointInfo | None:
    """The newest complete checkpoint whose size walk finished: an interrupted save is smaller."""
    usable = [i for i in infos if i.complete and i.size_complete and i.bytes > 0]
    return max(usable, key=lambda i: i.step, default=None)


def disk_budget(path: str | os.PathLike[str], infos: list[CheckpointInfo]) -> DiskBudget:
    """Free space where the next save of ``path`` goes and how many saves like the latest fit."""
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    base = os.path.dirname(path) if checkpoint_step(path) is not None else path
    try:
        st = os.statvfs(base)
        free: int | None = st.f_bavail * st.f_frsize
        total: int | None = st.f_blocks * st.f_frsize
    except OSError:
        free = total = None
    unit = _unit(infos)
    size = unit.bytes if unit is not None else None
    fit = free // size if free is not None and size else None
    return DiskBudget(path=base, free_bytes=free, total_bytes=total,
                      latest=unit.path if unit is not None else None, latest_bytes=size, saves_fit=fit)
