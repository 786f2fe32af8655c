"""A FastVideo-native checkpoint's loader state: its rank-local sidecars, read inertly and checked.

FastVideo's ``CheckpointManager.save`` writes ``dataloader_state_rank<r>.pt`` per rank
(docs/formats.md §3): state_kind ``dataloader`` (torchdata's StatefulDataLoader state, which
holds the dataset's: at the top level without workers, under ``_snapshot`` with one) or
``dataset``. A reshard starts from it, so every rank's file must say what FastVideo's loader
would have said on the source topology: the same epoch and count on every rank, and the
cursor the manifest gives for that count. Read with the torch-free reader (no code runs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from fvconsole.core.formats import streaming, torch_zip
from fvconsole.core.formats.sidecar_files import (
    MAX_SIDECAR_INT,
    SIDECAR_VERSION,
    decode_sidecar,
    read_sidecar_bytes,
    sidecar_name,
)
from fvconsole.core.formats.streaming import ShardOrders
from fvconsole.core.formats.streaming import walk as cursor_after
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import plural

FIELD = "checkpoint.dataloader_state"


def dataset_state_of(state_kind: Any, state: Any) -> Any:
    """The streaming dataset state inside a sidecar's ``state`` (None: none where FastVideo keeps it)."""
    if state_kind == "dataset":
        return state
    if state_kind != "dataloader" or not isinstance(state, Mapping):
        return None
    if "dataset_state" in state:  # torchdata 0.11, no workers: the single-process iterator's own keys
        return state["dataset_state"]
    worker = _get(state, "_snapshot", "_worker_snapshots", "worker_0")
    return worker.get("dataset_state") if isinstance(worker, Mapping) else None


def _get(node: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_source_states(checkpoint: str, *, step: int, world_size: int, sp_world_size: int,
                       topology: Mapping[str, Any], fingerprint: str, rows: Sequence[int] | Any,
                       orders: ShardOrders, batch_size: int) -> tuple[int, int] | str:
    """(epoch, yielded samples per rank) every source rank's sidecar agrees on, or the first problem found.

    ``topology``: the source loader's topology less ``global_rank``/``sp_group_index`` (the
    live one FastVideo compares with). Every rank must name that topology, the manifest's
    fingerprint, worker 0, one epoch and one count (a batch multiple, at most the epoch's
    length), and the cursor the walk of its shard gives for that count (``orders``: the source
    shards' orders, made once for the planner).
    """
    agreed: tuple[int, int] | None = None
    walked: dict[tuple[int, int, int], tuple[int, int]] = {}
    spw = int(topology["samples_per_worker"])
    for rank in range(world_size):
        name = sidecar_name(rank)
        path = os.path.join(checkpoint, name)
        try:
            payload = decode_sidecar(read_sidecar_bytes(path))
        except FileNotFoundError:
            return f"{path}: missing (the checkpoint's world size is {world_size})"
        except OSError as exc:
            return f"{path}: cannot read ({exc.strerror or exc})"
        except (FvError, torch_zip.TorchFileError) as exc:
            return f"{path}: refused ({str(exc).removeprefix(path + ': ')})"
        if not isinstance(payload, Mapping):
            return f"{path}: not a dict"
        for key, want in (("version", SIDECAR_VERSION), ("rank", rank), ("world_size", world_size), ("step", step)):
            if payload.get(key) != want or isinstance(payload.get(key), bool):
                return f"{path}: field '{key}' is {payload.get(key)!r}, expected {want!r}"
        state = dataset_state_of(payload.get("state_kind"), payload.get("state"))
        if not isinstance(state, Mapping):
            return (f"{path}: no streaming dataset state (state_kind {payload.get('state_kind')!r}; "
                    "expected 'dataloader' holding 'dataset_state', or 'dataset')")
        if state.get("version") != streaming.STATE_VERSION:
            return f"{path}: field 'state.version' is {state.get('version')!r}, expected {streaming.STATE_VERSION}"
        if state.get("manifest_fingerprint") != fingerprint:
            return f"{path}: field 'state.manifest_fingerprint' is not the manifest's ({fingerprint[:12]})"
        want_topology = dict(topology, global_rank=rank, sp_group_index=rank // sp_world_size)
        if state.get("topology") != want_topology:
            return (f"{path}: field 'state.topology' is not the source loader's "
                    f"(world size {world_size}, sp size {sp_world_size}, samples_per_worker {spw})")
        if state.get("worker_id") != 0:
            return f"{path}: field 'state.worker_id' is {state.get('worker_id')!r}, expected 0"
        values = [state.get(key) for key in ("epoch", "yielded_samples", "row_group_position", "row_offset")]
        if not all(_whole(v) for v in values):
            return f"{path}: epoch, yielded_samples, row_group_position and row_offset must be whole numbers"
        epoch, yielded, position, offset = values
        if epoch >= MAX_SIDECAR_INT:  # the next epoch, where a reshard may start, must fit a sidecar too
            return f"{path}: field 'state.epoch' is {epoch}: a reshard could not write the epoch after it"
        if agreed is None:
            if yielded > spw:
                return (f"{path}: field 'state.yielded_samples' is {yielded}: {yielded} exceeds the {spw} samples "
                        f"of an epoch (samples_per_worker; FastVideo starts the next epoch from 0)")
            if yielded % batch_size:
                return (f"{path}: field 'state.yielded_samples' is {yielded}: not a multiple of batch size "
                        f"{batch_size}")
            agreed = (epoch, yielded)
        elif (epoch, yielded) != agreed:
            return (f"{path}: epoch {epoch}, yielded_samples {yielded} differ from rank 0's "
                    f"(epoch {agreed[0]}, yielded_samples {agreed[1]})")
        group = rank // sp_world_size
        key = (group, epoch, yielded)
        if key not in walked:
            c = cursor_after(orders(epoch)[group], rows, yielded)
            walked[key] = (c.row_group_position, c.row_offset)
        if (position, offset) != walked[key]:
            return (f"{path}: cursor (row_group_position {position}, row_offset {offset}) is not {walked[key]}, "
                    f"where its shard stands after {plural(yielded, 'sample')} of epoch {epoch}")
    assert agreed is not None  # world_size >= 1
    return agreed
