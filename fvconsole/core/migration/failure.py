"""Where a migration stopped and what it left behind, as one typed value.

Why typed: the report travels from execution to the ``--json`` output, the journal line
and the console's error screen; as a dict its ``output_dir_changed`` was read in eight
places, each trusting its spelling. :class:`MigrationFailure` is that report, and
:class:`MigrationFailed` the exit-3 error that carries it (its ``report`` is the JSON).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fvconsole.core.shared.errors import PartialFailure

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.shared.reasons import Reason

#: The scalars of a failure a failed migration's journal line keeps.
JOURNALED = ("stage", "output_dir_changed", "sidecars_written", "sidecars_total", "previous_set", "new_set",
             "lock_taken_over")


@dataclass(frozen=True)
class MigrationFailure:
    """Where an execution stopped (``stage``), whether the output dir was changed, what is left.

    Unchanged output dir: how many sidecars were staged and whether the staging dir was
    removed. Changed (publishing had begun): where the previous set and the new one are.
    """

    stage: str
    output_dir: str
    output_dir_changed: bool
    sidecars_written: int | None = None
    sidecars_total: int | None = None
    staging_dir: str | None = None
    staging_removed: bool | None = None
    previous_set: str | None = None
    new_set: str | None = None
    problems: tuple[str, ...] = ()
    #: The lock of a dead holder this run took over before it failed (journaled).
    lock_taken_over: str | None = None

    @classmethod
    def unchanged(cls, out: str, stage: str, staging: str | None, removed: bool, written: int,
                  total: int) -> MigrationFailure:
        """Stopped before the output dir was touched (the staging dir removed, or left)."""
        return cls(stage, out, False, sidecars_written=written, sidecars_total=total, staging_dir=staging,
                   staging_removed=removed)

    @classmethod
    def published(cls, out: str, sidecars: int) -> MigrationFailure:
        """Stopped once the whole set was published and verified."""
        return cls("published", out, True, sidecars_written=sidecars, sidecars_total=sidecars)

    def to_json(self) -> dict[str, Any]:
        """The fields that say something for this kind of stop (the JSON as before it was typed)."""
        doc: dict[str, Any] = {"stage": self.stage, "output_dir": self.output_dir,
                               "output_dir_changed": self.output_dir_changed}
        if self.sidecars_written is not None:
            doc.update(sidecars_written=self.sidecars_written, sidecars_total=self.sidecars_total)
        if not self.output_dir_changed:
            doc.update(staging_dir=self.staging_dir, staging_removed=self.staging_removed)
        elif self.sidecars_written is None:  # publishing failed: where the previous set is
            doc["previous_set"] = self.previous_set
        if self.new_set is not None:
            doc["new_set"] = self.new_set
        if self.problems:
            doc["problems"] = list(self.problems)
        if self.lock_taken_over is not None:
            doc["lock_taken_over"] = self.lock_taken_over
        return doc

    def journaled(self) -> dict[str, Any]:
        """The scalars a journal line keeps (:data:`JOURNALED`)."""
        return {k: v for k, v in self.to_json().items() if k in JOURNALED}


class MigrationFailed(PartialFailure):
    """A migration that failed part-way (exit 3); ``failure`` says where, ``report`` is its JSON."""

    kind = "migration_failed"

    def __init__(self, message: str, *, failure: MigrationFailure, reason: Reason | None = None) -> None:
        super().__init__(message, report=failure.to_json(), reason=reason)
        self.failure = failure

    def after_taking_over(self, notes: str) -> MigrationFailed:
        """The same failure of a run that had taken over a dead holder's lock (``notes``) before it failed."""
        return MigrationFailed(self.message, failure=replace(self.failure, lock_taken_over=notes), reason=self.reason)
