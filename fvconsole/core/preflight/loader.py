"""The *dataloader* check: for every target rank, the state FastVideo will load, and whether it takes it.

FastVideo's ``_resolve_dataloader_snapshot`` (docs/formats.md §3): the checkpoint's own
``dataloader_state_rank<r>.pt``, else the override dir's (``FASTVIDEO_DATALOADER_STATE_DIR``,
where a missing file is its ``FileNotFoundError``), else at world size 1 the legacy DCP key
``dataloader``, else its refusal of multi-rank legacy state. Then ``_load_dataloader_snapshot``
compares ``version``, ``rank``, ``world_size`` and ``step`` (the directory name's) with its own
and takes ``state_kind`` ``dataloader`` or ``dataset``; the streaming dataset compares the
state's version, fingerprint (the *dataset* check) and topology with the live loader's, and
reads on from the cursor, which must leave its shard the samples its epoch still needs.
Sidecars are read by the torch-free reader; ranks sharing a finding fold into one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.formats import streaming, torch_zip
from fvconsole.core.formats.sidecar_files import (
    RECEIPT_NAME,
    SIDECAR_VERSION,
    decode_sidecar,
    read_sidecar_bytes,
    sidecar_name,
)
from fvconsole.core.migration.source_state import dataset_state_of
from fvconsole.core.preflight.model import Check, Status, per_rank
from fvconsole.core.preflight.request import STATE_DIR_ENV
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.walk import listing

Finding = tuple[Status, str, str | None]


@dataclass(frozen=True)
class LiveLoader:
    """The streaming loader the next job builds: its topology per rank and its shards (None: unknown)."""

    world_size: int
    sp_size: int
    batch_size: int
    read_batch_size: int
    seed: int
    shuffle: bool
    num_workers: int
    rows: Sequence[int] | None
    shards: list[range] | None = None
    samples_per_worker: int | None = None

    def topology(self, rank: int) -> dict[str, Any] | None:
        """The streaming dataset's ``_resume_topology()`` on ``rank`` (None: the manifest is not known)."""
        if self.samples_per_worker is None:
            return None
        return {"global_rank": rank, "world_size": self.world_size, "sp_world_size": self.sp_size,
                "sp_group_index": rank // self.sp_size, "num_workers": self.num_workers,
                "batch_size": self.batch_size, "read_batch_size": self.read_batch_size, "seed": self.seed,
                "shuffle_row_groups": self.shuffle, "samples_per_worker": self.samples_per_worker}


