"""The id of the sample each rank reads next, read from the Parquet dataset (verify --deep).

An operator checks a migration by the next sample id; reading it costs one Parquet read
per distinct next row group, each file opened once and checked against the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.optional import MissingExtra, require
from fvconsole.core.shared.safe_read import open_regular, short_repr

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration.model import MigrationPlan


def add_next_sample_ids(plan: MigrationPlan, rows: list[dict], problems: list[str]) -> None:
    """Add ``next_sample_id`` to each ``{"rank": r, ...}`` row (verify --deep, the console).

    Reads only the row groups ranks read next, each distinct file once; read problems
    (including a Parquet file whose row groups disagree with the manifest, which would make
    every id wrong) are appended to ``problems`` rather than raised. Without pyarrow (the
    ``parquet`` extra) nothing is read: :class:`MissingExtra` names the extra to install.
    """
    from fvconsole.core.formats.manifest import load_manifest

    _parquet()

    manifest = load_manifest(plan.manifest_path)
    if manifest.fingerprint != plan.manifest_fingerprint:
        problems.append(f"deep check: {manifest.path}: field 'fingerprint' changed since the plan was made")
        for row in rows:
            row["next_sample_id"] = None
        return
    by_rank = {c.rank: c for c in plan.ranks}
    wanted = sorted({c.next_row_group for c in plan.ranks if c.next_row_group is not None and c.next_row_group >= 0})
    by_file: dict[int, list[int]] = {}
    for index in wanted:
        by_file.setdefault(manifest.file_index[index], []).append(index)
    # Every row group the manifest lists for those files, in one pass (not one per file).
    listed: dict[int, list[int]] = {k: [] for k in by_file}
    for i, k in enumerate(manifest.file_index):
        if k in listed:
            listed[k].append(i)
    columns: dict[int, Any] = {}
    failed: dict[int, str] = {}
    for file_k, indices in by_file.items():
        try:
            columns.update(_read_id_columns(manifest, file_k, indices, listed[file_k]))
        except Exception as exc:  # noqa: BLE001 - dataset read problems are reported, not raised
            reason = str(exc) if isinstance(exc, FvError) else f"{type(exc).__name__}: {exc}"
            message = f"deep check: {' '.join(reason.split())[:300]}"
            failed.update(dict.fromkeys(indices, message))
            if message not in problems:
                problems.append(message)
    for row in rows:
        cursor = by_rank[row["rank"]]
        index = cursor.next_row_group
        row["next_sample_id"] = None
        if index is None or index < 0 or index in failed:
            continue
        offset = cursor.next_sample_index - manifest.sample_starts[index]
        row["next_sample_id"] = _plain(columns[index][offset].as_py())


def _parquet() -> Any:
    """``pyarrow.parquet``, or MissingExtra naming the ``parquet`` extra."""
    return require("pyarrow.parquet", extra="parquet", purpose="reading next sample ids")


def _plain(value: Any) -> Any:
    """A JSON-ready id: scalars as they are, anything else (bytes, structs) as a short repr."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    return short_repr(value)


#: An id column chunk is a few dozen bytes per sample; one far larger is not decompressed.
MAX_ID_COLUMN_BYTES = 256 * 2**20


def _read_id_columns(manifest: Any, file_k: int, indices: Sequence[int], listed: Sequence[int]) -> dict[int, Any]:
    """The ``id`` column (or the first one) of manifest row groups ``indices``, all in file ``file_k``.

    The file is opened by us (non-blocking, regular files only: a FIFO or device in the
    dataset cannot hang or flood the read) and the open file handed to pyarrow. Its footer
    must agree with the manifest on every row group the manifest lists for this file
    (``listed``, manifest indices): a
    row group shorter or longer than the manifest says shifts every later sample, so the
    ids would be wrong. Raises FvError naming the file and row group.
    """
    pq = _parquet()
    path = os.path.join(manifest.dataset_root, manifest.file_names[file_k])
    out: dict[int, Any] = {}
    with open_regular(path, "Parquet file") as handle:
        pf = pq.ParquetFile(handle)
        meta = pf.metadata
        for i in listed:
            _check_row_group(path, meta, i, manifest.row_group_ids[i], manifest.rows[i])
        names = pf.schema_arrow.names
        if not names:
            raise FvError(f"{path}: Parquet file has no columns")
        column = "id" if "id" in names else names[0]
        for i in indices:
            group = manifest.row_group_ids[i]
            _check_column_size(path, meta.row_group(group), group, column)
            table = pf.read_row_group(group, columns=[column])
            if table.num_rows != manifest.rows[i]:
                raise FvError(
                    f"{path}: row group {group} read {plural(table.num_rows, 'row')} but the manifest says "
                    f"{manifest.rows[i]} (row_groups[{i}])"
                )
            out[i] = table.column(0)
    return out


