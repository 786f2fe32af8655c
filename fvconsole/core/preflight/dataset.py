"""The manifest FastVideo's streaming loader will use at the next start, predicted as it builds it.

``load_or_create_streaming_manifest`` reuses the manifest at ``streaming_manifest_path`` only when
its version, dataset root and columns match and every listed file's size and mtime_ns still do
(``core/formats/manifest.py: check_manifest``); otherwise it rescans the dataset's Parquet files
(``core/formats/column_check.py: predict_rescan``, footers only). A missing or stale manifest that
rebuilds to the same fingerprint resumes; a dataset with no Parquet file left, or a file without
a projected column, is FastVideo's failure. Each rank's state was made against a fingerprint, and
the streaming dataset refuses another one at the first batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fvconsole.core.formats.column_check import predict_rescan
from fvconsole.core.formats.manifest import MANIFEST_VERSION, Manifest, check_manifest, load_manifest
from fvconsole.core.formats.parquet_columns import DataType
from fvconsole.core.preflight.model import Check, Status, per_rank
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import real


@dataclass(frozen=True)
class PredictedManifest:
    """The fingerprint and row counts FastVideo's manifest will have (None: it will fail, see ``check``)."""

    fingerprint: str | None
    rows: Sequence[int] | None
    #: How it was predicted: "reused", "rebuilt" or "fails".
    how: str
    check: Check
    #: The manifest on disk, when it could be read (what the rebuild is compared with).
    manifest: Manifest | None = None


def _stale(m: Manifest, data_path: str, dtype: DataType) -> str | None:
    """Why FastVideo will not reuse ``m`` (None: it will)."""
    if m.version != MANIFEST_VERSION:
        return f"its version is {m.version!r}, not {MANIFEST_VERSION}"
    if m.dataset_root != real(data_path):
        return f"its dataset_root {m.dataset_root!r} is not training.data.data_path ({real(data_path)!r})"
    if m.columns != list(dtype.columns):
        return f"its columns are not those of {dtype.name!r}"
    found = check_manifest(m, data_path)
    if not found.ok:
        return (found.source_problems or found.problems)[0]
    return None


def predict_manifest(manifest_path: str, data_path: str, dtype: DataType) -> PredictedManifest:
    """The manifest the next start will use: the one on disk, or the rescan's."""
    try:
        m: Manifest | None = load_manifest(manifest_path)
        assert m is not None
        why = _stale(m, data_path, dtype)
    except FvError as exc:
        m, why = None, f"the manifest cannot be reused ({exc})"
    if m is not None and why is None:
        return PredictedManifest(m.fingerprint, m.rows, "reused", Check(
            "dataset", "ok", f"{m.path}: reused as it is ({m.num_row_groups} row groups, fingerprint "
            f"{m.fingerprint[:12]})"), m)
    reason = why if m is None else f"{m.path}: {why}"
    rescan = predict_rescan(real(data_path), dtype, m, reason)
    if rescan.verdict in ("rebuild", "fingerprint-changes") and rescan.rebuilt_fingerprint:
        changed = m is not None and rescan.rebuilt_fingerprint != m.fingerprint
        detail = (f"{reason}: FastVideo rebuilds it at the start (fingerprint "
                  f"{rescan.rebuilt_fingerprint[:12]}{', changed' if changed else ''})")
        return PredictedManifest(rescan.rebuilt_fingerprint, rescan.rebuilt_rows, "rebuilt",
                                 Check("dataset", "ok", detail), m)
    status: Status = "warn" if rescan.verdict == "not-checked" else "fail"
    return PredictedManifest(None, None, "fails", Check("dataset", status, rescan.message), m)


def fingerprint_checks(predicted: PredictedManifest, states: dict[int, str | None]) -> list[Check]:
    """Each rank's state fingerprint (None: not read) against the predicted manifest's."""
    if predicted.fingerprint is None or not states:
        return []
    findings: dict[tuple[Status, str, str | None], list[int]] = {}
    for rank, fingerprint in states.items():
        if fingerprint is None:
            continue
        if fingerprint == predicted.fingerprint:
            key: tuple[Status, str, str | None] = ("ok", f"state made against the manifest's fingerprint "
                                                   f"{fingerprint[:12]}", None)
        else:
            key = ("fail", f"state's manifest_fingerprint {str(fingerprint)[:12]} is not the manifest's "
                   f"{predicted.fingerprint[:12]} (a Parquet file was rewritten or touched): the streaming "
                   "dataset refuses it at the first batch ('streaming dataset manifest changed')", None)
        findings.setdefault(key, []).append(rank)
    return per_rank("dataset", findings)
