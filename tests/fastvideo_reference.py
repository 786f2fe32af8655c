"""FastVideo's streaming loader and sidecar resume, transcribed as the independent oracle.

Tests and benchmarks check fvconsole against this module, so it is written from FastVideo's
own semantics (``fastvideo/dataset/parquet_dataset_streaming_style.py``: the greedy
``_contiguous_row_group_shards``, the loader's ``__iter__``/``state_dict``, the upstream
``reconstruct_streaming_dataset_state``; the checkpoint loader's sidecar checks; the rules in
docs/formats.md §3 and §5) and never from ``fvconsole.core``: it imports nothing from it.
It works on the manifest's own row-group dicts (``rows``, ``sample_start``), as upstream does,
and recomputes everything per call, as upstream does (O(row groups) per rank).

- :func:`contiguous_row_group_shards`, :func:`samples_per_worker`, :func:`worker_shard`: the
  loader's layout (one worker: ``num_workers`` 0 counts as 1).
- :func:`replay_loader`: the loader's ``__iter__`` sample by sample, stopped after ``y``
  samples (what the loader's ``state_dict`` would then say, and the sample it reads next).
- :func:`resume_first_sample`: the first sample a loader resumed at (position, offset) reads.
- :func:`loader_state`: the state dict a live loader reports after ``y`` samples (replayed).
- :func:`reconstruct_streaming_dataset_state`: upstream's per-rank arithmetic (no replay).
- :func:`resume_sidecar`: what FastVideo's resume checks in a loaded sidecar dict, and the
  cursor it resumes at.
- :func:`manifest_fingerprint`: upstream ``_manifest_fingerprint``.
- :func:`validation_receipt` / :func:`write_validation_receipt`: the receipt of upstream
  ``scripts/train/validate_streaming_dataloader_sidecars.py`` and its ``_write_json_atomic``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

STATE_VERSION = 2
SIDECAR_VERSION = 1


def manifest_fingerprint(row_groups: list[dict[str, Any]]) -> str:
    """sha256 of the row groups as compact, key-sorted JSON (stdlib ``json.dumps``)."""
    payload = json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def contiguous_row_group_shards(row_groups: list[dict[str, Any]], num_shards: int) -> list[list[dict[str, Any]]]:
    """Split ordered row groups into row-balanced contiguous shards (upstream's greedy rule).

    For shard i the target is the rows not yet assigned over the shards not yet filled; the
    next row group is taken while the shard is empty, or it fits under the target, or too few
    row groups would otherwise be left for the remaining shards. Once row groups run out the
    remaining shards stay empty.
    """
    if num_shards < 1:
        raise ValueError("num_shards must be positive")
    shards: list[list[dict[str, Any]]] = [[] for _ in range(num_shards)]
    remaining_rows = sum(int(item["rows"]) for item in row_groups)
    cursor = 0
    for shard_index in range(num_shards):
        shards_left = num_shards - shard_index
        target = remaining_rows / shards_left if shards_left else 0
        shard_rows = 0
        while cursor < len(row_groups):
            item = row_groups[cursor]
            item_rows = int(item["rows"])
            items_left = len(row_groups) - cursor
            if shard_rows and shard_rows + item_rows > target and items_left >= shards_left - 1:
                break
            shards[shard_index].append(item)
            shard_rows += item_rows
            remaining_rows -= item_rows
            cursor += 1
        if cursor >= len(row_groups):
            break
    return shards


def samples_per_worker(shards: list[list[dict[str, Any]]], batch_size: int) -> int:
    """The smallest shard's rows rounded down to a batch multiple (0: the dataset is too small)."""
    return min(sum(int(item["rows"]) for item in shard) for shard in shards) // batch_size * batch_size


def worker_shard(shards: list[list[dict[str, Any]]], sp_group_index: int, *, seed: int, epoch: int = 0,
                 shuffle: bool = True) -> list[dict[str, Any]]:
    """The row groups one worker of an SP group reads, in order (``Random(seed + epoch)`` shuffle)."""
    shard = list(shards[sp_group_index])
    if shuffle:
        random.Random(int(seed) + epoch).shuffle(shard)
    return shard


def replay_loader(shard: list[dict[str, Any]], batch_size: int, stop_after: int) -> tuple[int, int, int | None]:
    """Run the loader's ``__iter__`` over ``shard`` until ``stop_after`` samples were yielded.

    Per row group, per sample: the sample is appended to the batch and ``_row_offset`` becomes
    its offset + 1; a full batch is yielded (``_yielded_samples += batch_size``). Returns the
    ``(row_group_position, row_offset)`` the loader's ``state_dict`` reports right after that
    batch, and the global index (``sample_start + offset``) of the next sample the
    uninterrupted loop reads (None if the shard ends first).
    """
    position = offset = yielded = 0
    batch: list[int] = []
    captured: tuple[int, int] | None = (0, 0) if stop_after == 0 else None
    while position < len(shard):
        item = shard[position]
        for local in range(offset, int(item["rows"])):
            sample = int(item["sample_start"]) + local
            if captured is not None:
                return captured[0], captured[1], sample
            batch.append(sample)
            offset = local + 1
            if len(batch) == batch_size:
                yielded += batch_size
                batch = []
                if yielded == stop_after:
                    captured = (position, offset)
        position += 1
        offset = 0
    if captured is None:
        raise ValueError(f"the shard ends before {stop_after} samples")
    return captured[0], captured[1], None


def resume_first_sample(shard: list[dict[str, Any]], position: int, offset: int) -> int | None:
    """The first sample a loader resumed at ``(position, offset)`` reads: it skips ``offset``
    rows of that row group and steps to the next group when none are left."""
    while position < len(shard):
        item = shard[position]
        if offset < int(item["rows"]):
            return int(item["sample_start"]) + offset
        position += 1
        offset = 0
    return None


def _topology(*, rank: int, world_size: int, sp_world_size: int, batch_size: int, read_batch_size: int,
              seed: int, shuffle_row_groups: bool, samples_per_worker: int) -> dict[str, Any]:
    return {
        "global_rank": rank,
        "world_size": world_size,
        "sp_world_size": sp_world_size,
        "sp_group_index": rank // sp_world_size,
        "num_workers": 1,
        "batch_size": batch_size,
        "read_batch_size": read_batch_size,
        "seed": int(seed),
        "shuffle_row_groups": bool(shuffle_row_groups),
        "samples_per_worker": samples_per_worker,
    }


def _state(manifest: dict[str, Any], topology: dict[str, Any], position: int, offset: int, yielded: int) -> dict:
    return {
        "version": STATE_VERSION,
        "manifest_fingerprint": str(manifest["fingerprint"]),
        "topology": topology,
        "worker_id": 0,
        "epoch": 0,
        "row_group_position": position,
        "row_offset": offset,
        "yielded_samples": yielded,
    }


def loader_state(manifest: dict[str, Any], *, rank: int, world_size: int, sp_world_size: int, batch_size: int,
                 read_batch_size: int, seed: int, shuffle_row_groups: bool, yielded_samples: int) -> dict[str, Any]:
    """The dataset state a live loader of ``rank`` reports after ``yielded_samples`` (replayed)."""
    shards = contiguous_row_group_shards(manifest["row_groups"], world_size // sp_world_size)
    spw = samples_per_worker(shards, batch_size)
    if spw == 0 or yielded_samples >= spw:
        raise ValueError("outside the first epoch")
    shard = worker_shard(shards, rank // sp_world_size, seed=seed, shuffle=shuffle_row_groups)
    position, offset, _next = replay_loader(shard, batch_size, yielded_samples)
    topology = _topology(rank=rank, world_size=world_size, sp_world_size=sp_world_size, batch_size=batch_size,
                         read_batch_size=read_batch_size, seed=seed, shuffle_row_groups=shuffle_row_groups,
                         samples_per_worker=spw)
    return _state(manifest, topology, position, offset, yielded_samples)


def reconstruct_streaming_dataset_state(
    manifest: dict[str, Any], *, global_rank: int, world_size: int, sp_world_size: int, batch_size: int,
    read_batch_size: int, seed: int, shuffle_row_groups: bool, yielded_samples: int,
) -> dict[str, Any]:
    """Upstream's reconstruction of one rank's state, recomputed from scratch for that rank.

    Split the whole manifest into shards, sum every shard, shuffle this rank's shard, then walk
    it: the first row group where the rest of ``yielded_samples`` is <= its rows gives the
    position and the offset (which may equal its rows). Zero samples: position 0, offset 0.
    """
    shards = contiguous_row_group_shards(manifest["row_groups"], world_size // sp_world_size)
    spw = samples_per_worker(shards, batch_size)
    if spw == 0 or yielded_samples >= spw:
        raise ValueError("outside the first epoch")
    shard = worker_shard(shards, global_rank // sp_world_size, seed=seed, shuffle=shuffle_row_groups)
    position = offset = 0
    remaining = yielded_samples
    if remaining:
        for index, item in enumerate(shard):
            rows = int(item["rows"])
            if remaining <= rows:
                position, offset = index, remaining
                break
            remaining -= rows
        else:
            raise ValueError("yielded_samples exceeds the selected streaming shard")
    topology = _topology(rank=global_rank, world_size=world_size, sp_world_size=sp_world_size,
                         batch_size=batch_size, read_batch_size=read_batch_size, seed=seed,
                         shuffle_row_groups=shuffle_row_groups, samples_per_worker=spw)
    return _state(manifest, topology, position, offset, yielded_samples)


def resume_sidecar(sidecar: dict[str, Any], *, rank: int, world_size: int, step: int, live_topology: dict,
                   fingerprint: str) -> dict[str, Any]:
    """FastVideo's checks of a loaded ``dataloader_state_rank<r>.pt`` dict; the cursor it resumes at.

    The checkpoint loader compares version, rank, world size and step (the step parsed from
    the checkpoint directory name) and refuses a mismatch; the streaming dataset refuses a
    state whose version, fingerprint or topology differs from the live loader's, then resumes
    at (row_group_position, row_offset) with yielded_samples. Raises ValueError on a refusal.
    """
    for name, want in (("version", SIDECAR_VERSION), ("rank", rank), ("world_size", world_size), ("step", step)):
        if sidecar.get(name) != want:
            raise ValueError(f"sidecar {name} {sidecar.get(name)!r} != {want!r}")
    if sidecar.get("state_kind") not in ("dataset", "dataloader"):
        raise ValueError("unknown state_kind")
    state = sidecar["state"]
    if state.get("version") != STATE_VERSION:
        raise ValueError("dataset state version")
    if state.get("manifest_fingerprint") != fingerprint:
        raise ValueError("manifest fingerprint")
    if state.get("topology") != live_topology:
        raise ValueError("topology")
    return {key: state[key] for key in ("epoch", "worker_id", "row_group_position", "row_offset", "yielded_samples")}


def live_loader_state(config: dict[str, Any], manifest: dict[str, Any], *, rank: int, step: int) -> dict[str, Any]:
    """The state the loader FastVideo builds from run ``config`` reports for ``rank`` after ``step``.

    Each optimizer step consumes ``gradient_accumulation_steps`` batches (docs/formats.md §2
    names the config keys); the loader runs with one worker (``dataloader_num_workers`` 0).
    """
    data = config["training"]["data"]
    distributed = config["training"]["distributed"]
    batch_size = int(data["train_batch_size"])
    batches = step * int(config["training"]["loop"]["gradient_accumulation_steps"])
    return loader_state(
        manifest, rank=rank, world_size=int(distributed["num_gpus"]), sp_world_size=int(distributed["sp_size"]),
        batch_size=batch_size, read_batch_size=int(data["streaming_read_batch_size"]), seed=int(data["seed"]),
        shuffle_row_groups=bool(data["streaming_shuffle_row_groups"]), yielded_samples=batches * batch_size,
    )


VALIDATION_SCHEMA = "fastvideo-streaming-dataloader-sidecar-validation/v1"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()


def validation_receipt(config: str, checkpoint: str, sidecar_dir: str, step: int, world_size: int) -> dict[str, Any]:
    """What ``scripts/train/validate_streaming_dataloader_sidecars.py``'s rank 0 writes when every rank resumed
    where expected: resolved paths, each file's sha256 read in 1 MiB chunks, each sidecar's ``state``
    read with ``torch.load``, the results gathered in rank order. ``next_id`` is the ``id`` of the
    first sample the resumed loader yields: the worker's shuffled shard from the manifest, then
    :func:`resume_first_sample` at the sidecar's cursor (the demo datasets' ids are
    ``sample-%06d`` of the global index)."""
    import torch
    import yaml

    config_path = Path(config).expanduser().resolve()
    checkpoint_dir = Path(checkpoint).expanduser().resolve()
    sidecars = Path(sidecar_dir).expanduser().resolve()
    data = yaml.safe_load(config_path.read_text(encoding="utf-8"))["training"]["data"]
    manifest = json.loads(Path(data["streaming_manifest_path"]).read_text(encoding="utf-8"))
    gathered = []
    for rank in range(world_size):
        sidecar_path = sidecars / f"dataloader_state_rank{rank}.pt"
        payload = torch.load(sidecar_path, map_location="cpu", weights_only=False)
        state, topology = payload["state"], payload["state"]["topology"]
        shards = contiguous_row_group_shards(manifest["row_groups"], topology["world_size"] // topology["sp_world_size"])
        shard = worker_shard(shards, topology["sp_group_index"], seed=topology["seed"], epoch=state.get("epoch", 0),
                             shuffle=topology["shuffle_row_groups"])
        first = resume_first_sample(shard, state["row_group_position"], state["row_offset"])
        gathered.append({
            "rank": rank,
            "sidecar": sidecar_path.name,
            "sidecar_sha256": sha256_file(sidecar_path),
            "next_id": None if first is None else f"sample-{first:06d}",
            "row_group_position": state["row_group_position"],
            "row_offset": state["row_offset"],
        })
    return {
        "schema": VALIDATION_SCHEMA,
        "created_at_utc": datetime.now(timezone.utc).isoformat(),
        "checkpoint": str(checkpoint_dir),
        "checkpoint_metadata_sha256": sha256_file(checkpoint_dir / "metadata.json"),
        "config": str(config_path),
        "config_sha256": sha256_file(config_path),
        "sidecar_dir": str(sidecars),
        "step": step,
        "world_size": world_size,
        "results": gathered,
    }


def write_validation_receipt(path: str, receipt: dict[str, Any]) -> None:
    """The validator's ``_write_json_atomic`` (temp file beside it, fsync, replace)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(receipt, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)


def gc_cache_root_candidates(root: Path) -> list[tuple[float, int, str]]:
    """What upstream ``shard_cache._gc_cache_root`` collects, in the order it deletes (no deletion).

    Every child that ``Path.is_dir()`` (a symlink to a directory included), its size the sum of
    ``st_size`` of the ``is_file()`` children directly inside (symlinks followed), its mtime that
    of ``manifest.json`` if ``is_file()``, else 0.0; sorted as tuples, as upstream sorts them.
    """
    entries = []
    for child in root.iterdir():
        if not child.is_dir():
            continue
        manifest = child / "manifest.json"
        size = sum(f.stat().st_size for f in child.glob("*") if f.is_file())
        mtime = manifest.stat().st_mtime if manifest.is_file() else 0.0
        entries.append((mtime, size, child.name))
    return sorted(entries)


# --------------------------------------------------------------------------- elastic resume


def epoch_samples(manifest: dict[str, Any], *, world_size: int, sp_world_size: int, batch_size: int, seed: int,
                  shuffle_row_groups: bool, epoch: int, rank: int,
                  resume: dict[str, Any] | None = None) -> list[int]:
    """The sample indices one rank's loader yields in ``epoch``, sample by sample, batch by batch.

    The loader's ``__iter__`` transcribed: the shard of the rank's SP group in
    ``Random(seed + epoch)`` order, read from ``resume``'s ``row_group_position`` /
    ``row_offset`` / ``yielded_samples`` (or from the start), each row after the offset
    appended to the batch, a full batch yielded, until ``samples_per_worker`` were yielded.
    A resume state whose epoch is not ``epoch`` yields nothing here.
    """
    shards = contiguous_row_group_shards(manifest["row_groups"], world_size // sp_world_size)
    spw = samples_per_worker(shards, batch_size)
    if spw == 0:
        raise ValueError("Dataset is too small for the requested DP/SP/worker layout")
    shard = worker_shard(shards, rank // sp_world_size, seed=seed, epoch=epoch, shuffle=shuffle_row_groups)
    position = offset = yielded = 0
    if resume is not None:
        if int(resume["epoch"]) != epoch:
            return []
        position, offset, yielded = (int(resume[k]) for k in ("row_group_position", "row_offset", "yielded_samples"))
    out: list[int] = []
    batch: list[int] = []
    while yielded < spw and position < len(shard):
        item = shard[position]
        for local in range(offset, int(item["rows"])):
            batch.append(int(item["sample_start"]) + local)
            offset = local + 1
            if len(batch) == batch_size:
                yielded += batch_size
                out.extend(batch)
                batch = []
                if yielded >= spw:
                    break
        if yielded >= spw:
            break
        position += 1
        offset = 0
    if yielded != spw:
        raise RuntimeError("Streaming shard ended before producing the balanced sample count")
    return out


def elastic_accounting(manifest: dict[str, Any], *, source: dict[str, Any], target_states: dict[int, dict],
                       target_world: int, target_sp: int, batch_size: int, seed: int,
                       shuffle_row_groups: bool) -> dict[str, int]:
    """consumed / to_read / repeated / unread / unread_without_change, counted sample by sample.

    ``source``: {world_size, sp_world_size, epoch, yielded_samples}: every source DP group
    yielded its first ``yielded_samples`` of epoch e. ``target_states``: the dataset state each
    target rank resumes from (its sidecar's ``state``); one rank per target DP group is replayed
    for the rest of epoch e (SP peers read the same samples).
    """
    e = int(source["epoch"])
    consumed: list[int] = []
    for group in range(source["world_size"] // source["sp_world_size"]):
        rank = group * source["sp_world_size"]
        samples = epoch_samples(manifest, world_size=source["world_size"], sp_world_size=source["sp_world_size"],
                                batch_size=batch_size, seed=seed, shuffle_row_groups=shuffle_row_groups, epoch=e,
                                rank=rank)
        consumed.extend(samples[:source["yielded_samples"]])
    read: list[int] = []
    for group in range(target_world // target_sp):
        rank = group * target_sp
        read.extend(epoch_samples(manifest, world_size=target_world, sp_world_size=target_sp, batch_size=batch_size,
                                  seed=seed, shuffle_row_groups=shuffle_row_groups, epoch=e, rank=rank,
                                  resume=target_states[rank]))
    counts: dict[int, int] = {}
    for sample in consumed + read:
        counts[sample] = counts.get(sample, 0) + 1
    total = int(manifest["total_rows"])
    source_shards = contiguous_row_group_shards(manifest["row_groups"], source["world_size"] // source["sp_world_size"])
    return {
        "consumed": len(consumed),
        "to_read": len(read),
        "repeated": sum(c - 1 for c in counts.values() if c >= 2),
        "unread": total - len(counts),
        "unread_without_change": total - source["world_size"] // source["sp_world_size"]
        * samples_per_worker(source_shards, batch_size),
    }


def elastic_state(manifest: dict[str, Any], mode: str, *, source: dict[str, Any], rank: int, target_world: int,
                  target_sp: int, batch_size: int, read_batch_size: int, seed: int,
                  shuffle_row_groups: bool) -> dict[str, Any]:
    """The dataset state target ``rank`` resumes from under ``mode`` (the issue's definitions, replayed).

    next-epoch: epoch e + 1 from its start; epoch-start: epoch e from its start; nearest: epoch e
    after y' = floor(source DP groups x source yielded / (target DP groups x batch)) x batch
    samples, or epoch e + 1 from its start when y' reaches the target's samples_per_worker.
    """
    e = int(source["epoch"])
    groups = target_world // target_sp
    shards = contiguous_row_group_shards(manifest["row_groups"], groups)
    spw = samples_per_worker(shards, batch_size)
    epoch, yielded = {"next-epoch": (e + 1, 0), "epoch-start": (e, 0)}.get(mode, (e, None))
    if yielded is None:
        consumed = source["world_size"] // source["sp_world_size"] * source["yielded_samples"]
        yielded = consumed // (groups * batch_size) * batch_size
        if yielded >= spw:
            epoch, yielded = e + 1, 0
    shard = worker_shard(shards, rank // target_sp, seed=seed, epoch=epoch, shuffle=shuffle_row_groups)
    position, offset, _next = replay_loader(shard, batch_size, yielded)
    topology = _topology(rank=rank, world_size=target_world, sp_world_size=target_sp, batch_size=batch_size,
                         read_batch_size=read_batch_size, seed=seed, shuffle_row_groups=shuffle_row_groups,
                         samples_per_worker=spw)
    return dict(_state(manifest, topology, position, offset, yielded), epoch=epoch)


def epoch_loader_state(manifest: dict[str, Any], *, rank: int, world_size: int, sp_world_size: int, batch_size: int,
                       read_batch_size: int, seed: int, shuffle_row_groups: bool, epoch: int,
                       yielded_samples: int) -> dict[str, Any]:
    """The dataset state a live loader of ``rank`` reports in ``epoch`` after ``yielded_samples`` (replayed)."""
    shards = contiguous_row_group_shards(manifest["row_groups"], world_size // sp_world_size)
    spw = samples_per_worker(shards, batch_size)
    shard = worker_shard(shards, rank // sp_world_size, seed=seed, epoch=epoch, shuffle=shuffle_row_groups)
    position, offset, _next = replay_loader(shard, batch_size, yielded_samples)
    topology = _topology(rank=rank, world_size=world_size, sp_world_size=sp_world_size, batch_size=batch_size,
                         read_batch_size=read_batch_size, seed=seed, shuffle_row_groups=shuffle_row_groups,
                         samples_per_worker=spw)
    return dict(_state(manifest, topology, position, offset, yielded_samples), epoch=epoch)


def torchdata_loader_state(dataset_state: dict[str, Any], batches: int) -> dict[str, Any]:
    """torchdata 0.11's ``StatefulDataLoader.state_dict()`` with no workers: the dataset's state at the top level."""
    return {"_index_sampler_state": None, "_sampler_iter_state": None, "_sampler_iter_yielded": batches,
            "_num_yielded": batches, "_IterableDataset_len_called": None, "_shared_seed": None,
            "fetcher_state": {"dataset_iter_state": None, "fetcher_ended": False}, "dataset_state": dataset_state,
            "_iterator_finished": False}

# --------------------------------------------------------------------------- checkpoint retention
# FastVideo's ``CheckpointManager._cleanup_old_checkpoints`` and ``_find_latest_checkpoint``
# (``fastvideo/train/utils/checkpoint.py``), transcribed from their description (issue 31 item 4):
# the cleanup runs right after a save, so that save is one of the candidates.

CHECKPOINT_DIR = r"^checkpoint-(\d+)$"


def cleanup_after_next_save(output_dir: Path, limit_value: Any) -> tuple[int, list[int]]:
    """(keep_last, steps really removed) by the cleanup that follows the next save.

    ``keep_last = int(limit_value or 0)``; <= 0: no cleanup. Every ``checkpoint-<step>`` that
    ``Path.is_dir()`` (a symlink to a dir counts) is a candidate; the next save is the newest;
    all but the newest ``keep_last`` by (step, path) are ``rmtree``d with ``ignore_errors``,
    which removes nothing of a symlink.
    """
    import re

    keep_last = int(limit_value or 0)
    if keep_last <= 0:
        return keep_last, []
    candidates: list[tuple[float, Path]] = []
    for child in output_dir.iterdir():
        if child.is_dir() and re.match(CHECKPOINT_DIR, child.name):
            candidates.append((int(child.name.split("-", 1)[1]), child))
    candidates.sort(key=lambda item: (item[0], str(item[1])))
    candidates.append((float("inf"), output_dir / "the-next-save"))
    doomed = candidates[:-keep_last] if len(candidates) > keep_last else []
    # shutil.rmtree(symlink, ignore_errors=True) refuses a symlink ("Cannot call rmtree on a
    # symbolic link") and the error is ignored: it takes a slot and stays.
    return keep_last, [int(step) for step, path in doomed if not path.is_symlink()]


def resume_latest(output_dir: Path) -> int | None:
    """``resume_from_checkpoint: latest``: the highest step of a ``checkpoint-<step>`` dir with a ``dcp/`` dir."""
    import re

    found = [(int(child.name.split("-", 1)[1]), child.name) for child in output_dir.iterdir()
             if child.is_dir() and re.match(CHECKPOINT_DIR, child.name) and (child / "dcp").is_dir()]
    return max(found)[0] if found else None


# --------------------------------------------------------------------------- resume on every rank
# FastVideo's resume, transcribed from ``fastvideo/train/utils/checkpoint.py`` (``_resolve_resume_checkpoint``,
# ``maybe_resume``, ``_resolve_dataloader_snapshot``, ``_load_dataloader_snapshot``, ``load_rng_snapshot``) and
# the streaming dataset (``load_or_create_streaming_manifest``, ``load_state_dict``, ``__iter__``), run for
# every target rank on CPU: the DCP load is a real ``dcp.load`` of every item, the CUDA setters are stand-ins
# that index the same keys. What ``fvconsole preflight``'s ``go`` must equal (issue 36).

DATALOADER_STATE_ENV = "FASTVIDEO_DATALOADER_STATE_DIR"


def find_latest_checkpoint(output_dir: Path) -> Path | None:
    """``_find_latest_checkpoint``: the highest ``checkpoint-<step>`` child that is a dir with a ``dcp/`` dir."""
    import re

    if not output_dir.exists():
        return None
    found = [(int(c.name.split("-", 1)[1]), c) for c in output_dir.iterdir()
             if c.is_dir() and re.match(CHECKPOINT_DIR, c.name) and (c / "dcp").is_dir()]
    return max(found, key=lambda item: item[0])[1] if found else None


def resolve_resume_checkpoint(value: str, output_dir: str) -> Path | None:
    """``_resolve_resume_checkpoint``: FileNotFoundError / ValueError as FastVideo raises them."""
    import re

    if str(value).strip().lower() == "latest":
        return find_latest_checkpoint(Path(os.path.expanduser(str(output_dir))).resolve())
    path = Path(os.path.expanduser(str(value))).resolve()
    if not path.exists():
        raise FileNotFoundError(f"resume_from_checkpoint not found: {path}")
    if path.is_dir() and path.name == "dcp":
        path = path.parent
    if path.is_dir() and re.match(CHECKPOINT_DIR, path.name):
        if not (path / "dcp").is_dir():
            raise FileNotFoundError(f"Missing dcp dir under checkpoint: {path / 'dcp'}")
        return path
    latest = find_latest_checkpoint(path)
    if latest is not None:
        return latest
    raise ValueError(f"Could not resolve resume checkpoint. Got: {path}")


def _dcp_load(dcp_dir: Path) -> None:
    """``dcp.load`` of every item the metadata lists, into CPU tensors of its size (reads every storage file)."""
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    reader = dcp.FileSystemReader(str(dcp_dir))
    metadata = reader.read_metadata()
    state = {key: torch.empty(meta.size, dtype=meta.properties.dtype) if isinstance(meta, TensorStorageMetadata)
             else None for key, meta in metadata.state_dict_metadata.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load(state, storage_reader=reader, no_dist=True)


def _manifest_matches_source(root: str, manifest: dict[str, Any]) -> bool:
    row_groups = manifest.get("row_groups")
    if not isinstance(row_groups, list) or not row_groups:
        return False
    start = 0
    stats: dict[str, os.stat_result] = {}
    try:
        for item in row_groups:
            rows = int(item["rows"])
            if rows <= 0 or int(item["row_group"]) < 0 or int(item["sample_start"]) != start:
                return False
            start += rows
            name = str(item["file"])
            if name not in stats:
                full = os.path.realpath(os.path.join(root, name))
                if os.path.commonpath([root, full]) != root:
                    return False
                stats[name] = os.stat(full)
            if int(item["file_size"]) != stats[name].st_size or int(item["file_mtime_ns"]) != stats[name].st_mtime_ns:
                return False
    except (KeyError, OSError, TypeError, ValueError):
        return False
    return int(manifest.get("total_rows", -1)) == start and manifest.get("fingerprint") == manifest_fingerprint(row_groups)


def streaming_manifest(data_path: str, manifest_path: str, columns: tuple[str, ...]) -> dict[str, Any]:
    """``load_or_create_streaming_manifest`` without the write: the manifest reused, or the rescan's."""
    import pyarrow.parquet as pq

    root = os.path.realpath(os.path.expanduser(data_path))
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as handle:
            candidate = json.load(handle)
        if (candidate.get("version") == 2 and candidate.get("dataset_root") == root
                and candidate.get("columns") == list(columns) and _manifest_matches_source(root, candidate)):
            return candidate
    files = sorted(os.path.realpath(os.path.join(d, n)) for d, _, names in os.walk(root) for n in sorted(names)
                   if n.endswith(".parquet"))
    if not files:
        raise FileNotFoundError(f"No parquet files found under dataset path: {root}")
    row_groups, start = [], 0
    for path in files:
        st = os.stat(path)
        meta = pq.ParquetFile(path)
        missing = sorted(set(columns) - set(meta.schema_arrow.names))
        if missing:
            raise ValueError(f"Parquet file {path} is missing projected T2V columns: {missing}")
        for index in range(meta.num_row_groups):
            rows = meta.metadata.row_group(index).num_rows
            row_groups.append({"file": os.path.relpath(path, root), "row_group": index, "rows": rows,
                               "sample_start": start, "file_size": st.st_size, "file_mtime_ns": st.st_mtime_ns})
            start += rows
    return {"version": 2, "dataset_root": root, "columns": list(columns), "total_rows": start,
            "row_groups": row_groups, "fingerprint": manifest_fingerprint(row_groups)}


def _dataset_state(payload: dict[str, Any]) -> dict[str, Any]:
    """What the stateful loader hands its dataset: the ``dataset`` state, or torchdata's ``dataset_state``."""
    state = payload["state"]
    if payload.get("state_kind") == "dataset":
        return state
    if "dataset_state" in state:
        return state["dataset_state"]
    return state["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]


def _rank_resumes(checkpoint: Path, step: int, rank: int, world: int, config: dict[str, Any],
                  manifest: dict[str, Any] | None, override: str | None) -> None:
    """One rank's dataloader state load, RNG restore and first batch; raises where FastVideo raises."""
    import random as random_module

    import numpy as np
    import torch

    data, dist = config["training"]["data"], config["training"]["distributed"]
    if manifest is not None:  # the streaming loader is stateful
        path: Path | None = checkpoint / f"dataloader_state_rank{rank}.pt"
        if not path.is_file():
            if override:
                path = Path(os.path.expanduser(override)).resolve() / f"dataloader_state_rank{rank}.pt"
                if not path.is_file():
                    raise FileNotFoundError(f"{DATALOADER_STATE_ENV} is set, but rank {rank} state is missing: {path}")
            elif world == 1:
                path = None
            else:
                raise RuntimeError("Checkpoint has no rank-local dataloader state sidecar.")
        sp = int(dist.get("sp_size", 1))
        batch = int(data["train_batch_size"])
        shards = contiguous_row_group_shards(manifest["row_groups"], world // sp * max(int(data.get(
            "dataloader_num_workers", 0)), 1))
        spw = samples_per_worker(shards, batch)
        if spw == 0:
            raise ValueError("Dataset is too small for the requested DP/SP/worker layout")
        if path is not None:
            payload = torch.load(path, map_location="cpu", weights_only=False)
            if not isinstance(payload, dict):
                raise ValueError(f"Invalid dataloader state payload: {path}")
            for name, want in (("version", SIDECAR_VERSION), ("rank", rank), ("world_size", world), ("step", step)):
                if payload.get(name) != want:
                    raise ValueError(f"Dataloader state {name} mismatch in {path}")
            if not isinstance(payload.get("state"), dict) or payload.get("state_kind") not in ("dataloader", "dataset"):
                raise ValueError(f"Unsupported dataloader state in {path}")
            state = _dataset_state(payload)
            if int(state.get("version", -1)) != STATE_VERSION:
                raise ValueError(f"Cannot resume: unsupported streaming dataset state ({path})")
            if state.get("manifest_fingerprint") != manifest["fingerprint"]:
                raise ValueError(f"Cannot resume: streaming dataset manifest changed ({path})")
            live = _topology(rank=rank, world_size=world, sp_world_size=sp, batch_size=batch,
                             read_batch_size=int(data["streaming_read_batch_size"]), seed=int(data["seed"]),
                             shuffle_row_groups=bool(data["streaming_shuffle_row_groups"]), samples_per_worker=spw)
            if state.get("topology") != live:
                raise ValueError(f"Cannot resume: streaming loader topology or sampling config changed ({path})")
            epoch_samples(manifest, world_size=world, sp_world_size=sp, batch_size=batch, seed=int(data["seed"]),
                          shuffle_row_groups=bool(data["streaming_shuffle_row_groups"]), epoch=int(state["epoch"]),
                          rank=rank, resume=state)
    rng_path = checkpoint / f"rng_state_rank{rank}.pt"
    if not rng_path.is_file():
        rng_path = checkpoint / "rng_state.pt"
    if rng_path.is_file():
        rng = torch.load(rng_path, map_location="cpu", weights_only=False)
        saved = (torch.get_rng_state(), random_module.getstate(), np.random.get_state())
        try:
            if "torch_rng" in rng:
                torch.set_rng_state(rng["torch_rng"])
            if "python_rng" in rng:
                random_module.setstate(rng["python_rng"])
            if "numpy_rng" in rng:
                np.random.set_state(rng["numpy_rng"])
            torch.ByteTensor(rng["cuda_rng"])  # torch.cuda.set_rng_state's stand-in: the same key, a byte tensor
            torch.Generator().set_state(rng["gen_cuda"])  # the method's CUDA generator's stand-in
        finally:
            torch.set_rng_state(saved[0])
            random_module.setstate(saved[1])
            np.random.set_state(saved[2])


def resume_every_rank(config: dict[str, Any], *, resume: str | None, world_size: int, override: str | None,
                      columns: tuple[str, ...]) -> tuple[bool, list[str]]:
    """(every target rank resumes, each failure as ``where: error``) for the next job of ``config``."""
    import re

    if not resume:
        return True, []
    try:
        checkpoint = resolve_resume_checkpoint(resume, config["training"]["checkpoint"]["output_dir"])
    except (FileNotFoundError, ValueError, NotADirectoryError) as exc:
        return False, [f"resolve: {exc}"]
    if checkpoint is None:
        return True, []
    step = int(re.match(CHECKPOINT_DIR, checkpoint.name).group(1))
    data = config["training"]["data"]
    manifest = None
    if str(data.get("dataloader_type", "")).strip().lower() == "streaming":
        try:
            manifest = streaming_manifest(data["data_path"], data["streaming_manifest_path"], columns)
        except (FileNotFoundError, ValueError) as exc:
            return False, [f"dataset: {exc}"]
    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

    try:
        _dcp_load(checkpoint / "dcp")
    except (Exception, CheckpointException) as exc:  # noqa: BLE001 - whatever dcp.load raises fails every rank
        return False, [f"dcp: {type(exc).__name__}: {str(exc)[:200]}"]
    failures = []
    for rank in range(world_size):
        try:
            _rank_resumes(checkpoint, step, rank, world_size, config, manifest, override)
        except Exception as exc:  # noqa: BLE001 - FastVideo's failure on that rank, whatever its type
            failures.append(f"rank {rank}: {type(exc).__name__}: {exc}")
    return not failures, failures
