"""The *rng* check: for every target rank the snapshot ``load_rng_snapshot`` restores, read inertly.

FastVideo reads ``rng_state_rank<r>.pt``, else the older single ``rng_state.pt``, else skips the
restore with a warning (so none is a warning here); a file without ``cuda_rng`` or ``gen_cuda``,
which it indexes unconditionally, fails after the whole load (``core/formats/rng_files.py``).
Ranks that share a finding fold into one line; the fallback file is read once.
"""

from __future__ import annotations

import os

from fvconsole.core.formats.rng_files import LEGACY_RNG_NAME, RngSnapshot, read_snapshot, rng_name
from fvconsole.core.preflight.model import Check, Status, per_rank
from fvconsole.core.shared.errors import FvError


def check_rng(checkpoint: str, own: set[str], world: int) -> list[Check]:
    """Every target rank's RNG restore, folded into lines."""
    findings: dict[tuple[Status, str, str | None], list[int]] = {}
    fallback: RngSnapshot | FvError | None = None
    for rank in range(world):
        name = rng_name(rank)
        if name in own:
            shown = f"{checkpoint}/rng_state_rank<r>.pt"
            try:
                snapshot: RngSnapshot | FvError = read_snapshot(os.path.join(checkpoint, name))
            except FvError as exc:
                snapshot = exc
        elif LEGACY_RNG_NAME in own:
            shown = f"{checkpoint}/{LEGACY_RNG_NAME} (no rng_state_rank<r>.pt: the older single file)"
            if fallback is None:
                try:
                    fallback = read_snapshot(os.path.join(checkpoint, LEGACY_RNG_NAME))
                except FvError as exc:
                    fallback = exc
            snapshot = fallback
        else:
            key: tuple[Status, str, str | None] = (
                "warn", f"no rng_state_rank<r>.pt and no {LEGACY_RNG_NAME} in {checkpoint}: FastVideo skips the "
                "RNG restore (the run continues with fresh random streams)", None)
            findings.setdefault(key, []).append(rank)
            continue
        if isinstance(snapshot, FvError):
            key = ("fail", str(snapshot), None)
        elif snapshot.problem is not None:
            key = ("fail", f"{shown} {snapshot.problem}", None)
        else:
            key = ("ok", f"{shown} holds {', '.join(snapshot.keys)}", None)
        findings.setdefault(key, []).append(rank)
    return per_rank("rng", findings)
