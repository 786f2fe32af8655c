"""Real on-disk fixtures: Parquet datasets, streaming manifests, run configs, DCP checkpoints.

Used by the tests, the demo workspace and the benchmarks. Everything written here follows
docs/formats.md so fvconsole is exercised against files shaped like FastVideo's own. torch and
pyarrow are imported inside the functions that need them (the demo package must stay cheap
to import).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fvconsole.core.formats.runconfig import get_path
from fvconsole.core.formats.streaming import (
    contiguous_shards,
    dataset_state,
    samples_per_worker,
    shard_order,
    walk,
)
from fvconsole.core.shared.atomic import atomic_write_bytes
from fvconsole.demo import demo_module

MANIFEST_VERSION = 2
#: FastVideo's t2v projection (``training.data.preprocessed_data_type`` not set), typed from
#: upstream's ``pyarrow_schema_t2v`` like the table in ``core/formats/parquet_columns.py``.
DEFAULT_COLUMNS = ("id", "vae_latent_bytes", "vae_latent_shape", "vae_latent_dtype", "text_embedding_bytes",
                   "text_embedding_shape", "text_embedding_dtype", "file_name", "caption", "media_type", "width",
                   "height", "num_frames", "duration_sec", "fps")
EMBEDDING_DIM = 4

RowsSpec = int | Sequence[int] | Callable[[int, int], int]
CheckpointKind = Literal["legacy", "rank-local", "none"]


# --------------------------------------------------------------------------- datasets


def _rows_for(spec: RowsSpec, file_index: int, group_index: int, flat_index: int) -> int:
    """Row count of one row group: int, flat sequence (cycled), or callable(file, group)."""
    if callable(spec):
        n = int(spec(file_index, group_index))
    elif isinstance(spec, int):
        n = spec
    else:
        n = int(spec[flat_index % len(spec)])
    if n < 1:
        raise ValueError(f"row group ({file_index}, {group_index}) must have at least one row, got {n}")
    return n


def dataset_file_names(files: int) -> list[str]:
    """Relative paths of the dataset's files: the first at the top, the rest in ``shards/``.

    The names sort (as realpaths) in creation order, so manifest order = creation order.
    """
    return [f"part-{i:05d}.parquet" if i == 0 else os.path.join("shards", f"part-{i:05d}.parquet") for i in range(files)]


def parquet_schema(data_type: str = "t2v") -> Any:
    """The pyarrow schema of FastVideo's ``pyarrow_schema_<data_type>`` (docs/formats.md §4): the
    columns of :data:`fvconsole.core.formats.parquet_columns.COLUMNS`, each typed as FastVideo types it
    (a tensor as ``*_bytes`` binary, ``*_shape`` list<int64>, ``*_dtype`` string)."""
    from fvconsole.core.formats.parquet_columns import COLUMNS

    pa = demo_module("pyarrow")

    def kind(name: str) -> Any:
        if name.endswith("_bytes"):
            return pa.binary()
        if name.endswith("_shape"):
            return pa.list_(pa.int64())
        if name in ("width", "height", "num_frames"):
            return pa.int64()
        if name in ("duration_sec", "fps"):
            return pa.float64()
        return pa.string()

    return pa.schema([(name, kind(name)) for name in COLUMNS[data_type]])


def _column(name: str, ids: list[str], file_index: int, group_index: int, rng: random.Random) -> list[Any]:
    """Small plausible values of one column for the rows ``ids`` (the tensors are a few bytes)."""
    n = len(ids)
    if name == "id":
        return ids
    if name.endswith("_bytes"):
        return [bytes(rng.randrange(256) for _ in range(2 * EMBEDDING_DIM)) for _ in range(n)]
    if name.endswith("_shape"):
        return [[EMBEDDING_DIM] for _ in range(n)]
    if name.endswith("_dtype"):
        return ["bfloat16"] * n
    if name == "caption":
        return [f"a clip of scene {rng.randrange(10_000)} (file {file_index}, group {group_index})" for _ in range(n)]
    if name == "file_name":
        return [f"{i}.mp4" for i in ids]
    if name == "media_type":
        return ["video"] * n
    if name in ("width", "height"):
        return [832 if name == "width" else 480] * n
    if name == "num_frames":
        return [81] * n
    if name in ("duration_sec", "fps"):
        return [5.0625 if name == "duration_sec" else 16.0] * n
    return [f"{name}-{i}" for i in ids]


def write_dataset(
    root: str | os.PathLike[str],
    *,
    files: int = 3,
    row_groups_per_file: int = 4,
    rows_per_group: RowsSpec = 10,
    seed: int = 0,
    data_type: str = "t2v",
) -> str:
    """Write real Parquet files with explicit row groups; return the dataset root's realpath.

    The columns are FastVideo's for ``data_type`` (:func:`parquet_schema`), so its streaming
    loader would keep a manifest of them. Column ``id`` is ``"sample-%06d"`` of the global
    sample index in manifest order, so a test can check which sample a cursor points at by
    reading the data.
    """
    pa = demo_module("pyarrow")
    pq = demo_module("pyarrow.parquet")
    root = os.path.realpath(os.fspath(root))
    os.makedirs(root, exist_ok=True)
    rng = random.Random(seed)
    schema = parquet_schema(data_type)
    names = sorted(dataset_file_names(files), key=lambda rel: os.path.join(root, rel))
    sample = 0
    flat = 0
    for file_index, rel in enumerate(names):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with pq.ParquetWriter(path, schema) as writer:
            for group_index in range(row_groups_per_file):
                n = _rows_for(rows_per_group, file_index, group_index, flat)
                flat += 1
                ids = [f"sample-{sample + i:06d}" for i in range(n)]
                data = {name: _column(name, ids, file_index, group_index, rng) for name in schema.names}
                writer.write_table(pa.table(data, schema=schema), row_group_size=n)
                sample += n
    return root


# --------------------------------------------------------------------------- manifests


def manifest_fingerprint(row_groups: list[dict[str, Any]]) -> str:
    """FastVideo's ``_manifest_fingerprint`` (json.dumps defaults: ensure_ascii=True)."""
    payload = json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def scan_manifest(dataset_root: str | os.PathLike[str], columns: Sequence[str] | None = None) -> dict:
    """Exactly FastVideo's ``_scan_manifest``: sorted realpaths, per-row-group stats."""
    pq = demo_module("pyarrow.parquet")
    root = os.path.realpath(os.path.expanduser(os.fspath(dataset_root)))
    parquet_files: list[str] = []
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if name.endswith(".parquet"):
                parquet_files.append(os.path.realpath(os.path.join(dirpath, name)))
    parquet_files.sort()
    if not parquet_files:
        raise FileNotFoundError(f"No parquet files found under dataset path: {root}")
    if columns is None:
        columns = tuple(pq.ParquetFile(parquet_files[0]).schema_arrow.names)
    row_groups: list[dict[str, Any]] = []
    sample_start = 0
    for file_path in parquet_files:
        st = os.stat(file_path)
        pf = pq.ParquetFile(file_path)
        missing = sorted(set(columns) - set(pf.schema_arrow.names))
        if missing:
            raise ValueError(f"Parquet file {file_path} is missing projected T2V columns: {missing}")
        rel = os.path.relpath(file_path, root)
        for index in range(pf.num_row_groups):
            rows = pf.metadata.row_group(index).num_rows
            row_groups.append(
                {
                    "file": rel,
                    "row_group": index,
                    "rows": rows,
                    "sample_start": sample_start,
                    "file_size": st.st_size,
                    "file_mtime_ns": st.st_mtime_ns,
                }
            )
            sample_start += rows
    return _manifest(root, columns, sample_start, row_groups)


