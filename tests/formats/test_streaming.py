"""The plan's cursors equal a sample-by-sample replay of FastVideo's streaming loader.

The oracle is tests/fastvideo_reference.py (written from FastVideo's semantics, independent
of fvconsole.core.formats.streaming): ``_contiguous_row_group_shards``, the loader's ``__iter__`` loop
(per row group, per sample, ``_row_offset = offset + 1``, yield when a batch is full) and the
upstream per-rank ``reconstruct_streaming_dataset_state``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from fastvideo_reference import (
    contiguous_row_group_shards,
    reconstruct_streaming_dataset_state,
    replay_loader,
    resume_first_sample,
    samples_per_worker,
    worker_shard,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fvconsole.core.formats import streaming
from fvconsole.core.formats.streaming import Topology, compute_cursors, shard_layout
from fvconsole.core.migration.plan import MigrationPlan, MigrationRequest
from fvconsole.demo.builders import synthetic_manifest

# --------------------------------------------------------------------------- checking one topology


def _plan(manifest: dict, topo: Topology, yielded: int) -> MigrationPlan:
    rows = [g["rows"] for g in manifest["row_groups"]]
    starts = [g["sample_start"] for g in manifest["row_groups"]]
    shards, spw = shard_layout(rows, topo)
    cursors = compute_cursors(rows, starts, shards, topo, yielded)
    req = MigrationRequest("c.yaml", "/x/checkpoint-1", "/out", 1, topo.world_size, yielded // topo.batch_size)
    return MigrationPlan(
        request=req, checkpoint="/x/checkpoint-1", checkpoint_metadata_sha256="0" * 64, config_path="c.yaml",
        config_sha256="0" * 64, manifest_path="/m.json", manifest_fingerprint=manifest["fingerprint"],
        dataset_root=manifest["dataset_root"], output_dir="/out", step=1, world_size=topo.world_size,
        sp_world_size=topo.sp_world_size, batch_size=topo.batch_size, read_batch_size=8, seed=topo.seed,
        shuffle_row_groups=topo.shuffle, gradient_accumulation_steps=1,
        consumed_batches_per_rank=yielded // topo.batch_size, yielded_samples_per_rank=yielded,
        samples_per_worker=spw, num_row_groups=len(rows), total_rows=sum(rows), ranks=cursors,
    )


def check_topology(rows: list[int], sp: int, groups: int, batch: int, seed: int, shuffle: bool, k: int) -> bool:
    """Assert every rank's planned state matches the loader replay; False if the case is degenerate."""
    manifest = synthetic_manifest(len(rows), rows=rows, row_groups_per_file=3)
    world = sp * groups
    ref = contiguous_row_group_shards(manifest["row_groups"], groups)
    spw = samples_per_worker(ref, batch)
    if spw == 0:
        return False
    yielded = (k % (spw // batch)) * batch
    topo = Topology(world, sp, batch, seed, shuffle)
    plan = _plan(manifest, topo, yielded)
    assert plan.samples_per_worker == spw
    assert len(plan.ranks) == world
    for rank in range(world):
        cursor = plan.ranks[rank]
        assert cursor.rank == rank and cursor.sp_group_index == rank // sp
        shard = worker_shard(ref, rank // sp, seed=seed, shuffle=shuffle)
        position, offset, next_sample = replay_loader(shard, batch, yielded)
        assert (cursor.row_group_position, cursor.row_offset) == (position, offset), (rank, yielded)
        assert cursor.next_sample_index == next_sample
        assert resume_first_sample(shard, position, offset) == next_sample
        expected = reconstruct_streaming_dataset_state(
            manifest, global_rank=rank, world_size=world, sp_world_size=sp, batch_size=batch, read_batch_size=8,
            seed=seed, shuffle_row_groups=shuffle, yielded_samples=yielded)
        assert plan.dataset_state(rank) == expected
        payload: Any = plan.sidecar_payload(rank)
        assert payload["state"] == expected and payload["rank"] == rank and payload["state_kind"] == "dataset"
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.integers(min_value=1, max_value=17), min_size=1, max_size=40),
    sp=st.integers(min_value=1, max_value=4),
    groups=st.integers(min_value=1, max_value=7),
    batch=st.integers(min_value=1, max_value=5),
    seed=st.integers(min_value=-(2**31), max_value=2**31),
    shuffle=st.booleans(),
    k=st.integers(min_value=0, max_value=10_000),
)
def test_plan_matches_loader_replay_hypothesis(rows, sp, groups, batch, seed, shuffle, k) -> None:
    check_topology(rows, sp, groups, batch, seed, shuffle, k)


def test_plan_matches_loader_replay_seeded_loop() -> None:
    rng = random.Random(20260101)
    checked = 0
    for _ in range(300):
        rows = [rng.choice((1, 2, 3, 5, 8, 13, 64)) for _ in range(rng.randint(1, 60))]
        sp = rng.choice((1, 1, 2, 4, 8))
        groups = rng.randint(1, 12)
        batch = rng.randint(1, 6)
        checked += check_topology(rows, sp, groups, batch, rng.randrange(10**6), rng.random() < 0.7,
                                  rng.randrange(10**6))
    assert checked > 150  # most random cases are non-degenerate


def test_batch_ending_exactly_at_row_group_end_points_to_next_group() -> None:
    # One group (sp=1, world=1), rows [4, 4, 4], batch 2: after 4 samples the first group is used up.
    assert check_topology([4, 4, 4], 1, 1, 2, 0, False, 2)
    plan = _plan(synthetic_manifest(3, rows=[4, 4, 4]), Topology(1, 1, 2, 0, False), 4)
    c = plan.ranks[0]
    assert (c.row_group_position, c.row_offset, c.next_row_group, c.next_sample_index) == (0, 4, 1, 4)


def test_contiguous_shards_match_reference_on_edge_cases() -> None:
    cases = [([5], 3), ([1, 1], 4), ([100, 1, 1, 1], 2), ([1, 1, 1, 100], 2), ([3] * 10, 10), ([7, 1, 7, 1, 7], 3)]
    for rows, shards in cases:
        manifest = synthetic_manifest(len(rows), rows=rows)
        ref = contiguous_row_group_shards(manifest["row_groups"], shards)
        ours = streaming.contiguous_shards(rows, shards)
        assert [[g["sample_start"] for g in s] for s in ref] == [
            [manifest["row_groups"][i]["sample_start"] for i in s] for s in ours
        ]


def test_plan_scales_to_many_ranks_and_row_groups() -> None:
    manifest = synthetic_manifest(200_000, seed=3)
    rows = [g["rows"] for g in manifest["row_groups"]]
    starts = [g["sample_start"] for g in manifest["row_groups"]]
    topo = Topology(4096, 2, 4, 7, True)
    shards, spw = shard_layout(rows, topo)
    cursors = compute_cursors(rows, starts, shards, topo, spw - 4)
    assert len(cursors) == 4096
    # Spot-check a few ranks against the reference reconstruction.
    for rank in (0, 1, 2047, 4095):
        state = reconstruct_streaming_dataset_state(
            manifest, global_rank=rank, world_size=4096, sp_world_size=2, batch_size=4, read_batch_size=8, seed=7,
            shuffle_row_groups=True, yielded_samples=spw - 4)
        assert (cursors[rank].row_group_position, cursors[rank].row_offset) == (
            state["row_group_position"], state["row_offset"])


@pytest.mark.parametrize("yielded", [0, 2])
def test_zero_and_small_yield(yielded: int) -> None:
    assert check_topology([3, 3, 3, 3], 2, 2, 2, 5, True, yielded // 2)
