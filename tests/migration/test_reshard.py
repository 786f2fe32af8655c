"""Elastic resume: every mode's target states and accounting against a sample-by-sample replay.

The expected values come from tests/fastvideo_reference.py (FastVideo's loader transcribed,
independent of fvconsole.core): ``elastic_state`` is where a target rank starts under a mode,
``elastic_accounting`` replays the source groups' consumed samples and the target loaders
resumed from those states, and counts repeats and unread samples one sample at a time.
"""

from __future__ import annotations

from fastvideo_reference import (
    contiguous_row_group_shards,
    elastic_accounting,
    elastic_state,
    samples_per_worker,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fvconsole.core.formats import streaming
from fvconsole.core.formats.streaming import ShardOrders, Topology, compute_cursors, shard_layout
from fvconsole.core.migration.reshard import MODES, SourceLoader, TargetLoader, plan_reshard
from fvconsole.demo.builders import synthetic_manifest

SEED = 7
READ_BATCH = 8


def core_states(manifest: dict, mode: str, *, source: dict, target_world: int, target_sp: int, batch: int,
                shuffle: bool) -> tuple[dict[int, dict], dict]:
    """The core's per-rank dataset states under ``mode`` and that mode's accounting (the code under test)."""
    rows = [g["rows"] for g in manifest["row_groups"]]
    starts = [g["sample_start"] for g in manifest["row_groups"]]
    s_topo = Topology(source["world_size"], source["sp_world_size"], batch, SEED, shuffle)
    t_topo = Topology(target_world, target_sp, batch, SEED, shuffle)
    s_shards, s_spw = shard_layout(rows, s_topo)
    t_shards, t_spw = shard_layout(rows, t_topo)
    reshard = plan_reshard(
        rows,
        SourceLoader(source["world_size"], source["sp_world_size"], source["epoch"], source["yielded_samples"],
                     s_spw, "legacy"),
        TargetLoader(target_world, target_sp, t_spw), ShardOrders(s_shards, SEED, shuffle),
        ShardOrders(t_shards, SEED, shuffle), batch_size=batch,
    ).choose(mode)
    start = reshard.start(mode)
    cursors = compute_cursors(rows, starts, t_shards, t_topo, start.yielded_samples, start.epoch)
    states = {
        c.rank: streaming.dataset_state(
            fingerprint=manifest["fingerprint"], global_rank=c.rank, world_size=target_world,
            sp_world_size=target_sp, batch_size=batch, read_batch_size=READ_BATCH, seed=SEED,
            shuffle_row_groups=shuffle, samples_per_worker=t_spw, row_group_position=c.row_group_position,
            row_offset=c.row_offset, yielded_samples=c.yielded_samples, epoch=start.epoch)
        for c in cursors
    }
    return states, reshard.to_json()


def check_case(rows: list[int], s_groups: int, s_sp: int, t_groups: int, t_sp: int, batch: int, epoch: int,
               k: int, shuffle: bool) -> bool:
    """Assert each mode's states and accounting equal the replay's; False when a layout has no epoch."""
    manifest = synthetic_manifest(len(rows), rows=rows, row_groups_per_file=3)
    s_spw = samples_per_worker(contiguous_row_group_shards(manifest["row_groups"], s_groups), batch)
    t_spw = samples_per_worker(contiguous_row_group_shards(manifest["row_groups"], t_groups), batch)
    if s_spw == 0 or t_spw == 0:
        return False
    source = {"world_size": s_groups * s_sp, "sp_world_size": s_sp, "epoch": epoch,
              "yielded_samples": k % (s_spw // batch + 1) * batch}
    t_world = t_groups * t_sp
    for mode in MODES:
        states, reshard = core_states(manifest, mode, source=source, target_world=t_world, target_sp=t_sp,
                                      batch=batch, shuffle=shuffle)
        expected = {rank: elastic_state(manifest, mode, source=source, rank=rank, target_world=t_world,
                                        target_sp=t_sp, batch_size=batch, read_batch_size=READ_BATCH, seed=SEED,
                                        shuffle_row_groups=shuffle) for rank in range(t_world)}
        assert states == expected, mode
        counted = elastic_accounting(manifest, source=source, target_states=expected, target_world=t_world,
                                     target_sp=t_sp, batch_size=batch, seed=SEED, shuffle_row_groups=shuffle)
        assert reshard["accounting"] == counted, mode
        assert reshard["modes"][mode] == counted
    return True


def test_growing_the_world_with_uneven_row_groups_and_a_drop_last_remainder() -> None:
    # 4 -> 8 DP groups over 23 uneven row groups: shards of unequal rows, samples_per_worker rounds down.
    rows = [5, 9, 3, 14, 7, 7, 2, 11, 6, 13, 4, 8, 10, 3, 12, 5, 9, 6, 7, 15, 2, 8, 11]
    assert check_case(rows, 4, 1, 8, 1, 3, 0, 2, True)


def test_shrinking_the_world_in_a_later_epoch() -> None:
    rows = [6, 10, 4, 9, 12, 3, 8, 8, 5, 11, 7, 9, 4, 6, 10, 13]
    assert check_case(rows, 8, 1, 4, 1, 2, 3, 5, True)


def test_changing_sp_size_only() -> None:
    # World 8 in both; sp 1 -> 2 halves the DP groups, sp 2 -> 4 halves them again.
    rows = [7, 12, 5, 9, 11, 6, 8, 10, 4, 13, 9, 7]
    assert check_case(rows, 8, 1, 4, 2, 2, 1, 3, False)
    assert check_case(rows, 4, 2, 2, 4, 2, 0, 4, True)


def test_a_source_that_yielded_its_whole_epoch() -> None:
    rows = [5, 8, 6, 9, 7, 10, 4, 6]
    manifest = synthetic_manifest(len(rows), rows=rows, row_groups_per_file=3)
    spw = samples_per_worker(contiguous_row_group_shards(manifest["row_groups"], 2), 2)
    # k chosen so yielded == samples_per_worker: e is still the state's epoch.
    assert check_case(rows, 2, 1, 4, 1, 2, 2, spw // 2, True)


def test_nearest_that_reaches_the_target_epoch_end_starts_the_next_epoch() -> None:
    rows = [10] * 8
    manifest = synthetic_manifest(len(rows), rows=rows, row_groups_per_file=4)
    source = {"world_size": 2, "sp_world_size": 1, "epoch": 1, "yielded_samples": 40}
    _states, reshard = core_states(manifest, "nearest", source=source, target_world=8, target_sp=1, batch=2,
                                   shuffle=True)
    # consumed 80 over 8 groups x batch 2: y' = 10 = samples_per_worker of the target -> epoch 2 from its start.
    assert reshard["accounting"] == reshard["modes"]["next-epoch"]
    assert elastic_state(manifest, "nearest", source=source, rank=3, target_world=8, target_sp=1, batch_size=2,
                         read_batch_size=READ_BATCH, seed=SEED, shuffle_row_groups=True)["epoch"] == 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.integers(1, 12), min_size=2, max_size=30),
    s_groups=st.integers(1, 6), s_sp=st.sampled_from([1, 2]),
    t_groups=st.integers(1, 6), t_sp=st.sampled_from([1, 2, 4]),
    batch=st.integers(1, 4), epoch=st.integers(0, 3), k=st.integers(0, 50), shuffle=st.booleans(),
)
def test_every_mode_matches_the_replay_sample_by_sample(rows, s_groups, s_sp, t_groups, t_sp, batch, epoch, k,
                                                        shuffle) -> None:
    check_case(rows, s_groups, s_sp, t_groups, t_sp, batch, epoch, k, shuffle)
