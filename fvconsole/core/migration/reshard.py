"""Elastic resume: where every rank of a new world size starts, and which samples that skips or repeats.

FastVideo's streaming loader refuses a state saved under another topology, and a topology
change moves every shard boundary. The three modes (docs/formats.md §5, "Resharding") say
where the target ranks start; the accounting says, per mode, how many of the epoch's
samples the change reads twice or never. Both work on row-group ranges: each row group
lies in one source shard and in one target shard, so what the source consumed of it is a
prefix and what the target reads of it one interval, and their overlap is O(1) per row
group: O(row groups + ranks) in all, never per sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fvconsole.core.formats.streaming import ShardOrders
from fvconsole.core.shared.fields_json import fields_json

NEXT_EPOCH, EPOCH_START, NEAREST = "next-epoch", "epoch-start", "nearest"
#: In the order the front ends show them.
MODES = (NEXT_EPOCH, EPOCH_START, NEAREST)


@dataclass(frozen=True)
class Accounting:
    """One mode's effect on epoch e, in samples (docs/formats.md §5)."""

    consumed: int
    to_read: int
    repeated: int
    unread: int
    unread_without_change: int

    def to_json(self) -> dict:
        return fields_json(self)


@dataclass(frozen=True)
class Start:
    """Where every target rank starts under one mode: the epoch and the samples already yielded in it."""

    mode: str
    epoch: int
    yielded_samples: int


@dataclass(frozen=True)
class SourceLoader:
    """The checkpoint's loader: its topology and how far every rank got in epoch ``epoch``."""

    world_size: int
    sp_world_size: int
    epoch: int
    yielded_samples: int
    samples_per_worker: int
    #: "legacy" (computed from the step, epoch 0) or "native" (read from the checkpoint's sidecars).
    kind: str

    @property
    def groups(self) -> int:
        return self.world_size // self.sp_world_size


@dataclass(frozen=True)
class TargetLoader:
    """The new job's loader topology (from its run config)."""

    world_size: int
    sp_world_size: int
    samples_per_worker: int

    @property
    def groups(self) -> int:
        return self.world_size // self.sp_world_size


@dataclass(frozen=True)
class Reshard:
    """Every mode's start and accounting; ``mode`` is the operator's choice (None: not chosen yet)."""

    mode: str | None
    source: SourceLoader
    target: TargetLoader
    batch_size: int
    starts: tuple[Start, ...]
    modes: tuple[Accounting, ...]

    def start(self, mode: str) -> Start:
        return self.starts[MODES.index(mode)]

    def accounting(self, mode: str) -> Accounting:
        return self.modes[MODES.index(mode)]

    def choose(self, mode: str) -> Reshard:
        if mode not in MODES:
            raise ValueError(f"unknown reshard mode {mode!r}")
        return replace(self, mode=mode)

    @property
    def global_batch_before(self) -> int:
        return self.batch_size * self.source.groups

    @property
    def global_batch_after(self) -> int:
        return self.batch_size * self.target.groups

    @property
    def summary(self) -> str:
        """One line for both front ends: the topology change and where the checkpoint stopped."""
        s, t = self.source, self.target
        return (f"world size {s.world_size} -> {t.world_size}, SP size {s.sp_world_size} -> {t.sp_world_size} "
                f"({s.groups} -> {t.groups} data-parallel groups); the checkpoint stopped in epoch {s.epoch} "
                f"after {s.yielded_samples} of {s.samples_per_worker} samples per rank")

    #: The modes table's headers, in both front ends.
    HEADERS = ("mode", "starts", "consumed", "to read", "repeated", "unread", "unread before")

    def cells(self) -> list[tuple[str, ...]]:
        """The modes table's rows (the chosen one marked ``*``): where each starts, then its accounting."""
        rows = []
        for start, acc in zip(self.starts, self.modes, strict=True):
            mark = " *" if start.mode == self.mode else ""
            rows.append((start.mode + mark, f"epoch {start.epoch} @ {start.yielded_samples}", str(acc.consumed),
                         str(acc.to_read), str(acc.repeated), str(acc.unread), str(acc.unread_without_change)))
        return rows

    def to_json(self) -> dict:
        """docs/cli.md's ``reshard`` object; hand-written: its shape is the issue's, not the fields'."""
        return {
            "mode": self.mode,
            "source": {"world_size": self.source.world_size, "sp_world_size": self.source.sp_world_size,
                       "epoch": self.source.epoch, "yielded_samples_per_rank": self.source.yielded_samples},
            "target": {"world_size": self.target.world_size, "sp_world_size": self.target.sp_world_size,
                       "samples_per_worker": self.target.samples_per_worker},
            "accounting": None if self.mode is None else self.accounting(self.mode).to_json(),
            "modes": {mode: acc.to_json() for mode, acc in zip(MODES, self.modes, strict=True)},
        }


