"""FastVideo checkpoints: listing and inspecting them (:mod:`.listing`), what kind of run
saved one (:mod:`.kind`), the detail pane's record (:mod:`.detail`), the DCP tensor table
(:mod:`.tensors`), cached DCP metadata verdicts (:mod:`.verdicts`) and the disk a
migration needs (:mod:`.disk_budget`). Reads only; imports the shared layer and the formats.
"""

from __future__ import annotations

from fvconsole.core.checkpoints.budget import DiskBudget, disk_budget
from fvconsole.core.checkpoints.dcp_keys import dcp_state_keys
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
from fvconsole.core.checkpoints.tensors import DcpTensors, dcp_tensors

__all__ = [
    "CheckpointDetail",
    "CheckpointInfo",
    "DcpTensors",
    "DiskBudget",
    "RunKind",
    "checkpoint_detail",
    "checkpoint_run_kind",
    "checkpoint_step",
    "dcp_state_keys",
    "dcp_tensors",
    "discover_checkpoints",
    "disk_budget",
    "inspect_checkpoint",
    "latest_resumable",
    "read_metadata",
    "run_kind",
]
