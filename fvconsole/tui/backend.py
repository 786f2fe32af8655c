"""The console's only door to the file system: thin calls into ``fvconsole.core``.

Every function here may block (stat, listdir, torch, pyarrow) and so must only be called from
a thread worker. They return core objects or small frozen dataclasses; user-caused problems
surface as ``FvError`` / ``OSError`` which the views turn into notifications.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.errors import FvError
from fvconsole.core.progress import Progress

SIDECAR_SUBDIR = "dataloader-state"


# ---------------------------------------------------------------- run config + checkpoints


def load_config(path: str, overrides: Sequence[str] = ()) -> Any:
    """The run config (``core.runconfig.RunConfig``)."""
    from fvconsole.core.runconfig import load_run_config

    return load_run_config(path, overrides)


def config_output_dir(run_config: Any) -> str | None:
    """``training.checkpoint.output_dir`` of a loaded config, if any."""
    if run_config is None:
        return None
    value = run_config.get("training.checkpoint.output_dir", None)
    return os.path.expanduser(str(value)) if value else None


def list_checkpoints(path: str) -> list[Any]:
    """Checkpoints under an output dir (or the one checkpoint), newest first."""
    from fvconsole.core.checkpoints import discover_checkpoints

    if not os.path.exists(path):
        raise FvError(f"{path}: checkpoints path does not exist")
    return list(discover_checkpoints(path))


@dataclass(frozen=True)
class CheckpointDetail:
    """What the detail pane shows for one checkpoint."""

    path: str
    metadata_step: int | None
    metadata_keys: tuple[str, ...]
    dcp_key_groups: tuple[tuple[str, int], ...]  # (top-level key, number of entries)
    dcp_key_count: int
    mismatches: tuple[Any, ...] | None  # None: no run config loaded
    problems: tuple[str, ...]


def checkpoint_detail(path: str, run_config: Any) -> CheckpointDetail:
    """Metadata, DCP key summary and config mismatches for one checkpoint; problems are reported."""
    from fvconsole.core.checkpoints import dcp_state_keys, read_metadata

    problems: list[str] = []
    metadata: dict = {}
    try:
        metadata = read_metadata(path)
    except (FvError, OSError) as exc:
        problems.append(str(exc))
    groups: dict[str, int] = {}
    keys: list[str] = []
    try:
        keys = list(dcp_state_keys(path))
        for key in keys:
            top = key.split(".", 1)[0]
            groups[top] = groups.get(top, 0) + 1
    except (FvError, OSError) as exc:
        problems.append(str(exc))
    except Exception as exc:  # noqa: BLE001 - torch raises many types on corrupt metadata
        problems.append(f"{os.path.join(path, 'dcp', '.metadata')}: unreadable ({type(exc).__name__}: {exc})")
    mismatches = None
    embedded = metadata.get("config") if isinstance(metadata, dict) else None
    if run_config is not None and isinstance(embedded, dict):
        from fvconsole.core.runconfig import compare_configs

        mismatches = tuple(compare_configs(embedded, run_config.data))
    elif run_config is not None:
        problems.append(f"{os.path.join(path, 'metadata.json')}: field 'config' missing: cannot compare with the run config")
    step = metadata.get("step") if isinstance(metadata, dict) else None
    return CheckpointDetail(
        path=path,
        metadata_step=step if isinstance(step, int) else None,
        metadata_keys=tuple(sorted(metadata)) if isinstance(metadata, dict) else (),
        dcp_key_groups=tuple(sorted(groups.items())),
        dcp_key_count=len(keys),
        mismatches=mismatches,
        problems=tuple(problems),
    )


# ---------------------------------------------------------------- migration


@dataclass(frozen=True)
class MigrationDefaults:
    """Values the migration form is prefilled with; the operator confirms or edits them."""

    checkpoint: str
    config_path: str
    output_dir: str
    expected_step: int | None
    expected_world_size: int | None
    consumed_batches_per_rank: int | None
    derivation: tuple[str, ...]


def suggest_output_dir(checkpoint: str, step: int | None) -> str:
    """A sidecar directory beside (never inside) the checkpoint: ``<output_dir>/dataloader-state/checkpoint-<step>``.

    keep_last cleanup only removes ``checkpoint-*`` directories, so this survives it.
    """
    parent = os.path.dirname(os.path.abspath(checkpoint.rstrip("/")))
    name = os.path.basename(checkpoint.rstrip("/")) if step is None else f"checkpoint-{step}"
    return os.path.join(parent, SIDECAR_SUBDIR, name)


def migration_defaults(checkpoint: str, step: int | None, config_path: str | None, run_config: Any) -> MigrationDefaults:
    """Derive expected step, world size and consumed batches (pure: no file-system access)."""
    notes = []
    world = gas = None
    if run_config is not None:
        world = _as_int(run_config.get("training.distributed.num_gpus", None))
        gas = _as_int(run_config.get("training.loop.gradient_accumulation_steps", None))
    if step is not None:
        notes.append(f"step {step} ← directory name checkpoint-{step}")
    if world is not None:
        notes.append(f"world size {world} ← training.distributed.num_gpus")
    consumed = step * gas if step is not None and gas is not None else None
    if consumed is not None:
        notes.append(f"consumed batches/rank {consumed} = step {step} × grad accum {gas}")
    return MigrationDefaults(
        checkpoint=checkpoint,
        config_path=config_path or "",
        output_dir=suggest_output_dir(checkpoint, step),
        expected_step=step,
        expected_world_size=world,
        consumed_batches_per_rank=consumed,
        derivation=tuple(notes),
    )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def make_request(**fields: Any) -> Any:
    """A ``core.migration.MigrationRequest``."""
    from fvconsole.core.migration import MigrationRequest

    return MigrationRequest(**fields)


def preview(request: Any, progress: Progress | None = None) -> Any:
    """``core.migration.preview_migration`` (the same call the CLI makes)."""
    from fvconsole.core.migration import preview_migration

    return preview_migration(request, progress=progress)


def execute(plan: Any, progress: Progress | None = None) -> dict:
    """``core.sidecars.execute_plan``: writes the sidecars and the receipt; returns the receipt."""
    from fvconsole.core.sidecars import execute_plan

    return execute_plan(plan, progress=progress)


def verify(request: Any, progress: Progress | None = None) -> Any:
    """``core.sidecars.verify_sidecars`` for the form's output dir (recomputes the plan itself)."""
    from fvconsole.core.sidecars import verify_sidecars

    return verify_sidecars(request.config_path, request.checkpoint, request.output_dir,
                           overrides=request.overrides, progress=progress)


