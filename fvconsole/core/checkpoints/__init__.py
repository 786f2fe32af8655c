"""FastVideo checkpoints: listing and inspecting them (:mod:`.listing`), what kind of run
saved one (:mod:`.kind`), the detail pane's record (:mod:`.detail`), the one reader of
``dcp/.metadata`` (:mod:`.dcp_metadata`) and what is read from it (tensors: :mod:`.tensors`;
storage files: :mod:`.storage`), cached DCP metadata verdicts (:mod:`.verdicts`) and the disk a
migration needs (:mod:`.budget`). Reads only; imports the shared layer and the formats.
"""

from __future__ import annotations

from fvconsole.core.checkpoints.budget import DiskBudget, disk_budget
from fvconsole.core.checkpoints.dcp_metadata import DcpMetadata, read_dcp_metadata
from fvconsole.core.checkpoints.detail import CheckpointDetail, checkpoint_detail
from fvconsole.core.checkpoints.kind import RunKind, run_kind
from fvconsole.core.checkpoints.listing import (
    CheckpointInfo,
    checkpoint_run_kind,
    checkpoint_step,
    discover_checkpoints,
    inspect_checkpoint,
    latest_resumable,
    read_metadata,
)
from fvconsole.core.checkpoints.tensors import DcpTensors

__all__ = [
    "CheckpointDetail",
    "CheckpointInfo",
    "DcpMetadata",
    "DcpTensors",
    "DiskBudget",
    "RunKind",
    "checkpoint_detail",
    "checkpoint_run_kind",
    "checkpoint_step",
    "discover_checkpoints",
    "disk_budget",
    "inspect_checkpoint",
    "latest_resumable",
    "read_dcp_metadata",
    "read_metadata",
    "run_kind",
]