def mode_starts(source: SourceLoader, target: TargetLoader, batch_size: int) -> tuple[Start, ...]:
    """The three modes' starts (docs/formats.md §5): ``nearest`` keeps the global count of samples read."""
    e = source.epoch
    consumed = source.groups * source.yielded_samples
    nearest = consumed // (target.groups * batch_size) * batch_size
    near = Start(NEAREST, e, nearest) if nearest < target.samples_per_worker else Start(NEAREST, e + 1, 0)
    return Start(NEXT_EPOCH, e + 1, 0), Start(EPOCH_START, e, 0), near


def plan_reshard(rows: Sequence[int] | Any, source: SourceLoader, target: TargetLoader,
                 source_orders: ShardOrders, target_orders: ShardOrders, *, batch_size: int,
                 mode: str | None = None) -> Reshard:
    """Every mode's start and accounting over the manifest's row groups (``rows``: each one's row count).

    ``source_orders``, ``target_orders``: the source's and the target's shards with their orders,
    made once by the planner (the target's cursors use the same); ``mode``: the operator's choice
    (None: not chosen).
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown reshard mode {mode!r}")
    total = sum(rows)
    e = source.epoch
    taken = _consumed_prefixes(rows, source_orders(e), source.yielded_samples) if source.yielded_samples > 0 else {}
    consumed = source.groups * source.yielded_samples
    unread_without_change = total - source.groups * source.samples_per_worker
    starts = mode_starts(source, target, batch_size)
    found = []
    for start in starts:
        if start.epoch != e:  # the rest of epoch e is never read
            to_read = repeated = 0
        else:
            to_read, repeated = _read_overlap(rows, target_orders(e), taken, start.yielded_samples,
                                              target.samples_per_worker)
        found.append(Accounting(consumed, to_read, repeated, total - consumed - to_read + repeated,
                                unread_without_change))
    return Reshard(mode, source, target, batch_size, starts, tuple(found))


def _consumed_prefixes(rows: Sequence[int] | Any, orders: Sequence[Sequence[int]], yielded: int) -> dict[int, int]:
    """Per row group the source touched: how many of its first rows it yielded (a prefix: FastVideo reads in order)."""
    taken: dict[int, int] = {}
    for order in orders:
        left = yielded
        for index in order:
            n = rows[index]
            if left <= n:
                taken[index] = left
                break
            taken[index] = n
            left -= n
    return taken


def _read_overlap(rows: Sequence[int] | Any, orders: Sequence[Sequence[int]], taken: dict[int, int],
                  start: int, end: int) -> tuple[int, int]:
    """(samples the target groups read from ``start`` to ``end`` of their shards, how many of them the source read)."""
    to_read = repeated = 0
    for order in orders:
        to_read += end - start
        before = 0  # samples of the shard before this row group
        for index in order:
            if before >= end:
                break
            n = rows[index]
            lo, hi = max(start - before, 0), min(end - before, n)
            before += n
            if lo < hi:
                c = taken.get(index, 0)
                if c > lo:
                    repeated += min(c, hi) - lo
    return to_read, repeated