# ---------------------------------------------------------------- shard cache


def scan(root: str) -> Any:
    """``core.cache.scan_cache``; a missing root is a user error, not a crash."""
    from fvconsole.core.cache import scan_cache

    if not os.path.isdir(root):
        raise FvError(f"{root}: cache root is not a directory")
    return scan_cache(root)


def plan(scan_result: Any, *, keys: Sequence[str] = (), max_gb: float | None = None, invalid: bool = False) -> Any:
    """``core.cache.plan_eviction`` for one of the three console actions."""
    from fvconsole.core.cache import plan_eviction

    return plan_eviction(scan_result, keys=tuple(keys), max_gb=max_gb, invalid=invalid)


def evict(eviction_plan: Any, progress: Progress | None = None) -> Any:
    """``core.cache.execute_eviction``: deletes exactly the planned entries (re-checked first)."""
    from fvconsole.core.cache import execute_eviction

    return execute_eviction(eviction_plan, progress=progress)


@dataclass(frozen=True)
class CacheEntryDetail:
    """Manifest summary and shard files of one cache entry (display only)."""

    path: str
    manifest: dict | None
    manifest_error: str | None
    params: int
    dtypes: tuple[tuple[str, int], ...]
    kinds: tuple[tuple[str, int], ...]
    files: tuple[tuple[str, int], ...]  # (name, bytes) of regular files directly inside


MAX_MANIFEST_BYTES = 64 << 20


def cache_entry_detail(path: str, limit: int = 500) -> CacheEntryDetail:
    """Read one entry's manifest.json and list its files without following symlinks or touching mtimes."""
    import json

    files: list[tuple[str, int]] = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                if entry.is_file(follow_symlinks=False):
                    files.append((entry.name, entry.stat(follow_symlinks=False).st_size))
    except OSError as exc:
        raise FvError(f"{path}: cannot list cache entry ({exc.strerror or exc})") from None
    files.sort()
    manifest = None
    error = None
    manifest_path = os.path.join(path, "manifest.json")
    try:
        if os.path.getsize(manifest_path) > MAX_MANIFEST_BYTES:
            raise ValueError("larger than 64 MiB")
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        error = f"{manifest_path}: missing"
    except (OSError, ValueError) as exc:
        error = f"{manifest_path}: unreadable ({exc})"
        manifest = None
    dtypes: dict[str, int] = {}
    kinds: dict[str, int] = {}
    params = manifest.get("params") if isinstance(manifest, dict) else None
    if isinstance(params, dict):
        for spec in params.values():
            if isinstance(spec, dict):
                dtypes[str(spec.get("dtype"))] = dtypes.get(str(spec.get("dtype")), 0) + 1
                kinds[str(spec.get("kind"))] = kinds.get(str(spec.get("kind")), 0) + 1
    return CacheEntryDetail(
        path=path,
        manifest=manifest,
        manifest_error=error,
        params=len(params) if isinstance(params, dict) else 0,
        dtypes=tuple(sorted(dtypes.items())),
        kinds=tuple(sorted(kinds.items())),
        files=tuple(files[:limit]),
    )
