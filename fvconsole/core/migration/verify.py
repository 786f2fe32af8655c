"""Verify a written sidecar set against the plan recomputed from config + checkpoint.

Every sidecar is read without torch (bounded, regular files only) and compared field by
field with the payload the plan says; the receipt's headline fields and sha256 rows are
checked; missing, extra, foreign and leftover temp files are reported.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.formats import torch_zip
from fvconsole.core.formats.sidecar_files import (
    RECEIPT_NAME,
    SIDECAR_RE,
    classify_entry,
    decode_sidecar,
    read_sidecar_bytes,
    sha256_bytes,
    sidecar_name,
)
from fvconsole.core.migration.model import MigrationPlan
from fvconsole.core.migration.output_dir import staging_pattern
from fvconsole.core.migration.plan import MigrationRequest, plan_from_sources
from fvconsole.core.migration.receipt import check_receipt, receipt_reshard_mode
from fvconsole.core.migration.sample_ids import add_next_sample_ids
from fvconsole.core.migration.upstream_receipt import (
    UpstreamValidation,
    check_upstream_receipt,
    find_upstream_receipts,
)
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.optional import require
from fvconsole.core.shared.progress import Progress, no_progress
from fvconsole.core.shared.safe_read import file_kind
from fvconsole.core.shared.walk import listing


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of checking a sidecar dir against a freshly recomputed plan."""

    ok: bool
    problems: tuple[str, ...]
    ranks: tuple[dict, ...]
    warnings: tuple[str, ...] = ()
    sidecar_dir: str = ""
    step: int | None = None
    world_size: int | None = None
    #: FastVideo's own validation receipt for this set (None: there is none).
    upstream_validation: UpstreamValidation | None = None

    def to_json(self) -> dict:
        return fields_json(self, ranks=[dict(r) for r in self.ranks])


def diff_payload(actual: Any, expected: Any, prefix: str = "") -> list[str]:
    """Field-by-field differences, named by dotted path (``state.row_offset: 3 != 5``)."""
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        out = []
        for key in expected:
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in actual:
                out.append(f"{path}: missing")
            else:
                out.extend(diff_payload(actual[key], expected[key], path))
        for key in actual:
            if key not in expected:
                out.append(f"{prefix + '.' if prefix else ''}{key}: unexpected field")
        return out
    if type(actual) is not type(expected) or actual != expected:
        return [f"{prefix or 'payload'}: sidecar has {_short_repr(actual)}, expected {_short_repr(expected)}"]
    return []


def _short_repr(value: Any, limit: int = 120) -> str:
    """repr for a problem line: a damaged sidecar may hold a million-item list."""
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 20:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _checkpoint_step(checkpoint: str) -> int:
    """The step FastVideo compares with: parsed from the directory name, else metadata.json."""
    match = re.match(r"^checkpoint-(\d+)$", os.path.basename(os.path.abspath(checkpoint)))
    if match:
        return int(match.group(1))
    from fvconsole.core.checkpoints.listing import read_metadata

    step = read_metadata(checkpoint).get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        raise FvError(f"{checkpoint}/metadata.json: field 'step' must be an integer (got {step!r})")
    return step


def recompute_plan(
    config_path: str, checkpoint: str, overrides: Sequence[str] = (), sidecar_dir: str = "."
) -> tuple[MigrationPlan | None, list[str], list[str]]:
    """Plan the migration again from config + checkpoint; returns (plan, problems, warnings).

    The planner runs on the sources alone (:func:`.plan.plan_from_sources`): the set being
    verified is the output dir, so no output dir rule (existing sidecars, overwrite, the
    lock) applies to it. The step comes from the checkpoint, the confirmations from the config.
    """
    from fvconsole.core.formats.runconfig import load_run_config

    cfg = load_run_config(config_path, overrides)
    step = _checkpoint_step(checkpoint)
    world = _int_field(cfg, config_path, "training.distributed.num_gpus")
    accum = _int_field(cfg, config_path, "training.loop.gradient_accumulation_steps")
    mode = receipt_reshard_mode(sidecar_dir)
    if mode is not None:  # a resharded set: the confirmation is the checkpoint's world size
        from fvconsole.core.checkpoints.listing import read_metadata

        embedded = read_metadata(checkpoint).get("config")
        world = _int_field(embedded if isinstance(embedded, dict) else {}, f"{checkpoint}/metadata.json",
                           "training.distributed.num_gpus")
    request = MigrationRequest(
        config_path=config_path,
        checkpoint=checkpoint,
        output_dir=sidecar_dir,
        expected_step=step,
        expected_world_size=world,
        consumed_batches_per_rank=step * accum,
        overrides=tuple(overrides),
        skip_source_check=True,
        reshard=mode,
    )
    preview = plan_from_sources(request)
    problems = [f"cannot recompute the plan: {r.message}" for r in preview.refusals]
    return preview.plan, problems, list(preview.warnings)


def _int_field(cfg: Any, path: str, dotted: str) -> int:
    from fvconsole.core.formats.runconfig import get_path

    value = get_path(cfg.data if hasattr(cfg, "data") else cfg, dotted, None)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FvError(f"{path}: field '{dotted}' must be an integer (got {value!r})")
    return value