def _manifest(root: str, columns: Sequence[str], total_rows: int, row_groups: list[dict[str, Any]]) -> dict:
    """A manifest document in FastVideo's shape, its fingerprint computed as FastVideo does."""
    return {
        "version": MANIFEST_VERSION,
        "dataset_root": root,
        "columns": list(columns),
        "total_rows": total_rows,
        "row_groups": row_groups,
        "fingerprint": manifest_fingerprint(row_groups),
    }


def write_manifest(manifest_path: str | os.PathLike[str], manifest: Mapping[str, Any]) -> str:
    """Write a manifest dict atomically the way FastVideo does (``json.dump(sort_keys=True)``)."""
    path = os.path.abspath(os.fspath(manifest_path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write_bytes(path, json.dumps(manifest, sort_keys=True).encode("utf-8"))
    return path


def build_manifest(
    dataset_root: str | os.PathLike[str],
    manifest_path: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
) -> dict:
    """Scan ``dataset_root`` like FastVideo and write the manifest (which must live outside it)."""
    root = os.path.realpath(os.path.expanduser(os.fspath(dataset_root)))
    parent = os.path.realpath(os.path.dirname(os.path.abspath(os.fspath(manifest_path))))
    if os.path.commonpath([root, parent]) == root:
        raise ValueError(f"manifest {manifest_path} must be outside the dataset root {root}")
    manifest = scan_manifest(root, columns)
    write_manifest(manifest_path, manifest)
    return manifest


def synthetic_manifest(
    num_row_groups: int,
    *,
    rows: int | Sequence[int] | None = None,
    dataset_root: str = "/data/synthetic-openvid",
    seed: int = 0,
    row_groups_per_file: int = 64,
    columns: Sequence[str] = DEFAULT_COLUMNS,
) -> dict:
    """A valid manifest dict without real files, for scale tests and benchmarks.

    ``rows`` None → varied counts in [1, 64] from ``seed``; an int → all equal; a sequence → cycled.
    """
    rng = random.Random(seed)
    row_groups: list[dict[str, Any]] = []
    sample_start = 0
    base_mtime = 1_700_000_000_000_000_000
    for i in range(num_row_groups):
        file_index, group = divmod(i, row_groups_per_file)
        if rows is None:
            n = rng.randint(1, 64)
        elif isinstance(rows, int):
            n = rows
        else:
            n = int(rows[i % len(rows)])
        row_groups.append(
            {
                "file": f"part-{file_index + 1:05d}.parquet",
                "row_group": group,
                "rows": n,
                "sample_start": sample_start,
                "file_size": 1_000_000 + file_index,
                "file_mtime_ns": base_mtime + file_index,
            }
        )
        sample_start += n
    return _manifest(dataset_root, columns, sample_start, row_groups)


# --------------------------------------------------------------------------- run configs


def _set_dotted(mapping: dict, dotted: str, value: Any) -> None:
    node = mapping
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value


def run_config(
    *,
    data_path: str,
    manifest_path: str,
    output_dir: str,
    num_gpus: int = 8,
    sp_size: int = 1,
    train_batch_size: int = 2,
    grad_accum: int = 1,
    seed: int = 42,
    read_batch_size: int = 8,
    shuffle: bool = True,
    num_workers: int = 0,
    max_train_steps: int = 1000,
    checkpoints_total_limit: int = 3,
    checkpointing_steps: int = 100,
    dataloader_type: str = "streaming",
    **extra: Any,
) -> dict:
    """A realistic FastVideo-like nested run config, with the keys FastVideo reads (its cleanup's
    ``training.checkpoint.checkpoints_total_limit``, ``training_state_checkpointing_steps``, the
    tracker's ``project_name``).

    ``extra`` keys containing dots are dotted paths (``**{"training.loop.max_train_steps": 5}``);
    other keys are set at the top level.
    """
    config: dict[str, Any] = {
        "model": {
            "name": "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
            "dtype": "bf16",
            "enable_gradient_checkpointing": True,
        },
        "training": {
            "distributed": {
                "num_gpus": num_gpus,
                "sp_size": sp_size,
                "hsdp_replicate_dim": 1,
                "hsdp_shard_dim": num_gpus,
            },
            "data": {
                "data_path": data_path,
                "dataloader_type": dataloader_type,
                "streaming_manifest_path": manifest_path,
                "streaming_read_batch_size": read_batch_size,
                "streaming_shuffle_row_groups": shuffle,
                "dataloader_num_workers": num_workers,
                "train_batch_size": train_batch_size,
                "seed": seed,
                "num_height": 480,
                "num_width": 832,
                "num_frames": 77,
            },
            "loop": {
                "gradient_accumulation_steps": grad_accum,
                "max_train_steps": max_train_steps,
                "log_every": 10,
            },
            "optimizer": {"learning_rate": 1.0e-5, "weight_decay": 0.01, "betas": [0.9, 0.999]},
            "checkpoint": {
                "output_dir": output_dir,
                "training_state_checkpointing_steps": checkpointing_steps,
                "checkpoints_total_limit": checkpoints_total_limit,
            },
            "tracker": {"project_name": "fastvideo-t2v"},
        },
    }
    for key, value in extra.items():
        if "." in key:
            _set_dotted(config, key, value)
        else:
            config[key] = value
    return config


def write_run_config(path: str | os.PathLike[str], config: Mapping[str, Any]) -> str:
    """Write a run config as YAML (atomically); returns the absolute path."""
    import yaml

    target = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    text = yaml.safe_dump(copy.deepcopy(dict(config)), sort_keys=False)
    atomic_write_bytes(target, text.encode("utf-8"))
    return target


# --------------------------------------------------------------------------- checkpoints


def _streaming_state(config: Mapping[str, Any], rank: int, world_size: int, step: int) -> dict:
    """The loader's real dataset state for ``rank`` at ``step`` when the manifest is readable.

    Falls back to a zero cursor (fingerprint "unknown") so checkpoints can be built for any
    config; a fixture must never fail because the dataset is deliberately broken.
    """
    sp = int(get_path(config, "training.distributed.sp_size", 1) or 1)
    batch = int(get_path(config, "training.data.train_batch_size", 1) or 1)
    accum = int(get_path(config, "training.loop.gradient_accumulation_steps", 1) or 1)
    seed = int(get_path(config, "training.data.seed", 0) or 0)
    read_batch = int(get_path(config, "training.data.streaming_read_batch_size", 8) or 8)
    shuffle = bool(get_path(config, "training.data.streaming_shuffle_row_groups", True))
    fingerprint, position, offset, spw, epoch = "unknown", 0, 0, 0, 0
    yielded = step * accum * batch
    try:
        with open(os.path.expanduser(str(get_path(config, "training.data.streaming_manifest_path", None))), encoding="utf-8") as fh:
            manifest = json.load(fh)
        rows = [int(g["rows"]) for g in manifest["row_groups"]]
        groups = max(world_size // max(sp, 1), 1)
        shards = contiguous_shards(rows, groups)
        spw = samples_per_worker([sum(rows[i] for i in s) for s in shards], batch)
        fingerprint = str(manifest["fingerprint"])
        if spw > 0 and yielded >= 0:
            # As FastVideo's loader: an epoch ends after samples_per_worker; the next starts from 0
            # in its own shuffle (Random(seed + epoch)), and the state counts within the epoch.
            epoch, yielded = divmod(yielded, spw)
            cursor = walk(shard_order(shards[rank // sp], seed, epoch, shuffle), rows, yielded)
            position, offset = cursor.row_group_position, cursor.row_offset
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    return dataset_state(
        fingerprint=fingerprint,
        global_rank=rank,
        world_size=world_size,
        sp_world_size=sp,
        batch_size=batch,
        read_batch_size=read_batch,
        seed=seed,
        shuffle_row_groups=shuffle,
        samples_per_worker=spw,
        row_group_position=position,
        row_offset=offset,
        yielded_samples=yielded,
        epoch=epoch,
    )


def loader_state(config: Mapping[str, Any], rank: int, world_size: int, step: int) -> dict:
    """A StatefulDataLoader-like state (num_workers=0) wrapping the streaming dataset state."""
    accum = int(get_path(config, "training.loop.gradient_accumulation_steps", 1) or 1)
    batches = step * accum
    return {
        "_snapshot": {
            "_snapshot_step": batches,
            "_last_yielded_worker_id": 0,
            "_num_workers": 0,
            "_main_snapshot": {"_num_yielded": batches, "_sampler_iter_yielded": batches},
        },
        "_steps_since_snapshot": 0,
        "_iterator_finished": False,
        "dataset_state": _streaming_state(config, rank, world_size, step),
    }


def _state_dict(config: Mapping[str, Any], step: int, world_size: int, kind: str) -> dict:
    torch = demo_module("torch")
    gen = torch.Generator().manual_seed(step)
    weight = torch.randn(4, 4, generator=gen)
    state: dict[str, Any] = {
        "model": {"blocks.0.attn.qkv.weight": weight, "blocks.0.attn.qkv.bias": torch.zeros(4)},
        "optimizer": {
            "state": {"blocks.0.attn.qkv.weight": {"step": torch.tensor(float(step)), "exp_avg": torch.zeros(4, 4)}},
            "param_groups": [{"lr": 1e-5, "weight_decay": 0.01, "params": ["blocks.0.attn.qkv.weight"]}],
        },
        "scheduler": {"last_epoch": step, "_step_count": step + 1},
    }
    if kind == "legacy":
        # Legacy saves put rank 0's loader state under the shared DCP key "dataloader".
        state["dataloader"] = loader_state(config, 0, world_size, step)
    return state


def _save_dcp(state: dict, dcp_dir: str) -> None:
    import warnings

    dcp = demo_module("torch.distributed.checkpoint")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, storage_writer=dcp.FileSystemWriter(dcp_dir, sync_files=False), no_dist=True)


def _torch_save(payload: Any, path: str) -> None:
    demo_module("torch").save(payload, path)


#: The keys of FastVideo's RNG snapshot, in the order it writes them.
RNG_KEYS = ("torch_rng", "python_rng", "numpy_rng", "cuda_rng", "gen_cuda")


def rng_state(rank: int, step: int, *, keys: Sequence[str] = RNG_KEYS) -> dict:
    """The RNG snapshot FastVideo saves per rank (``_save_rng_snapshot``), with CPU stand-ins for CUDA.

    ``{"torch_rng": torch.get_rng_state(), "python_rng": random.getstate(), "numpy_rng":
    np.random.get_state(), "cuda_rng": torch.cuda.get_rng_state(), "gen_cuda": the method's CUDA
    generator's state}``: the CUDA states are uint8 tensors, stood in for by CPU generators' states.
    ``keys``: the keys to keep (an older ``rng_state.pt`` may lack ``gen_cuda``).
    """
    torch = demo_module("torch")
    np = demo_module("numpy")
    seed = rank * 1_000_003 + step
    state = {
        "torch_rng": torch.Generator().manual_seed(seed).get_state(),
        "python_rng": random.Random(seed).getstate(),
        "numpy_rng": np.random.RandomState(seed % 2**32).get_state(),
        "cuda_rng": torch.Generator().manual_seed(seed + 1).get_state(),
        "gen_cuda": torch.Generator().manual_seed(seed + 2).get_state(),
    }
    return {key: state[key] for key in keys}


def write_checkpoint(
    output_dir: str | os.PathLike[str],
    step: int,
    config: Mapping[str, Any],
    *,
    world_size: int | None = None,
    kind: CheckpointKind = "legacy",
    rng_ranks: Iterable[int] | None = None,
    complete: bool = True,
    incomplete: Literal["rng", "dcp-metadata"] = "rng",
    metadata_step: int | None = None,
    embed_config: bool = True,
    write_metadata: bool = True,
) -> str:
    """Write ``<output_dir>/checkpoint-<step>/`` in FastVideo's save order (docs/formats.md §1).

    ``kind``: "legacy" (loader state in DCP under ``dataloader``), "rank-local" (per-rank
    ``dataloader_state_rank<r>.pt`` with state_kind "dataloader"), "none" (no loader state).
    ``complete=False`` simulates an interrupted save: ``incomplete="rng"`` writes RNG files for
    only the first half of the ranks, ``"dcp-metadata"`` leaves out ``dcp/.metadata``.
    ``rng_ranks`` overrides which ranks get an RNG file. ``metadata_step``/``embed_config``/
    ``write_metadata`` build broken metadata.json variants. Returns the checkpoint dir.
    """
    if kind not in ("legacy", "rank-local", "none"):
        raise ValueError(f"unknown checkpoint kind {kind!r}")
    if world_size is None:
        world_size = int(get_path(config, "training.distributed.num_gpus", 1) or 1)
    ckpt = os.path.join(os.path.abspath(os.fspath(output_dir)), f"checkpoint-{step}")
    dcp_dir = os.path.join(ckpt, "dcp")
    os.makedirs(dcp_dir, exist_ok=True)
    if write_metadata:
        meta: dict[str, Any] = {"step": step if metadata_step is None else metadata_step}
        if embed_config:
            meta["config"] = copy.deepcopy(dict(config))
        with open(os.path.join(ckpt, "metadata.json"), "w", encoding="utf-8") as fh:
            json.dump(meta, fh, indent=2)
    _save_dcp(_state_dict(config, step, world_size, kind), dcp_dir)
    if not complete and incomplete == "dcp-metadata":
        os.unlink(os.path.join(dcp_dir, ".metadata"))
    if kind == "rank-local":
        for rank in range(world_size):
            payload = {
                "version": 1,
                "rank": rank,
                "world_size": world_size,
                "step": step,
                "state_kind": "dataloader",
                "state": loader_state(config, rank, world_size, step),
            }
            _torch_save(payload, os.path.join(ckpt, f"dataloader_state_rank{rank}.pt"))
    if rng_ranks is None:
        rng_ranks = range(world_size) if complete or incomplete != "rng" else range(world_size // 2)
    for rank in rng_ranks:
        _torch_save(rng_state(rank, step), os.path.join(ckpt, f"rng_state_rank{rank}.pt"))
    return ckpt


# --------------------------------------------------------------------------- whole runs


@dataclass(frozen=True)
class RunFixture:
    """Paths of a complete fixture run (dataset, manifest, YAML config, output dir)."""

    root: str
    dataset_root: str
    manifest_path: str
    config_path: str
    output_dir: str
    config: dict = field(repr=False)
    checkpoints: tuple[str, ...] = ()

    def checkpoint(self, step: int) -> str:
        return os.path.join(self.output_dir, f"checkpoint-{step}")


def build_run(
    root: str | os.PathLike[str],
    *,
    steps: Sequence[int] = (2,),
    kind: CheckpointKind = "legacy",
    files: int = 3,
    row_groups_per_file: int = 4,
    rows_per_group: RowsSpec = 10,
    **config_kwargs: Any,
) -> RunFixture:
    """Dataset + manifest + config YAML + one checkpoint per step under ``root``.

    Layout: ``root/dataset``, ``root/cache/manifest.json``, ``root/run.yaml``, ``root/output``.
    ``config_kwargs`` go to :func:`run_config` (num_gpus, sp_size, train_batch_size, ...).
    """
    base = os.path.realpath(os.fspath(root))
    dataset = write_dataset(
        os.path.join(base, "dataset"), files=files, row_groups_per_file=row_groups_per_file, rows_per_group=rows_per_group
    )
    manifest_path = os.path.join(base, "cache", "manifest.json")
    build_manifest(dataset, manifest_path)
    output_dir = os.path.join(base, "output")
    config = run_config(data_path=dataset, manifest_path=manifest_path, output_dir=output_dir, **config_kwargs)
    config_path = write_run_config(os.path.join(base, "run.yaml"), config)
    ckpts = tuple(write_checkpoint(output_dir, s, config, kind=kind) for s in steps)
    return RunFixture(base, dataset, manifest_path, config_path, output_dir, config, ckpts)


def write_validated_set(config_path: str, checkpoint: str, sidecar_dir: str, *, step: int, world_size: int,
                        consumed_batches_per_rank: int, created_at: str) -> str:
    """Migrate ``checkpoint`` into ``sidecar_dir`` and add the receipt FastVideo's validator writes there.

    The receipt has the fields and layout of upstream
    ``scripts/train/validate_streaming_dataloader_sidecars.py`` (docs/formats.md §3), as if every
    rank had resumed in FastVideo's loader where its cursor says. Returns the receipt's path.
    """
    from fvconsole.core.migration.locked import execute_migration
    from fvconsole.core.migration.plan import MigrationRequest, preview_migration
    from fvconsole.core.migration.upstream_receipt import UPSTREAM_SCHEMA
    from fvconsole.core.shared.atomic import atomic_write_json

    preview = preview_migration(MigrationRequest(
        config_path=config_path, checkpoint=checkpoint, output_dir=sidecar_dir, expected_step=step,
        expected_world_size=world_size, consumed_batches_per_rank=consumed_batches_per_rank))
    if preview.plan is None:
        raise RuntimeError(f"demo: cannot migrate {checkpoint}: {[r.message for r in preview.refusals]}")
    execute_migration(preview.plan)

    def sha256(path: str) -> str:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()

    results = []
    for cursor in preview.plan.ranks:
        name = f"dataloader_state_rank{cursor.rank}.pt"
        results.append({"rank": cursor.rank, "sidecar": name, "sidecar_sha256": sha256(os.path.join(sidecar_dir, name)),
                        "next_id": f"sample-{cursor.next_sample_index:06d}",
                        "row_group_position": cursor.row_group_position, "row_offset": cursor.row_offset})
    receipt = {
        "schema": UPSTREAM_SCHEMA,
        "created_at_utc": created_at,
        "checkpoint": os.path.realpath(checkpoint),
        "checkpoint_metadata_sha256": sha256(os.path.join(checkpoint, "metadata.json")),
        "config": os.path.realpath(config_path),
        "config_sha256": sha256(config_path),
        "sidecar_dir": os.path.realpath(sidecar_dir),
        "step": step,
        "world_size": world_size,
        "results": results,
    }
    path = os.path.join(sidecar_dir, "fastvideo-validation.json")
    atomic_write_json(path, receipt)
    return path
