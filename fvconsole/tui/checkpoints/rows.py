"""What view 1 lists: one row per checkpoint, with its save time, loader, published set and what a prune would do.

``list_checkpoint_rows`` reads the disk (discovery, stat, receipts): a worker's job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fvconsole.core.checkpoints import CheckpointInfo, RunKind, checkpoint_run_kind, discover_checkpoints
from fvconsole.core.migration import PublishedSet, published_for
from fvconsole.core.retention import PruneRules, plan_prune, scan_output_dir
from fvconsole.core.shared import FvError, Reason
from fvconsole.tui import state


@dataclass(frozen=True)
class CheckpointRow:
    """One listed checkpoint: what discovery found, when it was saved, and its published set."""

    info: CheckpointInfo
    mtime: float | None
    published: PublishedSet | None
    published_problem: str | None = None
    #: Which loader's state a legacy checkpoint holds (None for other kinds), as `checkpoints ls` says.
    run_kind: RunKind | None = None
    #: Why a prune would keep it even when marked (empty: it may be pruned; None: not judged).
    kept_why: tuple[Reason, ...] | None = None

    @property
    def migrated(self) -> bool:
        return self.info.kind == "legacy" and self.published is not None and self.published.complete

    @property
    def sidecars(self) -> int:
        """Rank sidecars inside the checkpoint, or of the set published for it."""
        if self.info.rank_sidecars:
            return self.info.rank_sidecars
        return self.published.sidecars_present if self.published is not None else 0


def checkpoint_mtime(path: str) -> float | None:
    """When the checkpoint was saved: ``dcp/.metadata`` (written last by DCP), else the dir."""
    for candidate in (os.path.join(path, "dcp", ".metadata"), path):
        try:
            return os.stat(candidate).st_mtime
        except OSError:
            continue
    return None


def retention_verdicts(path: str) -> dict[str, tuple[Reason, ...]]:
    """Why each checkpoint of output dir ``path`` would stay if marked (``()``: it may go); {} for one checkpoint dir."""
    try:
        scan = scan_output_dir(path, now=state.now())
    except FvError:
        return {}
    plan = plan_prune(scan, PruneRules(marked=frozenset(c.step for c in scan.checkpoints)))
    verdicts: dict[str, tuple[Reason, ...]] = {k.path: k.why for k in plan.kept}
    verdicts.update((d.path, ()) for d in plan.delete if not d.leftover)
    return verdicts


def list_checkpoint_rows(path: str) -> list[CheckpointRow]:
    """Checkpoints under ``path`` with their save time, published migration and what a prune would do (blocks)."""
    rows = []
    verdicts = retention_verdicts(path)
    for info in discover_checkpoints(path):
        published, problem, kind = None, None, None
        if info.kind == "legacy":
            kind = info.run_kind or checkpoint_run_kind(info.path)
            try:
                published = published_for(info.path, info.step)
            except FvError as exc:
                problem = str(exc)
        rows.append(CheckpointRow(info, checkpoint_mtime(info.path), published, problem, kind,
                                  verdicts.get(info.path)))
    return rows