def verify_sidecars(
    config_path: str,
    checkpoint: str,
    sidecar_dir: str,
    *,
    overrides: Sequence[str] = (),
    deep: bool = False,
    progress: Progress | None = None,
    torch_check: bool = False,
    upstream_receipt: str | None = None,
) -> VerifyResult:
    """Check every sidecar and the receipt in ``sidecar_dir`` against a recomputed plan.

    Sidecars are read without torch; ``torch_check`` also loads each with real torch.
    FastVideo's validation receipt (``upstream_receipt``, else the newest one found in the
    dir) is checked against the same files: one that no longer holds fails verification.
    Raises MissingExtra before reading anything when ``deep`` lacks pyarrow or ``torch_check``
    lacks torch.
    """
    if deep:
        require("pyarrow.parquet", extra="parquet", purpose="reading next sample ids")
    if torch_check:
        torch_zip.require_torch()
    progress = progress or no_progress
    plan, problems, warnings = recompute_plan(config_path, checkpoint, overrides, sidecar_dir)
    if plan is None:
        return VerifyResult(False, tuple(problems), (), tuple(warnings), sidecar_dir)
    if not os.path.isdir(sidecar_dir):
        what = "is not a directory" if os.path.lexists(sidecar_dir) else "does not exist"
        problems.append(f"{sidecar_dir}: sidecar dir {what}")
        return VerifyResult(False, tuple(problems), (), tuple(warnings), sidecar_dir, plan.step, plan.world_size)
    upstream_names = find_upstream_receipts(sidecar_dir)
    listing = _list_dir(sidecar_dir, plan.world_size, problems, warnings, set(upstream_names), dict(plan.links))
    receipt_rows = check_receipt(sidecar_dir, plan, problems)
    rows = []
    read = _Read()
    for cursor in plan.ranks:
        rows.append(_verify_rank(sidecar_dir, plan, cursor, listing, receipt_rows, torch_check, read))
        progress(len(rows), plan.world_size, f"checked rank {cursor.rank}")
    if deep:
        add_next_sample_ids(plan, rows, problems)
        read.next_ids = {row["rank"]: row.get("next_sample_id") for row in rows}
    for row in rows:
        problems.extend(f"rank {row['rank']}: {p}" for p in row["problems"])
    upstream = _check_upstream(plan, sidecar_dir, upstream_receipt, upstream_names, read, warnings)
    if upstream is not None:
        shown = os.path.basename(upstream.path)
        problems.extend(f"FastVideo's validation receipt {shown}: {p}" for p in upstream.problems)
        warnings.extend(upstream.warnings)
    return VerifyResult(
        not problems, tuple(problems), tuple(rows), tuple(warnings), sidecar_dir, plan.step, plan.world_size,
        upstream,
    )


@dataclass
class _Read:
    """What verification read of each rank's sidecar, for FastVideo's receipt to be checked against:
    its sha256 (None: missing or unreadable), its (row_group_position, row_offset), and with
    ``--deep`` the next sample id the dataset holds at its cursor."""

    digests: dict[int, str | None] = field(default_factory=dict)
    cursors: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    next_ids: dict[int, Any] | None = None


def _check_upstream(
    plan: MigrationPlan, sidecar_dir: str, given: str | None, found: Sequence[str],
    read: _Read, warnings: list[str],
) -> UpstreamValidation | None:
    """FastVideo's validation receipt checked against the current files (None: none given or found)."""
    if given is None and not found:
        return None
    if given is None:
        path = os.path.join(sidecar_dir, found[-1])
        if len(found) > 1:
            checked = [check_upstream_receipt(os.path.join(sidecar_dir, n), **_upstream_facts(plan, sidecar_dir, read))
                       for n in found]
            newest = max(checked, key=lambda u: u.created_at_utc or "")
            others = ", ".join(os.path.basename(u.path) for u in checked if u is not newest)
            warnings.append(f"{sidecar_dir}: {len(found)} FastVideo validation receipts; checked the newest, "
                            f"{os.path.basename(newest.path)} (also there: {others})")
            return newest
    else:
        path = given
    return check_upstream_receipt(path, **_upstream_facts(plan, sidecar_dir, read))


def _upstream_facts(plan: MigrationPlan, sidecar_dir: str, read: _Read) -> dict[str, Any]:
    return {
        "step": plan.step, "world_size": plan.world_size, "config_sha256": plan.config_sha256,
        "checkpoint_metadata_sha256": plan.checkpoint_metadata_sha256, "sidecar_sha256": read.digests,
        "sidecar_dir": sidecar_dir, "checkpoint": plan.checkpoint, "config": plan.config_path or "",
        "sidecar_cursors": read.cursors, "next_ids": read.next_ids,
    }


