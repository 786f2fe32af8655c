"""FastVideo's streaming-loader cursor arithmetic (docs/formats.md §5), computed once per plan.

The upstream migration recomputes the shard split for every rank (O(ranks × row groups)).
Here the split, the per-shard shuffle and the walk are done once per data-parallel group
(:func:`shard_layout`, :func:`compute_cursors`), and ranks of one SP group share the
result: O(row groups + ranks) in all.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from fvconsole.core.shared.fields_json import fields_json

STATE_VERSION = 2
#: The most ranks a plan is made for (docs/cli.md): a sidecar per rank is encoded, sized and
#: written, so a plan costs time and memory per rank; 16x the largest run fvconsole was measured on.
MAX_WORLD_SIZE = 65_536


def contiguous_shards(rows: Sequence[int], num_shards: int) -> list[range]:
    """Split row groups (given by their row counts, in manifest order) into contiguous shards.

    Mirrors FastVideo's greedy ``_contiguous_row_group_shards`` exactly, including its
    quirks: a shard stops before a row group that would overshoot the target only while
    at least ``shards_left - 1`` row groups remain, and once row groups run out the
    remaining shards stay empty. Returns one ``range`` of row-group indices per shard.
    """
    if num_shards < 1:
        raise ValueError("num_shards must be positive")
    total = len(rows)
    remaining_rows = sum(rows)
    shards: list[range] = []
    cursor = 0
    for shard_index in range(num_shards):
        shards_left = num_shards - shard_index
        target = remaining_rows / shards_left
        start = cursor
        shard_rows = 0
        while cursor < total:
            item_rows = rows[cursor]
            if shard_rows and shard_rows + item_rows > target and total - cursor >= shards_left - 1:
                break
            shard_rows += item_rows
            remaining_rows -= item_rows
            cursor += 1
        shards.append(range(start, cursor))
        if cursor >= total:
            break
    while len(shards) < num_shards:
        shards.append(range(total, total))
    return shards


def shard_order(shard: range, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """The order in which a worker reads its shard's row groups (indices into the manifest)."""
    order = list(shard)
    if shuffle:
        random.Random(seed + epoch).shuffle(order)
    return order


class ShardOrders:
    """Every shard's reading order in an epoch (:func:`shard_order`), shuffled once and handed on.

    A plan needs the same orders in several places (a reshard's accounting and the target's
    cursors; a native checkpoint's check and what its ranks consumed); a shuffle of a million
    row groups costs about a third of a second, so each epoch's orders are made once.
    """

    __slots__ = ("_made", "seed", "shards", "shuffle")

    def __init__(self, shards: Sequence[range], seed: int, shuffle: bool) -> None:
        self.shards, self.seed, self.shuffle = shards, seed, shuffle
        self._made: dict[int, tuple[list[int], ...]] = {}

    def __call__(self, epoch: int) -> tuple[list[int], ...]:
        """One order per shard, in ``epoch``."""
        made = self._made.get(epoch)
        if made is None:
            made = self._made[epoch] = tuple(shard_order(shard, self.seed, epoch, self.shuffle)
                                             for shard in self.shards)
        return made


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where one shard's reader stands after ``yielded`` samples of an epoch."""

    row_group_position: int
    row_offset: int
    #: Manifest index of the row group holding the next sample, and that sample's offset in it.
    next_row_group: int
    next_row_offset: int


def walk(order: Sequence[int], rows: Sequence[int], yielded: int) -> Cursor:
    """Walk a shard's (shuffled) row groups, consuming ``yielded`` samples.

    Follows FastVideo's rule: the first row group where the remainder is ≤ its rows gives
    the position and the offset (which may equal the group's rows; the next sample is then
    the first of the following group).
    """
    if not order:
        raise ValueError("empty shard")
    if yielded == 0:
        return Cursor(0, 0, order[0], 0)
    remaining = yielded
    for position, index in enumerate(order):
        n = rows[index]
        if remaining <= n:
            if remaining < n:
                return Cursor(position, remaining, index, remaining)
            if position + 1 < len(order):
                return Cursor(position, remaining, order[position + 1], 0)
            return Cursor(position, remaining, -1, 0)
        remaining -= n
    raise ValueError("yielded samples exceed the shard")


def samples_per_worker(shard_rows: Sequence[int], batch_size: int) -> int:
    """Smallest shard's rows rounded down to a batch multiple (0: dataset too small)."""
    return min(shard_rows) // batch_size * batch_size


