"""What FastVideo's streaming loader will do at resume with the manifest's ``columns``.

FastVideo keeps the manifest only while its ``columns`` equal the run's projection
(``training.data.preprocessed_data_type``, :mod:`fvconsole.core.formats.parquet_columns`), as lists;
otherwise it rebuilds it: it lists every ``*.parquet`` under the dataset root (``os.walk``,
realpaths, sorted), reads each footer, fails on the first file that lacks a projected column,
and writes row groups from the footers and ``os.stat``. The fingerprint hashes the row groups
alone, so it is unchanged when they are, and the migrated sidecars (which carry it) still load.

So the preview says one of: the columns match; FastVideo will rebuild the manifest at resume
(fingerprint unchanged); a Parquet file lacks a projected column (FastVideo's loader will
fail: a refusal); the rebuild changes the fingerprint (the sidecars would be refused at resume:
a refusal); or, without pyarrow or past a bound, that it could not tell. Footers are read
only when the columns differ, never row data (docs/formats.md §4).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from fvconsole.core.formats.manifest import MAX_EXAMPLES, Manifest, compute_fingerprint
from fvconsole.core.formats.parquet_columns import TYPE_PATH, DataType
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import real
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.optional import MissingExtra, require
from fvconsole.core.shared.progress import Progress, no_progress
from fvconsole.core.shared.safe_read import open_regular
from fvconsole.core.shared.walk import find_files

Verdict = Literal["match", "rebuild", "fail", "fingerprint-changes", "not-checked"]
#: A Parquet footer (its schema and row-group metadata) larger than this is not read.
MAX_FOOTER_BYTES = 64 * 2**20
_MAGIC = b"PAR1"


@dataclass(frozen=True)
class ColumnCheck:
    """The verdict, the sentence that says it, and what it rests on."""

    verdict: Verdict
    data_type: str
    defaulted: bool  # the run config does not set the key: FastVideo's default
    expected: tuple[str, ...]
    manifest_columns: Any  # the manifest's ``columns`` as written (None: absent)
    message: str
    footers_read: int = 0
    #: (file, the projected columns it lacks), the first MAX_EXAMPLES; ``lacking_files`` counts them all.
    lacking: tuple[tuple[str, tuple[str, ...]], ...] = ()
    lacking_files: int = 0
    #: The fingerprint the rebuilt manifest would have (None: no rebuild predicted).
    rebuilt_fingerprint: str | None = None
    #: The rows of each row group the rebuilt manifest would list, in order (empty: no rebuild predicted).
    rebuilt_rows: tuple[int, ...] = ()

    @property
    def refuses(self) -> bool:
        """FastVideo cannot resume with sidecars written now."""
        return self.verdict in ("fail", "fingerprint-changes")

    def to_json(self) -> dict[str, Any]:
        return {
            "preprocessed_data_type": self.data_type,
            "defaulted": self.defaulted,
            "verdict": self.verdict,
            "message": self.message,
            "expected_columns": list(self.expected),
            "manifest_columns": self.manifest_columns,
            "parquet_footers_read": self.footers_read,
            "lacking": [{"file": f, "columns": list(c)} for f, c in self.lacking],
            "lacking_files": self.lacking_files,
            "rebuilt_fingerprint": self.rebuilt_fingerprint,
        }


def type_words(dtype: DataType) -> str:
    """``'t2v'``, and that it is FastVideo's default when the run config does not set it."""
    return f"{dtype.name!r}" + (f" ({TYPE_PATH} not set: FastVideo's default)" if dtype.defaulted else "")


def check_columns(manifest: Manifest, dtype: DataType, progress: Progress | None = None) -> ColumnCheck:
    """Which of the five outcomes applies to ``manifest`` under ``dtype`` (reads footers only on a mismatch)."""
    expected = dtype.columns
    base = {"data_type": dtype.name, "defaulted": dtype.defaulted, "expected": expected,
            "manifest_columns": manifest.columns}
    if manifest.columns == list(expected):
        return ColumnCheck("match", message=f"columns match: the manifest's are the {len(expected)} of "
                           f"{type_words(dtype)}", **base)
    return predict_rescan(manifest.dataset_root, dtype, manifest,
                          f"the manifest's columns are not those of {type_words(dtype)}", progress)


def predict_rescan(root: str, dtype: DataType, manifest: Manifest | None, differ: str,
                   progress: Progress | None = None) -> ColumnCheck:
    """FastVideo's rescan of ``root`` when it will not reuse ``manifest`` (``differ`` says why; None:
    there is none): the first failure it meets, or the row groups and the fingerprint it would write."""
    expected = dtype.columns
    base = {"data_type": dtype.name, "defaulted": dtype.defaulted, "expected": expected,
            "manifest_columns": None if manifest is None else manifest.columns}
    try:
        pq = require("pyarrow.parquet", extra="parquet", purpose="reading Parquet footers")
    except MissingExtra as exc:
        return ColumnCheck("not-checked", message=f"{differ}: FastVideo will rebuild the manifest at resume; "
                           f"whether every Parquet file has them was not checked ({exc})", **base)
    found = find_files(root, ".parquet")
    if not found.complete:
        return ColumnCheck("not-checked", message=f"{differ}: FastVideo will rebuild the manifest at resume; "
                           f"whether every Parquet file has them was not checked ({root}: {found.note})", **base)
    files = sorted(real(p) for p in found.paths)
    if not files:
        return ColumnCheck("fail", message=f"{differ}, and there is no Parquet file under {root}: FastVideo's "
                           "rebuild of the manifest at resume will fail", **base)
    return _rebuild(pq, root, manifest, files, expected, differ, base, progress or no_progress)


