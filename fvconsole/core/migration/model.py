"""The migration plan as a record: exactly what executing a migration writes, one sidecar per rank.

A module of its own, below everything that reads a plan: the planner (:mod:`.plan`) builds
it, the receipt (:mod:`.receipt`) records it and sizes the set it writes, execution
(:mod:`.write`, :mod:`.publish`) writes it, verification recomputes it. The set's files
and their sizes (:func:`.receipt.set_files`) are not a property here: they include the
receipt, which is built from the plan, so the plan would import its own recorder back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, overload

from fvconsole.core.formats import streaming, torch_zip
from fvconsole.core.formats.runconfig import Mismatch
from fvconsole.core.formats.sidecar_files import SIDECAR_VERSION, sidecar_name
from fvconsole.core.formats.streaming import RankCursor, RankCursors
from fvconsole.core.migration.request import MigrationRequest
from fvconsole.core.migration.reshard import Reshard
from fvconsole.core.shared.reasons import Reason

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.formats.column_check import ColumnCheck


@dataclass(frozen=True)
class MigrationPlan:
    """Exactly what executing the migration writes (one sidecar per rank)."""

    request: MigrationRequest
    checkpoint: str
    checkpoint_metadata_sha256: str
    config_path: str
    config_sha256: str
    manifest_path: str
    manifest_fingerprint: str
    dataset_root: str
    output_dir: str
    step: int
    world_size: int
    sp_world_size: int
    batch_size: int
    read_batch_size: int
    seed: int
    shuffle_row_groups: bool
    gradient_accumulation_steps: int
    consumed_batches_per_rank: int
    yielded_samples_per_rank: int
    samples_per_worker: int
    num_row_groups: int
    total_rows: int
    #: Every rank's cursor, held once per data-parallel group (:class:`~fvconsole.core.formats.streaming.RankCursors`).
    ranks: RankCursors = field(repr=False)
    mismatches: tuple[Mismatch, ...] = field(default=(), repr=False)
    #: The plan's warnings (in to_json() in the command line's words).
    notes: tuple[Reason, ...] = ()
    #: What was found beside the output dir when planning (staging dirs, a stale lock): shown
    #: with the preview's warnings; not in to_json(), which is the plan.
    output_dir_notes: tuple[Reason, ...] = field(default=(), repr=False)
    #: sha256 of the manifest's bytes the plan was made from (its fingerprint was checked then).
    manifest_sha256: str = ""
    #: What FastVideo's loader does at resume with the manifest's columns (None: not checked).
    columns: ColumnCheck | None = field(default=None, repr=False)
    #: The elastic resume (None: the checkpoint's own topology): every mode, the chosen one's start.
    reshard: Reshard | None = field(default=None, repr=False)
    #: A native checkpoint's reshard is a checkpoint view: (name, absolute target) of every link
    #: to the source checkpoint's other entries (empty: a sidecar dir).
    links: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def epoch(self) -> int:
        """The epoch every rank's state names: 0, or the reshard mode's."""
        return 0 if self.reshard is None or self.reshard.mode is None else self.reshard.start(self.reshard.mode).epoch

    @property
    def epoch_progress(self) -> float:
        """Fraction of the first epoch each rank has consumed."""
        return self.yielded_samples_per_rank / self.samples_per_worker if self.samples_per_worker else 0.0

    @property
    def num_sp_groups(self) -> int:
        return self.world_size // self.sp_world_size

    def cursor(self, rank: int) -> RankCursor:
        if not 0 <= rank < len(self.ranks):
            raise IndexError(f"rank {rank} outside world size {self.world_size}")
        return self.ranks[rank]

    def dataset_state(self, rank: int) -> dict:
        """docs/formats.md §5 state for ``rank`` (what FastVideo's loader would report)."""
        c = self.cursor(rank)
        return streaming.dataset_state(
            fingerprint=self.manifest_fingerprint,
            global_rank=rank,
            world_size=self.world_size,
            sp_world_size=self.sp_world_size,
            batch_size=self.batch_size,
            read_batch_size=self.read_batch_size,
            seed=self.seed,
            shuffle_row_groups=self.shuffle_row_groups,
            samples_per_worker=self.samples_per_worker,
            row_group_position=c.row_group_position,
            row_offset=c.row_offset,
            yielded_samples=c.yielded_samples,
            num_workers=1,
            epoch=self.epoch,
        )

    def sidecar_payload(self, rank: int) -> dict:
        """docs/formats.md §3 sidecar dict (state_kind "dataset"); step is the directory-name step."""
        return {
            "version": SIDECAR_VERSION,
            "rank": int(rank),
            "world_size": self.world_size,
            "step": self.step,
            "state_kind": "dataset",
            "state": self.dataset_state(rank),
        }

    @cached_property
    def encoded_sidecars(self) -> EncodedSidecars:
        """(rank, file name, payload, its torch.save bytes) for every rank: what execution writes,
        and what the dry run counts the room for (encoded once: ``--yes`` executes the plan it previewed)."""
        return EncodedSidecars(self, tuple(torch_zip.dumps(self.sidecar_payload(c.rank)) for c in self.ranks))

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "world_size": self.world_size,
            "sp_world_size": self.sp_world_size,
            "num_sp_groups": self.num_sp_groups,
            "batch_size": self.batch_size,
            "read_batch_size": self.read_batch_size,
            "seed": self.seed,
            "shuffle_row_groups": self.shuffle_row_groups,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "consumed_batches_per_rank": self.consumed_batches_per_rank,
            "yielded_samples_per_rank": self.yielded_samples_per_rank,
            "samples_per_worker": self.samples_per_worker,
            "epoch_progress": self.epoch_progress,
            "num_row_groups": self.num_row_groups,
            "total_rows": self.total_rows,
            "checkpoint": self.checkpoint,
            "checkpoint_metadata_sha256": self.checkpoint_metadata_sha256,
            "config_path": self.config_path,
            "config_sha256": self.config_sha256,
            "manifest_path": self.manifest_path,
            "manifest_fingerprint": self.manifest_fingerprint,
            "manifest_sha256": self.manifest_sha256,
            "dataset_root": self.dataset_root,
            "output_dir": self.output_dir,
            "columns": None if self.columns is None else self.columns.to_json(),
            "warnings": [n.cli for n in self.notes],
            "ranks": [c.to_json() for c in self.ranks] if self.reshard is None else
                     [dict(c.to_json(), epoch=self.epoch) for c in self.ranks],
            **({} if self.reshard is None else {"reshard": self.reshard.to_json()}),
            **({"linked_entries": [name for name, _target in self.links]} if self.links else {}),
        }


@dataclass(frozen=True, eq=False)
class EncodedSidecars(Sequence[tuple[int, str, dict, bytes]]):
    """A plan's sidecars as (rank, name, payload, bytes) in rank order; only the bytes are kept.

    The bytes are what a run writes; a payload (a few nested dicts, more memory than its
    bytes) is made again from the plan when it is asked for, so holding a set costs what
    writing it does.
    """

    plan: MigrationPlan
    data: tuple[bytes, ...]

    def __len__(self) -> int:
        return len(self.data)

    def sizes(self) -> tuple[tuple[int, str, int], ...]:
        """(rank, file name, bytes) of every sidecar: the room a set needs, no payload made again."""
        return tuple((rank, sidecar_name(rank), len(data)) for rank, data in enumerate(self.data))

    @overload
    def __getitem__(self, index: int) -> tuple[int, str, dict, bytes]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, str, dict, bytes]]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        data = self.data[index]
        rank = index + len(self) if index < 0 else index
        return rank, sidecar_name(rank), self.plan.sidecar_payload(rank), data
