"""Why a checkpoint is not complete, typed: what a caller decides by, never a message's words.

A listing words each problem for people (``CheckpointInfo.problems``), and a message may be
reworded. What a caller decides — the reason a prune gives for deleting an interrupted save, the
warning a migration gives, the reason preflight names — is read from a :class:`Gap`'s kind
(``CheckpointInfo.gaps``), so no rewording can change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

#: What every missing piece of a save says (``dcp.save`` writes ``.metadata`` last, RNG files per rank).
INTERRUPTED = " (interrupted save)"


class GapKind(Enum):
    """One way a checkpoint falls short of complete (docs/formats.md §1)."""

    NO_DCP = "no_dcp"  # no dcp/ directory
    DCP_METADATA_MISSING = "dcp_metadata_missing"  # no dcp/.metadata: the save was cut off before its last write
    DCP_METADATA_UNREADABLE = "dcp_metadata_unreadable"  # something is there, not a regular file dcp.load can open
    RNG_MISSING = "rng_missing"  # fewer rng_state_rank<r>.pt files than the embedded world size
    UNREADABLE = "unreadable"  # this process cannot search the checkpoint dir or its dcp/


@dataclass(frozen=True)
class Gap:
    """One reason a checkpoint is not complete: its kind, and its problem line (also in ``problems``)."""

    kind: GapKind
    text: str

    @property
    def summary(self) -> str:
        """The line without its "(interrupted save)", for a reason that says that already (a prune's)."""
        return self.text.removesuffix(INTERRUPTED)
