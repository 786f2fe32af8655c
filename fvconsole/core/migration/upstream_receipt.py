"""FastVideo's own validation receipt: proof that its loader resumed from a sidecar set.

FastVideo's ``scripts/train/validate_streaming_dataloader_sidecars.py`` loads every rank's
sidecar in the real loader under the real process topology, checks that each rank resumes at
the sample its cursor names, and writes (rank 0, to the path given by ``--output``: the script
has no default name) a JSON receipt with ``"schema":
"fastvideo-streaming-dataloader-sidecar-validation/v1"`` (docs/formats.md §3). Such a file in a
sidecar dir is part of the set, not foreign; ``sidecars verify`` checks that it still holds for
the files as they are now: a sidecar rewritten, a config edited or a checkpoint re-saved after
the validation makes the receipt say nothing any more, and verification fails naming the rank.

Finding one reads only ``*.json`` regular files in the dir, each bounded (``core.shared.untrusted``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.formats.sidecar_files import RECEIPT_NAME, SIDECAR_RE, sidecar_name
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.safe_read import short_repr
from fvconsole.core.shared.untrusted import INT64_MAX, Fields, load_file
from fvconsole.core.shared.walk import listing

UPSTREAM_SCHEMA = "fastvideo-streaming-dataloader-sidecar-validation/v1"
#: The receipt holds ~300 bytes per rank (sorted keys, indent 2); this allows 100k ranks.
MAX_UPSTREAM_RECEIPT_BYTES = 32 * 2**20
_SHA256_LEN = 64


@dataclass(frozen=True)
class UpstreamValidation:
    """Whether FastVideo's validation receipt still holds for the sidecar set as it is now.

    ``ranks``: how many ranks the receipt says were validated; ``problems`` name the rank or
    the field that no longer matches; ``warnings``: paths recorded elsewhere (a moved set).
    """

    ok: bool
    path: str
    created_at_utc: str | None
    ranks: int
    problems: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        """One line for the CLI and the console: where it holds, on how many ranks, when."""
        if self.ok:
            return (f"validated in FastVideo's loader on {plural(self.ranks, 'rank')} at "
                    f"{self.created_at_utc or 'an unrecorded time'}")
        return f"FastVideo's validation receipt no longer holds ({plural(len(self.problems), 'problem')})"

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


def _candidate(entry: os.DirEntry[str]) -> bool:
    """A regular ``*.json`` file (never a symlink) that is not our own receipt or a temp file."""
    if not entry.name.endswith(".json") or entry.name == RECEIPT_NAME or entry.name.startswith("."):
        return False
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_UPSTREAM_RECEIPT_BYTES


def is_upstream_receipt(path: str) -> bool:
    """True when ``path`` is a JSON object whose ``schema`` is FastVideo's validation receipt's."""
    try:
        doc = load_file(path, "FastVideo validation receipt", MAX_UPSTREAM_RECEIPT_BYTES)
    except (OSError, FvError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == UPSTREAM_SCHEMA


def find_upstream_receipts(directory: str) -> tuple[str, ...]:
    """Names of the FastVideo validation receipts directly in ``directory`` (sorted)."""
    try:
        with listing(directory) as entries:
            names = [e.name for e in entries if _candidate(e)]
    except OSError:
        return ()
    return tuple(sorted(n for n in names if is_upstream_receipt(os.path.join(directory, n))))


def named_sidecar_dirs(directory: str, limit: int) -> tuple[tuple[str, ...], bool]:
    """The ``sidecar_dir`` each FastVideo validation receipt directly in ``directory`` names (each
    read once, bounded, through the untrusted-document door), at most ``limit`` receipts read; and
    whether the limit was reached before every candidate was read."""
    try:
        with listing(directory) as entries:
            names = sorted(e.name for e in entries if _candidate(e))
    except OSError:
        return (), False
    found: list[str] = []
    for name in names[:limit]:
        try:
            doc = load_file(os.path.join(directory, name), "FastVideo validation receipt", MAX_UPSTREAM_RECEIPT_BYTES)
        except (OSError, FvError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == UPSTREAM_SCHEMA:
            named = doc.get("sidecar_dir")
            if isinstance(named, str) and named and "\0" not in named and len(named) <= 4096:
                found.append(named)
    return tuple(found), len(names) > limit


def check_upstream_receipt(
    path: str,
    *,
    step: int,
    world_size: int,
    config_sha256: str,
    checkpoint_metadata_sha256: str,
    sidecar_sha256: dict[int, str | None],
    sidecar_dir: str = "",
    checkpoint: str = "",
    config: str = "",
    sidecar_cursors: Mapping[int, tuple[Any, Any]] | None = None,
    next_ids: Mapping[int, Any] | None = None,
) -> UpstreamValidation:
    """Compare the receipt at ``path`` with the files as they are now.

    ``sidecar_sha256``: each rank's current sidecar digest (None: missing or unreadable).
    ``sidecar_cursors``: each rank's (row_group_position, row_offset) as its sidecar holds them;
    ``next_ids``: each rank's next sample id read from the dataset (``--deep``; None: not read).
    A rank whose sidecar is the one validated (same sha256) must also be where the receipt
    says the loader resumed: a receipt that contradicts the file it vouches for is a problem.
    The receipt's recorded paths are absolute and resolved; a difference is only a warning
    (the set may have been moved), the hashes are what must match.
    """
    problems: list[str] = []
    warnings: list[str] = []
    try:
        doc = load_file(path, "FastVideo validation receipt", MAX_UPSTREAM_RECEIPT_BYTES)
        f = Fields(doc, path, "FastVideo validation receipt")
        if f.str("schema") != UPSTREAM_SCHEMA:
            f.fail("schema", f"is not {UPSTREAM_SCHEMA!r}")
        created = f.str("created_at_utc", None, max_len=64)
        got_step = f.int("step", max=INT64_MAX)
        got_world = f.int("world_size", min=1, max=2**31 - 1)
        got_config_sha = f.str("config_sha256", max_len=_SHA256_LEN)
        got_meta_sha = f.str("checkpoint_metadata_sha256", max_len=_SHA256_LEN)
        results = f.list("results")
        recorded = {key: f.str(key, "", max_len=4096) for key in ("sidecar_dir", "checkpoint", "config")}
    except OSError as exc:
        return UpstreamValidation(False, path, None, 0, (f"{path}: unreadable ({exc.strerror or exc})",))
    except FvError as exc:  # UntrustedError included: one line naming the file and field
        return UpstreamValidation(False, path, None, 0, (str(exc),))
    if got_step != step:
        problems.append(f"step is {got_step}, the checkpoint's is {step}")
    if got_world != world_size:
        problems.append(f"world_size is {got_world}, the run's is {world_size}")
    if got_config_sha != config_sha256:
        problems.append(f"config_sha256 {got_config_sha[:12]} is not the run config's now ({config_sha256[:12]}): "
                        "the config changed since the validation")
    if got_meta_sha != checkpoint_metadata_sha256:
        problems.append(f"checkpoint_metadata_sha256 {got_meta_sha[:12]} is not the checkpoint's metadata.json "
                        f"now ({checkpoint_metadata_sha256[:12]})")
    by_rank = _results_by_rank(results, path, problems)
    for rank in range(world_size):
        row = by_rank.get(rank)
        name = sidecar_name(rank)
        if row is None:
            problems.append(f"rank {rank}: not validated (no result for it)")
            continue
        if row.get("sidecar") != name:
            problems.append(f"rank {rank}: validated {short_repr(row.get('sidecar'))}, not {name}")
        current = sidecar_sha256.get(rank)
        recorded_sha = row.get("sidecar_sha256")
        if current is None:
            problems.append(f"rank {rank}: {name} is missing or unreadable now")
        elif recorded_sha != current:
            shown = recorded_sha[:12] if isinstance(recorded_sha, str) else short_repr(recorded_sha)
            problems.append(f"rank {rank}: {name} sha256 {current[:12]} is not the one validated ({shown}): "
                            "the sidecar changed since FastVideo's validation")
        else:
            problems.extend(f"rank {rank}: {p}" for p in _contradictions(row, name, (sidecar_cursors or {}).get(rank),
                                                                         next_ids, rank))
    for rank in sorted(r for r in by_rank if r >= world_size):
        problems.append(f"rank {rank}: validated, but the run has {plural(world_size, 'rank')}")
    for key, now in (("sidecar_dir", sidecar_dir), ("checkpoint", checkpoint), ("config", config)):
        if now and recorded[key] and os.path.realpath(now) != recorded[key]:
            warnings.append(f"{path}: {key} was {recorded[key]} when validated, now {os.path.realpath(now)}")
    return UpstreamValidation(not problems, path, created, len(by_rank), tuple(problems), tuple(warnings))


def _contradictions(row: dict[str, Any], name: str, cursor: tuple[Any, Any] | None,
                    next_ids: Mapping[int, Any] | None, rank: int) -> list[str]:
    """Where one rank's validated row disagrees with the sidecar it names (and, read, the dataset)."""
    out = []
    for key, held in zip(("row_group_position", "row_offset"), cursor or (None, None), strict=True):
        recorded = row.get(key)
        if type(recorded) is not int or not 0 <= recorded <= INT64_MAX:
            out.append(f"the receipt's {key} {short_repr(recorded)} is not a position")
        elif cursor is not None and recorded != held:
            out.append(f"the receipt records {key} {recorded}, but {name}, the sidecar it validated, holds "
                       f"{short_repr(held)}: the receipt contradicts the file it vouches for")
    if next_ids is not None and next_ids.get(rank) is not None and row.get("next_id") != next_ids[rank]:
        out.append(f"the receipt records next_id {short_repr(row.get('next_id'))}, but {name} resumes at "
                   f"{short_repr(next_ids[rank])} in the dataset: the receipt contradicts the file it vouches for")
    return out


def _results_by_rank(results: list[Any], path: str, problems: list[str]) -> dict[int, dict[str, Any]]:
    """The receipt's ``results`` rows by rank; malformed or duplicate rows become problems."""
    out: dict[int, dict[str, Any]] = {}
    for index, row in enumerate(results):
        rank = row.get("rank") if isinstance(row, dict) else None
        if type(rank) is not int or rank < 0:
            problems.append(f"{path}: results[{index}] has no valid 'rank'")
            continue
        if rank in out:
            problems.append(f"rank {rank}: listed twice in results")
            continue
        sidecar = row.get("sidecar")
        if isinstance(sidecar, str) and not SIDECAR_RE.match(sidecar):
            problems.append(f"rank {rank}: sidecar {short_repr(sidecar)} is not a sidecar file name")
        out[rank] = row
    return out