def dataset_state(
    *,
    fingerprint: str,
    global_rank: int,
    world_size: int,
    sp_world_size: int,
    batch_size: int,
    read_batch_size: int,
    seed: int,
    shuffle_row_groups: bool,
    samples_per_worker: int,
    row_group_position: int,
    row_offset: int,
    yielded_samples: int,
    num_workers: int = 1,
    epoch: int = 0,
) -> dict:
    """The streaming dataset state dict FastVideo's loader reports (docs/formats.md §5)."""
    return {
        "version": STATE_VERSION,
        "manifest_fingerprint": str(fingerprint),
        "topology": {
            "global_rank": int(global_rank),
            "world_size": int(world_size),
            "sp_world_size": int(sp_world_size),
            "sp_group_index": int(global_rank) // int(sp_world_size),
            "num_workers": max(int(num_workers), 1),
            "batch_size": int(batch_size),
            "read_batch_size": int(read_batch_size),
            "seed": int(seed),
            "shuffle_row_groups": bool(shuffle_row_groups),
            "samples_per_worker": int(samples_per_worker),
        },
        "worker_id": 0,
        "epoch": int(epoch),
        "row_group_position": int(row_group_position),
        "row_offset": int(row_offset),
        "yielded_samples": int(yielded_samples),
    }


# --------------------------------------------------------------------------- per-rank cursors


@dataclass(frozen=True)
class Topology:
    """The layout parameters the cursor arithmetic needs (all validated)."""

    world_size: int
    sp_world_size: int
    batch_size: int
    seed: int
    shuffle: bool


@dataclass(frozen=True)
class RankCursor:
    """Where one rank's loader stands after the checkpoint's step."""

    rank: int
    sp_group_index: int
    row_group_position: int
    row_offset: int
    yielded_samples: int
    next_sample_index: int
    next_row_group: int  # manifest index, -1 if none

    def to_json(self) -> dict:
        return fields_json(self)

    def cells(self) -> tuple[str, ...]:
        """Its row of the per-rank table, in both front ends (``-``: no next row group)."""
        return (str(self.rank), str(self.sp_group_index), str(self.row_group_position), str(self.row_offset),
                str(self.yielded_samples), str(self.next_sample_index),
                str(self.next_row_group) if self.next_row_group >= 0 else "-")


def shard_layout(rows: Sequence[int] | Any, topo: Topology) -> tuple[list[range], int]:
    """(one contiguous shard per SP group, samples_per_worker) — computed once per plan."""
    groups = topo.world_size // topo.sp_world_size
    shards = contiguous_shards(rows, groups)
    shard_rows = [sum(rows[i] for i in shard) for shard in shards]
    return shards, samples_per_worker(shard_rows, topo.batch_size)


@dataclass(frozen=True, slots=True)
class RankCursors(Sequence[RankCursor]):
    """Every rank's cursor, kept once per data-parallel group: the ranks of one SP group share it.

    A plan of W ranks in G groups holds G cursors (O(groups), whatever W is); a rank's
    :class:`RankCursor` is made when it is asked for.
    """

    #: One cursor per data-parallel group: the cursor of the group's first rank.
    groups: tuple[RankCursor, ...]
    sp_world_size: int

    def __len__(self) -> int:
        return len(self.groups) * self.sp_world_size

    @overload
    def __getitem__(self, index: int) -> RankCursor: ...

    @overload
    def __getitem__(self, index: slice) -> list[RankCursor]: ...

    def __getitem__(self, index: int | slice) -> RankCursor | list[RankCursor]:
        if isinstance(index, slice):
            return [self._rank(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"rank {index} outside world size {len(self)}")
        return self._rank(index)

    def __iter__(self) -> Iterator[RankCursor]:
        for c in self.groups:
            for rank in range(c.rank, c.rank + self.sp_world_size):
                yield RankCursor(rank, c.sp_group_index, c.row_group_position, c.row_offset, c.yielded_samples,
                                 c.next_sample_index, c.next_row_group)

    def _rank(self, rank: int) -> RankCursor:
        c = self.groups[rank // self.sp_world_size]
        return RankCursor(rank, c.sp_group_index, c.row_group_position, c.row_offset, c.yielded_samples,
                          c.next_sample_index, c.next_row_group)


def compute_cursors(
    rows: Any, sample_starts: Any, shards: list[range], topo: Topology, yielded: int, epoch: int = 0,
    orders: ShardOrders | None = None,
) -> RankCursors:
    """One shuffle and one walk per SP group; ranks of a group share the cursor (``yielded`` samples into ``epoch``).

    ``orders``: the shards' orders when the caller already made them (:class:`ShardOrders`).
    """
    sp = topo.sp_world_size
    groups: list[RankCursor] = []
    made = (orders or ShardOrders(shards, topo.seed, topo.shuffle))(epoch)
    for group, order in enumerate(made):
        c = walk(order, rows, yielded)
        nxt = -1 if c.next_row_group < 0 else sample_starts[c.next_row_group] + c.next_row_offset
        groups.append(RankCursor(group * sp, group, c.row_group_position, c.row_offset, yielded, nxt,
                                 c.next_row_group))
    return RankCursors(tuple(groups), sp)