def _list_dir(
    directory: str, world: int, problems: list[str], warnings: list[str], upstream: Collection[str] = (),
    links: Mapping[str, str] | None = None,
) -> set[str]:
    """Names of regular sidecar files present; extra/foreign/temp files become problems.

    ``upstream``: FastVideo's validation receipts, part of the set (checked on their own).
    ``links``: a checkpoint view's links (name -> the source entry each must point at), all required.
    """
    present = set()
    links = links or {}
    linked = set()
    with listing(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            kind = classify_entry(entry.name)
            if kind == "sidecar":
                rank = int(SIDECAR_RE.match(entry.name).group(1))  # type: ignore[union-attr]
                if entry.is_symlink():
                    problems.append(f"{entry.name}: is a symlink (sidecars must be regular files)")
                elif not entry.is_file(follow_symlinks=False):
                    # A FIFO would block every later open; a device would never end.
                    kind_text = file_kind(entry.stat(follow_symlinks=False).st_mode)
                    problems.append(f"{entry.name}: is {kind_text} (sidecars must be regular files)")
                elif rank >= world or entry.name != sidecar_name(rank):
                    problems.append(f"{entry.name}: extra sidecar (world size is {world})")
                else:
                    present.add(entry.name)
            elif kind == "temp":
                problems.append(f"{entry.name}: leftover temp file from an interrupted write")
            elif entry.name in links:
                linked.add(entry.name)
                target = os.readlink(os.path.join(directory, entry.name)) if entry.is_symlink() else None
                if target != links[entry.name]:
                    problems.append(f"{entry.name}: is not the checkpoint view's link to {links[entry.name]}")
            elif kind == "foreign" and entry.name not in upstream:
                problems.append(f"{entry.name}: foreign file in the sidecar dir")
    problems.extend(f"{name}: missing (the checkpoint view links every entry of its source)"
                    for name in sorted(set(links) - linked))
    parent = os.path.dirname(os.path.abspath(directory))
    pattern = staging_pattern(os.path.basename(os.path.abspath(directory)))
    with contextlib.suppress(OSError), listing(parent) as entries:
        for entry in entries:
            if pattern.match(entry.name):
                warnings.append(f"{os.path.join(parent, entry.name)}: staging leftover (a migration is running or crashed)")
    return present


def _verify_rank(
    directory: str, plan: MigrationPlan, cursor: Any, present: set[str], receipt_rows: dict[int, dict],
    torch_check: bool = False, read: _Read | None = None,
) -> dict:
    """One rank's row: file present, loads safely, payload equal, sha256 as in the receipt.

    The file is read once (bounded, regular files only); its hash and payload come from
    those bytes. ``torch_check`` also loads them with real torch (``weights_only=True``).
    """
    name = sidecar_name(cursor.rank)
    row: dict[str, Any] = {
        "rank": cursor.rank,
        "ok": False,
        "problems": [],
        "row_group_position": cursor.row_group_position,
        "row_offset": cursor.row_offset,
        "yielded_samples": cursor.yielded_samples,
        "next_sample_index": cursor.next_sample_index,
    }
    problems: list[str] = row["problems"]
    entry = receipt_rows.get(cursor.rank)
    if entry is None and receipt_rows:
        problems.append(f"{RECEIPT_NAME}: no entry for rank {cursor.rank}")
    if name not in present:
        problems.append(f"{name}: missing")
        return row
    path = os.path.join(directory, name)
    try:
        data = read_sidecar_bytes(path)
    except (OSError, FvError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).removeprefix(f"{path}: ")
        problems.append(f"{name}: unreadable ({reason})")
        return row
    digest = sha256_bytes(data)
    if read is not None:
        read.digests[cursor.rank] = digest
    if entry is not None:
        if entry.get("sha256") != digest:
            problems.append(f"{name}: sha256 {digest[:12]} does not match the receipt ({str(entry.get('sha256'))[:12]})")
        if entry.get("path") not in (name, path):
            problems.append(f"{RECEIPT_NAME}: rank {cursor.rank} path is {entry.get('path')!r}, expected {name!r}")
        for key in ("row_group_position", "row_offset", "yielded_samples"):
            if entry.get(key) != getattr(cursor, key):
                problems.append(f"{RECEIPT_NAME}: rank {cursor.rank} field '{key}' is {entry.get(key)!r}, expected {getattr(cursor, key)!r}")
    try:
        payload = decode_sidecar(data)
    except torch_zip.TorchFileError as exc:
        problems.append(f"{name}: refused: {exc}")
        return row
    state = payload.get("state") if isinstance(payload, dict) else None
    if read is not None and isinstance(state, dict):
        read.cursors[cursor.rank] = (state.get("row_group_position"), state.get("row_offset"))
    if torch_check:
        problems.extend(f"{name}: {p}" for p in _torch_check(data, payload))
    problems.extend(f"{name}: {d}" for d in diff_payload(payload, plan.sidecar_payload(cursor.rank)))
    row["ok"] = not problems
    return row


def _torch_check(data: bytes, payload: Any) -> list[str]:
    """What real torch (``weights_only=True``) reads differently from the torch-free reader."""
    try:
        loaded = torch_zip.load_with_torch(data)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a verification problem
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [f"refused by torch.load(weights_only=True): {first[:200]}"]
    if loaded != payload:
        return ["torch.load(weights_only=True) reads a different payload than the torch-free reader"]
    return []


