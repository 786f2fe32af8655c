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
    """A ``core.migration.plan.MigrationRequest``."""
    from fvconsole.core.migration.plan import MigrationRequest

    return MigrationRequest(**fields)


def preview(request: Any, progress: Progress | None = None) -> Any:
    """``core.migration.plan.plan_migration``: the dry run, output dir rules included (as the CLI's)."""
    from fvconsole.core.migration.plan import plan_migration

    return plan_migration(request, progress=progress)


def execute(plan: Any, progress: Progress | None = None) -> dict:
    """``core.migration.write.execute_migration``: writes the sidecars and the receipt; returns the receipt."""
    from fvconsole.core.migration.write import execute_migration

    return dict(execute_migration(plan, progress=progress).receipt)


def verify(request: Any, progress: Progress | None = None) -> Any:
    """``core.migration.verify.verify_sidecars`` for the form's output dir (recomputes the plan itself)."""
    from fvconsole.core.migration.verify import verify_sidecars

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
    """Manifest summary and files of one cache entry (display only).

    The manifest summary comes from the scan (``CacheEntry.summary``), which already parsed
    and validated manifest.json: the detail pane never opens it again.
    """

    path: str
    summary: Any  # core.cache.ManifestSummary, or None without a valid manifest
    manifest_error: str | None
    files: tuple[tuple[str, int], ...]  # (name, bytes) of regular files directly inside
    other: tuple[str, ...]  # symlinks, directories and other non-regular children (never followed)
    total_files: int


def cache_entry_detail(entry: Any, limit: int = 500) -> CacheEntryDetail:
    """List one scanned entry's files without following symlinks or touching atimes.

    ``core.cache.files.list_dir`` opens the directory with O_NOFOLLOW | O_NOATIME and lstats
    each child; no file is opened, so looking at an entry never changes its LRU position.
    """
    import stat

    from fvconsole.core.cache.files import list_dir

    try:
        listing = list_dir(entry.path)
    except OSError as exc:
        raise FvError(f"{entry.path}: cannot list cache entry ({exc.strerror or exc})") from None
    files = sorted((name, st.st_size) for name, st in listing if stat.S_ISREG(st.st_mode))
    other = sorted(name for name, st in listing if not stat.S_ISREG(st.st_mode))
    error = None
    if entry.summary is None:
        present = any(name == "manifest.json" for name, _ in listing)
        error = "present but not usable (see the explanation above)" if present else "missing"
    return CacheEntryDetail(path=entry.path, summary=entry.summary, manifest_error=error,
                            files=tuple(files[:limit]), other=tuple(other[:limit]), total_files=len(files))


# ---------------------------------------------------------------- next sample ids

#: More distinct next row groups than this are not read for the preview (each is a Parquet read).
MAX_NEXT_ID_ROW_GROUPS = 256


@dataclass(frozen=True)
class NextSampleIds:
    """The sample id each rank reads next, when it could be read (display only)."""

    ids: dict[int, Any]  # rank -> id (None: the rank has no next sample, or its row group failed)
    row_groups_read: int
    note: str | None  # why ids are missing (too many row groups, unreadable dataset)


def next_sample_ids(plan: Any, max_row_groups: int = MAX_NEXT_ID_ROW_GROUPS) -> NextSampleIds:
    """Read the ``id`` of each rank's next sample: only the distinct next row groups, each once.

    Reuses what ``fvconsole sidecars verify --deep`` does (``core.migration.sample_ids.add_next_sample_ids``).
    Bounded: beyond ``max_row_groups`` distinct row groups nothing is read and a note says so.
    """
    from fvconsole.core.migration.sample_ids import add_next_sample_ids

    needed = {c.next_row_group for c in plan.ranks if c.next_row_group is not None and c.next_row_group >= 0}
    if len(needed) > max_row_groups:
        return NextSampleIds({}, 0, f"next sample ids not read: {len(needed)} distinct row groups "
                                    f"(more than {max_row_groups}); `fvconsole sidecars verify --deep` reads them all")
    rows: list[dict] = [{"rank": c.rank} for c in plan.ranks]
    problems: list[str] = []
    add_next_sample_ids(plan, rows, problems)
    note = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "") or None
    return NextSampleIds({row["rank"]: row.get("next_sample_id") for row in rows}, len(needed), note)