def _rebuild(pq: Any, root: str, manifest: Manifest | None, files: list[str], expected: tuple[str, ...],
             differ: str, base: dict[str, Any], progress: Progress) -> ColumnCheck:
    """FastVideo's rescan, from footers: the first failure it meets, or the row groups it would write."""
    row_groups: list[dict[str, Any]] = []
    lacking: list[tuple[str, tuple[str, ...]]] = []
    lacking_files = 0
    sample_start = 0
    for done, path in enumerate(files):
        progress(done, len(files), "reading Parquet footers")
        try:
            st = os.stat(path)
            names, counts = _footer(pq, path)
        except _TooLarge as exc:
            return ColumnCheck("not-checked", footers_read=done, message=f"{differ}: FastVideo will rebuild the "
                               f"manifest at resume; not every footer was read ({exc})", **base)
        except (OSError, FvError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return ColumnCheck("fail", footers_read=done, message=f"Parquet file {path} cannot be read ({why}): "
                               "FastVideo's rebuild of the manifest at resume will fail", **base)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged footer
            return ColumnCheck("fail", footers_read=done, message=f"Parquet file {path} cannot be read "
                               f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}): FastVideo's rebuild "
                               "of the manifest at resume will fail", **base)
        missing = tuple(sorted(set(expected) - set(names)))
        if missing:
            lacking_files += 1
            if len(lacking) < MAX_EXAMPLES:
                lacking.append((path, missing))
            continue
        rel = os.path.relpath(path, root)
        for index, rows in enumerate(counts):
            row_groups.append({"file": rel, "row_group": index, "rows": rows, "sample_start": sample_start,
                               "file_size": st.st_size, "file_mtime_ns": st.st_mtime_ns})
            sample_start += rows
    progress(len(files), len(files), "reading Parquet footers")
    read = len(files)
    if lacking:
        (first, columns), more = lacking[0], lacking_files - 1
        shown = ", ".join(columns[:MAX_EXAMPLES]) + (f" (+{len(columns) - MAX_EXAMPLES} more)"
                                                    if len(columns) > MAX_EXAMPLES else "")
        named = "projected column" if len(columns) == 1 else "projected columns"
        also = f" (projected columns are missing from {plural(more, 'more Parquet file')} too)" if more else ""
        return ColumnCheck("fail", footers_read=read, lacking=tuple(lacking), lacking_files=lacking_files,
                           message=f"Parquet file {first} lacks {named} {shown}: FastVideo's loader will fail{also}",
                           **base)
    fingerprint = compute_fingerprint(row_groups)
    if manifest is not None and fingerprint != manifest.fingerprint:
        return ColumnCheck("fingerprint-changes", footers_read=read, rebuilt_fingerprint=fingerprint,
                           rebuilt_rows=tuple(g["rows"] for g in row_groups),
                           message=f"{differ}: FastVideo will rebuild the manifest at resume and its fingerprint "
                           f"will change ({_what_changed(manifest, row_groups)}), so it will refuse the migrated "
                           "sidecars", **base)
    unchanged = "fingerprint unchanged; " if manifest is not None else ""
    return ColumnCheck("rebuild", footers_read=read, rebuilt_fingerprint=fingerprint,
                       rebuilt_rows=tuple(g["rows"] for g in row_groups),
                       message=f"{differ}: FastVideo will rebuild the manifest at resume ({unchanged}"
                       f"{plural(read, 'Parquet footer')} read)", **base)


class _TooLarge(FvError):
    """A footer over :data:`MAX_FOOTER_BYTES`: fvconsole does not read it (FastVideo would)."""


def _footer(pq: Any, path: str) -> tuple[list[str], list[int]]:
    """The column names and per-row-group row counts of one Parquet file, from its footer alone."""
    with open_regular(path, "Parquet file") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 12:
            raise FvError(f"{path}: not a Parquet file ({plural(size, 'byte')})")
        handle.seek(size - 8)
        tail = handle.read(8)
        if tail[4:] != _MAGIC:
            raise FvError(f"{path}: not a Parquet file (no PAR1 at its end)")
        length = int.from_bytes(tail[:4], "little")
        if length > MAX_FOOTER_BYTES:
            raise _TooLarge(f"{path}: Parquet footer of {length} bytes is over {MAX_FOOTER_BYTES}")
        handle.seek(0)
        parquet = pq.ParquetFile(handle)
        meta = parquet.metadata
        return list(parquet.schema_arrow.names), [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def _what_changed(manifest: Manifest, row_groups: list[dict[str, Any]]) -> str:
    """Why the rebuilt row groups differ: files added or gone under the root, else their row groups."""
    listed = list(dict.fromkeys(g["file"] for g in row_groups))
    known, rescanned = set(manifest.file_names), set(listed)
    added = [f for f in listed if f not in known]
    gone = [f for f in manifest.file_names if f not in rescanned]
    parts = []
    if added:
        parts.append(f"{plural(len(added), 'Parquet file')} under the dataset root it does not list, "
                     f"e.g. {added[0]!r}")
    if gone:
        parts.append(f"the rescan does not find {plural(len(gone), 'file')} it lists, e.g. {gone[0]!r}")
    return "; ".join(parts) or "the row groups in the footers differ from the manifest's"
