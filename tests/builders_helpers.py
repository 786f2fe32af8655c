"""Shared helpers for the migration-core tests (real fixtures built with fvconsole.demo.builders)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any

from fvconsole.core.migration.plan import MigrationRequest
from fvconsole.demo.builders import RunFixture, build_run


def small_run(root: Any, *, steps=(2,), kind: str = "legacy", **kwargs: Any) -> RunFixture:
    """A 4-GPU run over 3 files × 4 row groups × 10 rows (120 samples), one checkpoint per step."""
    kwargs.setdefault("num_gpus", 4)
    return build_run(os.fspath(root), steps=steps, kind=kind, **kwargs)


def request_for(run: RunFixture, step: int = 2, **overrides: Any) -> MigrationRequest:
    """A request that should succeed for ``run`` (override any field)."""
    world = run.config["training"]["distributed"]["num_gpus"]
    accum = run.config["training"]["loop"]["gradient_accumulation_steps"]
    fields: dict[str, Any] = {
        "config_path": run.config_path,
        "checkpoint": run.checkpoint(step),
        "output_dir": os.path.join(run.root, "sidecars"),
        "expected_step": step,
        "expected_world_size": world,
        "consumed_batches_per_rank": step * accum,
    }
    fields.update(overrides)
    return MigrationRequest(**fields)


def tree_hash(root: Any) -> dict[str, tuple]:
    """Every entry below ``root`` with type, size, content hash, mode and mtime (no symlink following)."""
    out: dict[str, tuple] = {}
    base = os.fspath(root)
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, base)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                out[rel] = ("file", st.st_size, digest, st.st_mode, st.st_mtime_ns)
            else:
                out[rel] = ("dir", st.st_mode)
    return out


def edit_manifest(path: str, mutate) -> None:
    """Rewrite a manifest JSON in place after ``mutate(data)`` (fingerprint left as is)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    mutate(data)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, sort_keys=True)


def refusal_fields(preview) -> list[str]:
    return [r.field for r in preview.refusals]


def refusal_for(preview, field: str):
    """The first refusal with ``field`` (AssertionError listing all refusals otherwise)."""
    for r in preview.refusals:
        if r.field == field:
            return r
    raise AssertionError(f"no refusal for {field!r}; got {[r.message for r in preview.refusals]}")
