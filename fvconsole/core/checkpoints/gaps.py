"""Why a checkpoint is not complete, typed: what a caller decides by, never a message's words.

A listing words each problem for people (``CheckpointInfo.problems``), and a message may be
reworded. What a caller decides — the reason a prune gives for deleting an interrupted save, the
warning a migration gives, the reason preflight names — is read from a :class:`Gap`'s kind
(``CheckpointInfo.gaps``), so no rewording can change it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


#: Each kind in a few words: the one vocabulary a line naming a checkpoint's gaps by kind uses
#: (``checkpoints show``'s and the console's "complete NO (...)"; ``checkpoints prune --help`` says the same;
#: a prune's reasons and ``checkpoints ls``'s warning through :func:`gap_brief`).
WORDS: Mapping[GapKind, str] = {
    GapKind.NO_DCP: "no dcp/ directory",
    GapKind.DCP_METADATA_MISSING: "dcp/.metadata missing",
    GapKind.DCP_METADATA_UNREADABLE: "dcp/.metadata not a readable regular file",
    GapKind.RNG_MISSING: "an rng_state_rank<r>.pt missing",
    GapKind.UNREADABLE: "the checkpoint cannot be read",
}

#: The kinds FastVideo's save order explains as a save cut off: ``dcp.save`` writes ``.metadata`` last,
#: the RNG files come after it. A FIFO or a directory there, or no ``dcp/`` at all, is not what a cut-off
#: save leaves, so it is not called one.
CUT_OFF = frozenset({GapKind.DCP_METADATA_MISSING, GapKind.RNG_MISSING})


def _worded(gaps: Iterable[Gap], cut_off: str) -> str:
    """Each kind not a cut-off save's in its WORDS, then the cut-off save's kinds as ``cut_off`` words them."""
    kinds = list(dict.fromkeys(g.kind for g in gaps))
    cut = [WORDS[k] for k in kinds if k in CUT_OFF]
    parts = [WORDS[k] for k in kinds if k not in CUT_OFF] + ([cut_off.format(", ".join(cut))] if cut else [])
    return "; ".join(parts) or "incomplete"


def gap_words(gaps: Iterable[Gap]) -> str:
    """Which gaps, worded from their kinds: ``interrupted save: dcp/.metadata missing, an rng_state_rank<r>.pt
    missing`` for a cut-off save's, each other kind on its own (``dcp/.metadata not a readable regular file``)."""
    return _worded(gaps, "interrupted save: {}")


def gap_brief(gaps: Iterable[Gap]) -> str:
    """:func:`gap_words` without the cut-off save's list: ``interrupted save`` for it, each other kind on its
    own (``no dcp/ directory``): what a line that names the gap's file elsewhere opens with (a prune's reason,
    ``checkpoints ls``'s warning on the checkpoint ``latest`` picks)."""
    return _worded(gaps, "interrupted save")