def _check_row_group(path: str, meta: Any, index: int, group: int, rows: int) -> None:
    """The footer's row count of ``group`` equals the manifest's (row_groups[index])."""
    if not 0 <= group < meta.num_row_groups:
        raise FvError(
            f"{path}: row group {group} does not exist (the file has {meta.num_row_groups}; "
            f"manifest row_groups[{index}])"
        )
    actual = meta.row_group(group).num_rows
    if actual != rows:
        raise FvError(
            f"{path}: row group {group} has {plural(actual, 'row')} but the manifest says {rows} (row_groups[{index}]); "
            "the dataset changed since the manifest was built"
        )


def _check_column_size(path: str, group_meta: Any, group: int, column: str) -> None:
    """Refuse to decompress an id column chunk the footer says is absurdly large."""
    size = 0
    for j in range(group_meta.num_columns):
        chunk = group_meta.column(j)
        if chunk.path_in_schema == column or chunk.path_in_schema.startswith(column + "."):
            size += max(chunk.total_uncompressed_size, chunk.total_compressed_size)
    if size > MAX_ID_COLUMN_BYTES:
        raise FvError(f"{path}: row group {group} column {column!r} is {size} bytes (more than {MAX_ID_COLUMN_BYTES})")


# ----------------------------------------------------------------------------- the console's preview
#: More distinct next row groups than this are not read for a preview (each is a Parquet read).
MAX_NEXT_ID_ROW_GROUPS = 256


@dataclass(frozen=True)
class NextSampleIds:
    """Each rank's next sample id, where it could be read."""

    ids: dict[int, Any]  # rank -> id (None: the rank has no next sample, or its row group failed)
    row_groups_read: int
    #: Distinct row groups needed when there were too many to read (None: they were read).
    too_many_row_groups: int | None = None
    limit: int = MAX_NEXT_ID_ROW_GROUPS
    #: What kept ids from being read; without pyarrow, the one line naming the extra to install.
    problems: tuple[str, ...] = ()


def next_sample_ids(plan: MigrationPlan, max_row_groups: int = MAX_NEXT_ID_ROW_GROUPS) -> NextSampleIds:
    """Read the ``id`` of each rank's next sample: only the distinct next row groups, each once.

    The same reads as ``sidecars verify --deep`` (:func:`add_next_sample_ids`). Beyond
    ``max_row_groups`` distinct row groups nothing is read and ``too_many_row_groups`` says so;
    without pyarrow nothing is read and ``problems`` names the extra to install.
    """
    needed = {c.next_row_group for c in plan.ranks if c.next_row_group is not None and c.next_row_group >= 0}
    if len(needed) > max_row_groups:
        return NextSampleIds({}, 0, too_many_row_groups=len(needed), limit=max_row_groups)
    rows: list[dict] = [{"rank": c.rank} for c in plan.ranks]
    problems: list[str] = []
    try:
        add_next_sample_ids(plan, rows, problems)
    except MissingExtra as exc:
        return NextSampleIds({}, 0, limit=max_row_groups, problems=(exc.message,))
    return NextSampleIds({row["rank"]: row.get("next_sample_id") for row in rows}, len(needed),
                         limit=max_row_groups, problems=tuple(problems))
