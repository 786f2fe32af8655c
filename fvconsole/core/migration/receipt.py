"""The migration receipt: written last into a set (its commit marker), checked by verify.

docs/formats.md §3 lists the fields FastVideo's own migration writes; fvconsole adds its
extras beside them. Verification reads it bounded (regular files only, size and depth
capped) and compares its headline fields and per-rank rows with a recomputed plan.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from fvconsole.core.formats.sidecar_files import RECEIPT_NAME, SIDECAR_VERSION
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.safe_read import short_repr
from fvconsole.core.shared.untrusted import load_file

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration.model import MigrationPlan

RECEIPT_SCHEMA = "fastvideo-legacy-streaming-dataloader-migration/v1"
#: A receipt lists ~250 bytes per rank; this allows a million ranks and refuses /dev/zero.
MAX_RECEIPT_BYTES = 256 * 2**20


@dataclass(frozen=True)
class WrittenSidecar:
    """One sidecar as written into the staging dir: the receipt lists its sha256."""

    rank: int
    name: str
    sha256: str


def build_receipt(plan: MigrationPlan, written: Sequence[WrittenSidecar]) -> dict[str, Any]:
    """The docs/formats.md §3 receipt (all upstream fields) plus fvconsole extras."""
    from fvconsole import __version__

    by_rank = {c.rank: c for c in plan.ranks}
    sidecars = []
    for item in written:
        cursor = by_rank[item.rank]
        sidecars.append(
            {
                "rank": item.rank,
                "path": item.name,
                "sha256": item.sha256,
                "row_group_position": cursor.row_group_position,
                "row_offset": cursor.row_offset,
                "yielded_samples": cursor.yielded_samples,
            }
        )
    return {
        "schema": RECEIPT_SCHEMA,
        "created_at_utc": datetime.now(timezone.utc).isoformat(),
        "source_checkpoint": os.path.realpath(plan.checkpoint),
        "source_checkpoint_metadata_sha256": plan.checkpoint_metadata_sha256,
        "source_config": os.path.realpath(plan.config_path) if plan.config_path else None,
        "source_config_sha256": plan.config_sha256,
        "manifest": os.path.realpath(plan.manifest_path),
        "manifest_fingerprint": plan.manifest_fingerprint,
        "step": plan.step,
        "world_size": plan.world_size,
        "sp_world_size": plan.sp_world_size,
        "batch_size": plan.batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "consumed_batches_per_rank": plan.consumed_batches_per_rank,
        "yielded_samples_per_rank": plan.yielded_samples_per_rank,
        "sidecars": sidecars,
        # fvconsole extras (allowed by the format; the fields above must stay)
        "tool": "fvconsole",
        "fvconsole_version": __version__,
        "sidecar_version": SIDECAR_VERSION,
        "overrides": list(plan.request.overrides),
        "samples_per_worker": plan.samples_per_worker,
        "read_batch_size": plan.read_batch_size,
        "seed": plan.seed,
        "shuffle_row_groups": plan.shuffle_row_groups,
        "dataset_root": plan.dataset_root,
        "num_row_groups": plan.num_row_groups,
        "total_rows": plan.total_rows,
        "output_dir": os.path.abspath(plan.output_dir),
        # an elastic resume: source and target topology, the mode, its accounting (docs/formats.md §3)
        **({} if plan.reshard is None else {"reshard": plan.reshard.to_json()}),
        **({"linked_entries": [name for name, _target in plan.links]} if plan.links else {}),
    }


def receipt_bytes(receipt: Mapping[str, Any]) -> bytes:
    return (json.dumps(receipt, indent=2, sort_keys=True) + "\n").encode("utf-8")


#: Slack on the receipt's planned size: its creation time is written with or without microseconds.
RECEIPT_SLACK = 64


def set_files(plan: MigrationPlan) -> tuple[tuple[str, int], ...]:
    """(name, bytes) of every file of the set ``plan`` writes, known before any is written (the room
    the dry run and execution ask for): the encoded sidecars, the receipt (a sha256 is always 64 hex
    digits) and a checkpoint view's symlinks (an inode each, and their target's length)."""
    sidecars = plan.encoded_sidecars.sizes()
    placeholder = [WrittenSidecar(rank, name, "0" * 64) for rank, name, _ in sidecars]
    receipt = len(receipt_bytes(build_receipt(plan, placeholder))) + RECEIPT_SLACK
    links = ((name, len(os.fsencode(target))) for name, target in plan.links)
    return (*((name, size) for _, name, size in sidecars), (RECEIPT_NAME, receipt), *links)


def check_receipt(directory: str, plan: MigrationPlan, problems: list[str]) -> dict[int, dict]:
    """Receipt presence, schema and headline fields; returns its sidecar rows by rank."""
    path = os.path.join(directory, RECEIPT_NAME)
    try:
        # Bounded: regular files only (a FIFO or /dev/zero symlink is refused), size and depth capped.
        receipt = load_file(path, "receipt", MAX_RECEIPT_BYTES)
    except FileNotFoundError:
        problems.append(f"{RECEIPT_NAME}: missing")
        return {}
    except OSError as exc:
        problems.append(f"{RECEIPT_NAME}: unreadable ({exc.strerror or exc})")
        return {}
    except FvError as exc:
        problems.append(str(exc))
        return {}
    if not isinstance(receipt, dict):
        problems.append(f"{RECEIPT_NAME}: not a JSON object")
        return {}
    expect = {
        "schema": RECEIPT_SCHEMA,
        "step": plan.step,
        "world_size": plan.world_size,
        "sp_world_size": plan.sp_world_size,
        "manifest_fingerprint": plan.manifest_fingerprint,
        "source_checkpoint_metadata_sha256": plan.checkpoint_metadata_sha256,
        "yielded_samples_per_rank": plan.yielded_samples_per_rank,
    }
    for key, want in expect.items():
        if receipt.get(key) != want:
            problems.append(f"{RECEIPT_NAME}: field '{key}' is {short_repr(receipt.get(key))}, expected {want!r}")
    rows: dict[int, dict] = {}
    sidecars = receipt.get("sidecars")
    if not isinstance(sidecars, list):
        problems.append(f"{RECEIPT_NAME}: field 'sidecars' missing or not a list")
        return rows
    for item in sidecars:
        if isinstance(item, dict) and isinstance(item.get("rank"), int):
            rows[item["rank"]] = item
        else:
            problems.append(f"{RECEIPT_NAME}: field 'sidecars' has a malformed entry")
    extra = sorted(set(rows) - {c.rank for c in plan.ranks})
    if extra:
        shown = ", ".join(short_repr(rank) for rank in extra[:5])
        problems.append(f"{RECEIPT_NAME}: field 'sidecars' lists ranks outside the world size: [{shown}]")
    return rows


def receipt_reshard_mode(directory: str) -> str | None:
    """The reshard mode a set's receipt records (None: no receipt, unreadable, or not a reshard).

    Verification recomputes a resharded set with the mode it was written with; an unreadable
    receipt is reported by :func:`check_receipt`.
    """
    try:
        receipt = load_file(os.path.join(directory, RECEIPT_NAME), "receipt", MAX_RECEIPT_BYTES)
    except (OSError, FvError):
        return None
    reshard = receipt.get("reshard") if isinstance(receipt, dict) else None
    mode = reshard.get("mode") if isinstance(reshard, dict) else None
    return mode if isinstance(mode, str) else None

