"""The *room* check: bytes and inodes on the output filesystem for the next save.

The next save is about the size of the checkpoint resumed from (``core/checkpoints/budget.py``,
whose unit is that checkpoint), and FastVideo's cleanup (``core/retention/fastvideo.py``) runs
only after that save: the room must be there before it. Fewer than two saves' worth is a
warning; a save that does not fit fails at the next save, not at resume.
"""

from __future__ import annotations

import os

from fvconsole.core.checkpoints.budget import disk_budget
from fvconsole.core.checkpoints.listing import CheckpointInfo
from fvconsole.core.preflight.model import Check
from fvconsole.core.shared.humanize import human_bytes, plural


def check_room(checkpoint: str, infos: tuple[CheckpointInfo, ...]) -> Check:
    """Room for the next saves of the size of ``checkpoint`` (from the output dir's listing ``infos``)."""
    info = next((i for i in infos if i.path == checkpoint), None)
    if info is None or not info.size_complete or info.bytes <= 0:
        return Check("room", "skip", f"the size of {os.path.basename(checkpoint)} is not known")
    budget = disk_budget(os.path.dirname(checkpoint), [info] if info.complete else [])
    if budget.free_bytes is None:
        return Check("room", "skip", f"{budget.path}: the filesystem's free space cannot be read")
    saves = budget.free_bytes // info.bytes
    try:
        st = os.statvfs(budget.path)
        inode_saves = st.f_favail // max(info.files, 1) if st.f_files else None
    except OSError:
        inode_saves = None
    fit = saves if inode_saves is None else min(saves, inode_saves)
    short = "inodes" if inode_saves is not None and inode_saves < saves else "bytes"
    text = (f"{budget.path}: room for {plural(fit, 'more save')} of {human_bytes(info.bytes)} "
            f"({human_bytes(budget.free_bytes)} free; FastVideo's cleanup runs only after the save)")
    if fit < 2:
        limit = "the next save will not fit" if fit == 0 else "fewer than two saves fit"
        return Check("room", "warn", f"{text}: {limit} ({short})")
    return Check("room", "ok", text)
