"""Legacy checkpoint migration: plan → preview → execute → result, and verify.

The modules, in the order a migration uses them:

- :mod:`.sources`: the preview's reading stage (reads, never writes): every file the plan
  needs, read once into one record, with what reading refused (:mod:`.inputs` reads and
  checks the run config and the checkpoint for it); :mod:`.plan`: the planner, the preview
  from the request (:mod:`.request`) and that record alone; the plan it builds is a record
  of :mod:`.model`.
- :mod:`.output_dir`: every rule about the output dir (the preview uses them, execution
  re-checks them), its lock and the staging dirs beside it.
- :mod:`.write`: execution (staging, lock, atomic writes); :mod:`.publish` (the rename or
  swap and the read-back); :mod:`.receipt` (the commit marker, and the set's files with their
  sizes); file names and reading a sidecar back are :mod:`fvconsole.core.formats.sidecar_files`.
- :mod:`.verify`: a written set against the plan recomputed from the sources;
  :mod:`.sample_ids` (each rank's next sample id, for ``verify --deep`` and the console).
- :mod:`.faults`: the test-only fault hook (kill or pause at a file-system step).

The cursor arithmetic itself is :mod:`fvconsole.core.formats.streaming`.
"""

from __future__ import annotations

from fvconsole.core.formats.column_check import ColumnCheck
from fvconsole.core.migration.defaults import MigrationDefaults, config_output_dir, migration_defaults
from fvconsole.core.migration.failure import MigrationFailed, MigrationFailure
from fvconsole.core.migration.locked import MigrationOperation, execute_migration
from fvconsole.core.migration.model import MigrationPlan
from fvconsole.core.migration.plan import MigrationPreview, plan_migration, preview_migration
from fvconsole.core.migration.published import (
    PublishedSet,
    defaults_from_published,
    latest,
    published_for,
)
from fvconsole.core.migration.request import MigrationRequest, Refusal
from fvconsole.core.migration.reshard import MODES as RESHARD_MODES
from fvconsole.core.migration.reshard import Reshard
from fvconsole.core.migration.sample_ids import NextSampleIds, next_sample_ids
from fvconsole.core.migration.sources import Sources, read_sources
from fvconsole.core.migration.verify import VerifyResult, verify_sidecars
from fvconsole.core.migration.write import MigrationResult, completed

__all__ = [
    "ColumnCheck",
    "MigrationOperation",
    "execute_migration",
    "MigrationDefaults",
    "MigrationFailed",
    "MigrationFailure",
    "MigrationPlan",
    "MigrationPreview",
    "MigrationRequest",
    "MigrationResult",
    "completed",
    "NextSampleIds",
    "PublishedSet",
    "RESHARD_MODES",
    "Refusal",
    "Reshard",
    "Sources",
    "VerifyResult",
    "config_output_dir",
    "defaults_from_published",
    "latest",
    "migration_defaults",
    "next_sample_ids",
    "plan_migration",
    "preview_migration",
    "published_for",
    "read_sources",
    "verify_sidecars",
]
