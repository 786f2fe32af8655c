"""The sample id each rank reads next, for a migration preview (bounded, display only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fvconsole.core.migration import MigrationPlan
from fvconsole.core.sidecars import add_next_sample_ids

#: More distinct next row groups than this are not read for a preview (each is a Parquet read).
MAX_NEXT_ID_ROW_GROUPS = 256


@dataclass(frozen=True)
class NextSampleIds:
    """Each rank's next sample id, where it could be read."""

    ids: dict[int, Any]  # rank -> id (None: the rank has no next sample, or its row group failed)
    row_groups_read: int
    #: Distinct row groups needed when there were too many to read (None: they were read).
    too_many_row_groups: int | None = None
    limit: int = MAX_NEXT_ID_ROW_GROUPS
    problems: tuple[str, ...] = ()


def next_sample_ids(plan: MigrationPlan, max_row_groups: int = MAX_NEXT_ID_ROW_GROUPS) -> NextSampleIds:
    """Read the ``id`` of each rank's next sample: only the distinct next row groups, each once.

    The same reads as ``sidecars verify --deep`` (``add_next_sample_ids``). Beyond
    ``max_row_groups`` distinct row groups nothing is read and ``too_many_row_groups`` says so.
    """
    needed = {c.next_row_group for c in plan.ranks if c.next_row_group is not None and c.next_row_group >= 0}
    if len(needed) > max_row_groups:
        return NextSampleIds({}, 0, too_many_row_groups=len(needed), limit=max_row_groups)
    rows: list[dict] = [{"rank": c.rank} for c in plan.ranks]
    problems: list[str] = []
    add_next_sample_ids(plan, rows, problems)
    return NextSampleIds({row["rank"]: row.get("next_sample_id") for row in rows}, len(needed),
                         limit=max_row_groups, problems=tuple(problems))