def live_loader(world: int, sp: int, batch: int, read_batch: int, seed: int, shuffle: bool, workers: int,
                rows: Sequence[int] | None) -> LiveLoader:
    """The live loader, its shards laid out once over the predicted manifest's rows."""
    num_workers = max(workers, 1)
    if rows is None or world % sp:
        return LiveLoader(world, sp, batch, read_batch, seed, shuffle, num_workers, rows)
    shards = streaming.contiguous_shards(rows, world // sp * num_workers)
    spw = streaming.samples_per_worker([sum(rows[i] for i in s) for s in shards], batch)
    return LiveLoader(world, sp, batch, read_batch, seed, shuffle, num_workers, rows, shards, spw)


@dataclass
class LoaderFindings:
    """What the check found: folded lines, and each rank's state fingerprint for the dataset check."""

    checks: list[Check] = field(default_factory=list)
    fingerprints: dict[int, str | None] = field(default_factory=dict)
    #: The dir the sidecars were read from that holds an fvconsole receipt (None: none).
    set_dir: str | None = None


class _Suffixes:
    """Samples left in a shard's read order from a cursor: one suffix sum per (group, epoch), made once."""

    def __init__(self, live: LiveLoader) -> None:
        self.live = live
        self.cache: dict[tuple[int, int], tuple[list[int], list[int]]] = {}

    def left(self, group: int, epoch: int, position: int, offset: int) -> int:
        key = (group, epoch)
        if key not in self.cache:
            live = self.live
            assert live.shards is not None and live.rows is not None
            order = streaming.shard_order(live.shards[group * live.num_workers], live.seed, epoch, live.shuffle)
            rows = [live.rows[i] for i in order]
            suffix = [0] * (len(rows) + 1)
            for i in range(len(rows) - 1, -1, -1):
                suffix[i] = suffix[i + 1] + rows[i]
            self.cache[key] = (rows, suffix)
        rows, suffix = self.cache[key]
        if position >= len(rows):
            return 0
        return max(rows[position] - offset, 0) + suffix[position + 1]


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _topology_diff(found: Any, want: Mapping[str, Any]) -> str:
    if not isinstance(found, Mapping):
        return "no topology"
    diffs = [f"{k} {found.get(k)!r} -> {want[k]!r}" for k in want if found.get(k) != want[k]
             and k not in ("global_rank", "sp_group_index")]
    extra = [k for k in found if k not in want]
    return ", ".join(diffs[:4] + [f"extra {k!r}" for k in extra[:2]]) or "global_rank/sp_group_index"


def _judge(payload: Any, shown: str, rank: int, world: int, step: int, live: LiveLoader,
           suffixes: _Suffixes | None, reshard_fix: str | None) -> tuple[Finding, str | None]:
    """One rank's loaded sidecar as FastVideo takes it: (finding, its state's fingerprint)."""
    if not isinstance(payload, Mapping):
        return ("fail", f"{shown}: not a dict (FastVideo: 'Invalid dataloader state payload')", None), None
    for name, want in (("version", SIDECAR_VERSION), ("rank", rank), ("world_size", world), ("step", step)):
        got = payload.get(name)
        if got != want:
            said = "names another rank" if name == "rank" and isinstance(got, int) else f"is {got!r}, expected {want!r}"
            fix = reshard_fix if name == "world_size" else None
            return ("fail", f"{shown}: field '{name}' {said} (FastVideo: 'Dataloader state {name} mismatch')",
                    fix), None
    kind = payload.get("state_kind")
    if not isinstance(payload.get("state"), Mapping):
        return ("fail", f"{shown}: field 'state' is not a dict", None), None
    if kind not in ("dataloader", "dataset"):
        return ("fail", f"{shown}: field 'state_kind' is {kind!r} (FastVideo: 'Unsupported dataloader "
                "state_kind')", None), None
    state = dataset_state_of(kind, payload["state"])
    if not isinstance(state, Mapping):
        return ("fail", f"{shown}: no streaming dataset state in its {kind!r} state", None), None
    fingerprint = state.get("manifest_fingerprint")
    fingerprint = fingerprint if isinstance(fingerprint, str) else repr(fingerprint)
    if state.get("version") != streaming.STATE_VERSION or isinstance(state.get("version"), bool):
        return ("fail", f"{shown}: field 'state.version' is {state.get('version')!r}, expected "
                f"{streaming.STATE_VERSION} ('unsupported streaming dataset state')", None), fingerprint
    want = live.topology(rank)
    if want is not None and state.get("topology") != want:
        return ("fail", f"{shown}: 'streaming loader topology or sampling config changed' "
                f"({_topology_diff(state.get('topology'), want)})", reshard_fix), fingerprint
    if state.get("worker_id", 0) != 0:
        return ("fail", f"{shown}: field 'state.worker_id' is {state.get('worker_id')!r}, not worker 0", None), \
            fingerprint
    values = [state.get(k) for k in ("epoch", "row_group_position", "row_offset", "yielded_samples")]
    if not all(_whole(v) for v in values):
        return ("fail", f"{shown}: epoch, row_group_position, row_offset and yielded_samples must be whole "
                "numbers", None), fingerprint
    epoch, position, offset, yielded = values
    if want is None or suffixes is None or live.samples_per_worker is None:
        return ("ok", f"{shown}: version, rank, world size and step match (topology not checked: the "
                "manifest is not known)", None), fingerprint
    need = live.samples_per_worker - yielded
    if need > 0:
        left = suffixes.left(rank // live.sp_size, epoch, position, offset)
        if left < need:
            return ("fail", f"{shown}: the cursor (row_group_position {position}, row_offset {offset}) leaves "
                    f"{left} samples of its shard, fewer than the {need} of its epoch ('Streaming shard ended')",
                    None), fingerprint
    return ("ok", f"{shown}: version, rank, world size, step and topology match; the cursor is within its shard",
            None), fingerprint


def regular_files(directory: str) -> set[str]:
    """The regular files directly in ``directory`` (FastVideo's ``is_file()``: symlinks followed):
    the checkpoint's own files and the override dir's, which FastVideo looks up the same way."""
    names: set[str] = set()
    with listing(directory) as entries:
        for entry in entries:
            try:
                if entry.is_file():
                    names.add(entry.name)
            except OSError:
                continue
    return names


def _override_names(override: str | None) -> set[str]:
    """The override dir's regular files; none when no dir is given or it is not a directory."""
    if override is None or not os.path.isdir(override):
        return set()
    return regular_files(override)


def check_loader(checkpoint: str, own: set[str], step: int, world: int, live: LiveLoader, override: str | None,
                 dcp_keys: Sequence[str] | None, migrate_fix: str, reshard_fix: str | None) -> LoaderFindings:
    """Every target rank's dataloader state, resolved, read and judged; folded into lines.

    ``own``: the regular files of the checkpoint dir; ``override``: the override dir FastVideo will
    have (expanded and resolved, as it resolves it), None without one.
    """
    found = LoaderFindings()
    findings: dict[Finding, list[int]] = {}
    in_override = _override_names(override)
    suffixes = _Suffixes(live) if live.shards is not None else None
    legacy = dcp_keys is not None and any(k == "dataloader" or k.startswith("dataloader.") for k in dcp_keys)
    for rank in range(world):
        name = sidecar_name(rank)
        if name in own:
            path, where = os.path.join(checkpoint, name), checkpoint
        elif override is not None:
            if name not in in_override:
                key: Finding = ("fail", f"{STATE_DIR_ENV} is set, but the rank's state is missing: "
                                f"{override}/dataloader_state_rank<r>.pt", migrate_fix)
                findings.setdefault(key, []).append(rank)
                continue
            path, where = os.path.join(override, name), override
        elif world == 1:
            key = (("ok", "the legacy DCP key 'dataloader' (world size 1 reads it from dcp/)", None) if legacy else
                   ("fail", f"{checkpoint}: no dataloader_state_rank0.pt and no 'dataloader' key in dcp/", None))
            findings.setdefault(key, []).append(rank)
            continue
        else:
            key = ("fail", f"{checkpoint} has no dataloader_state_rank<r>.pt and no {STATE_DIR_ENV} is given: "
                   "FastVideo refuses legacy multi-rank DCP dataloader state", migrate_fix)
            findings.setdefault(key, []).append(rank)
            continue
        shown = f"{where}/dataloader_state_rank<r>.pt"
        if found.set_dir is None and os.path.isfile(os.path.join(where, RECEIPT_NAME)):
            found.set_dir = where
        try:
            payload = decode_sidecar(read_sidecar_bytes(path))
        except OSError as exc:
            key, fingerprint = ("fail", f"{shown}: cannot read ({exc.strerror or exc})", None), None
        except (FvError, torch_zip.TorchFileError) as exc:
            why = str(exc).removeprefix(path + ": ")
            key, fingerprint = ("fail", f"{shown}: unreadable ({why})", None), None
        else:
            key, fingerprint = _judge(payload, shown, rank, world, step, live, suffixes, reshard_fix)
        findings.setdefault(key, []).append(rank)
        found.fingerprints[rank] = fingerprint
    found.checks = per_rank("dataloader", findings)
    return found
