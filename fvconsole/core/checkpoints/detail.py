"""What a detail pane shows for one checkpoint: metadata keys, DCP key groups, config mismatches.

Kept apart from ``core.checkpoints.listing`` (listing) because it reads more per checkpoint and is
asked for one checkpoint at a time, when an operator selects it. Problems are collected,
never raised: an operator looks at a checkpoint precisely when something is wrong with it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fvconsole.core.checkpoints.dcp_metadata import DcpMetadata, read_dcp_metadata
from fvconsole.core.checkpoints.listing import read_metadata
from fvconsole.core.formats.runconfig import Mismatch, RunConfig, compare_configs
from fvconsole.core.shared.errors import FvError


@dataclass(frozen=True)
class CheckpointDetail:
    """Metadata, DCP key summary and the config comparison of one checkpoint."""

    path: str
    metadata_step: int | None
    metadata_keys: tuple[str, ...]
    dcp_key_groups: tuple[tuple[str, int], ...]  # (top-level key, number of entries)
    dcp_key_count: int
    #: Tensor bytes per first key component (model, optimizer, ema, ...): what a save costs.
    dcp_totals: tuple[tuple[str, int], ...]
    dcp_total_bytes: int | None  # None: the tensors could not be read
    mismatches: tuple[Mismatch, ...] | None  # None: no run config to compare with
    problems: tuple[str, ...]


def checkpoint_detail(path: str, run_config: RunConfig | None) -> CheckpointDetail:
    """Read ``metadata.json`` and ``dcp/.metadata`` of ``path`` and compare with ``run_config``."""
    problems: list[str] = []
    metadata: dict = {}
    try:
        metadata = read_metadata(path)
    except (FvError, OSError) as exc:
        problems.append(str(exc))
    dcp: DcpMetadata | None = None
    try:
        dcp = read_dcp_metadata(path)  # keys and tensors from one read
    except FvError as exc:
        problems.append(str(exc))
    mismatches = None
    embedded = metadata.get("config")
    if run_config is not None and isinstance(embedded, dict):
        mismatches = tuple(compare_configs(embedded, run_config.data, run_config.overrides))
    elif run_config is not None:
        problems.append(f"{os.path.join(path, 'metadata.json')}: field 'config' missing: "
                        "cannot compare with the run config")
    step = metadata.get("step")
    return CheckpointDetail(
        path=path,
        metadata_step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        metadata_keys=tuple(sorted(metadata)),
        dcp_key_groups=dcp.key_groups if dcp is not None else (),
        dcp_key_count=len(dcp.keys) if dcp is not None else 0,
        dcp_totals=dcp.tensors.totals if dcp is not None else (),
        dcp_total_bytes=dcp.tensors.total_bytes if dcp is not None else None,
        mismatches=mismatches,
        problems=tuple(problems),
    )
