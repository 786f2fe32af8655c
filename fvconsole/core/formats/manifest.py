"""The streaming manifest (docs/formats.md §4): loading, shape validation, integrity and source checks.

A manifest can hold a million row groups, so loading keeps compact per-row-group lists
(rows, sample starts, file index) built in one plain loop, and the checks stat each distinct
file once. Shape errors (wrong types, missing keys) raise FvError at load time; value
problems (fingerprint, contiguity, escaping paths, drift) are *reported* by
``check_manifest`` so a preview can list all of them.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from fvconsole.core.formats.fastjson import fingerprint
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.fsutil import real
from fvconsole.core.shared.safe_read import read_regular_file, short_repr
from fvconsole.core.shared.untrusted import decode, json_depth_exceeds

MANIFEST_VERSION = 2
ROW_GROUP_FIELDS = ("file", "row_group", "rows", "sample_start", "file_size", "file_mtime_ns")
_TOP_FIELDS: tuple[tuple[str, type], ...] = (
    ("version", int),
    ("dataset_root", str),
    ("total_rows", int),
    ("row_groups", list),
    ("fingerprint", str),
)
#: A million row groups is ~200 MB of JSON; refuse what cannot be a manifest.
MAX_MANIFEST_BYTES = 2 * 2**30
#: Every integer field is an int64 in FastVideo's data (Parquet row counts, stat results);
#: anything outside is refused at load, before arithmetic (float division) or pyarrow sees it.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: Nesting allowed in a manifest (real ones are 3 deep: object, row_groups list, row group).
MAX_MANIFEST_DEPTH = 32
#: Report at most this many examples of one kind of problem (the count is always given).
MAX_EXAMPLES = 3


def compute_fingerprint(row_groups: list[dict]) -> str:
    """FastVideo's manifest fingerprint, byte for byte, by ``core/formats/fastjson.py`` (tested byte-identical).

    A name of its own so the benchmarks can put the stdlib formula in its place.
    """
    return fingerprint(row_groups)


@dataclass(frozen=True)
class Manifest:
    """A shape-validated manifest with per-row-group lists for O(1) lookups."""

    path: str
    dataset_root: str
    fingerprint: str
    total_rows: int
    rows: Sequence[int] = field(repr=False)
    sample_starts: Sequence[int] = field(repr=False)
    #: File (relative path) of each row group; the strings are shared with ``file_names``.
    files: Sequence[str] = field(repr=False)
    row_group_ids: Sequence[int] = field(repr=False)
    raw: dict = field(repr=False)
    #: Distinct files in first-seen order, and each row group's index into it.
    file_names: tuple[str, ...] = field(default=(), repr=False)
    file_index: Sequence[int] = field(default=(), repr=False)
    version: Any = MANIFEST_VERSION
    columns: Any = None
    #: sha256 of the file's bytes as parsed: the same bytes parse to the same fingerprint, so
    #: execution's re-check can compare digests instead of parsing and hashing again.
    content_sha256: str = ""

    @property
    def num_row_groups(self) -> int:
        return len(self.rows)

    def row_group(self, index: int) -> dict:
        """The raw manifest entry of row group ``index``."""
        return self.raw["row_groups"][index]

    def to_json(self) -> dict:
        # Hand-written: the per-row-group arrays are summarised as counts, not emitted.
        return {
            "path": self.path,
            "dataset_root": self.dataset_root,
            "fingerprint": self.fingerprint,
            "total_rows": self.total_rows,
            "num_row_groups": self.num_row_groups,
            "num_files": len(self.file_names),
            "version": self.version,
        }


def _type_name(value: Any) -> str:
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return type(value) is int  # bool is not an integer here


def _row_group_error(path: str, index: int, item: Any) -> FvError | None:
    """The precise one-line error for a malformed row group, None if it is well formed."""
    where = f"{path}: row_groups[{index}]"
    if not isinstance(item, dict):
        return FvError(f"{where} must be an object, got {_type_name(item)}")
    for name in ROW_GROUP_FIELDS:
        if name not in item:
            return FvError(f"{where}.{name} is missing")
        value = item[name]
        if name == "file":
            if not isinstance(value, str) or not value:
                return FvError(f"{where}.file must be a non-empty string (got {short_repr(value)})")
        elif not _is_int(value):
            return FvError(f"{where}.{name} must be an integer (got {short_repr(value)})")
        elif not INT64_MIN <= value <= INT64_MAX:
            return FvError(f"{where}.{name} is out of range (got {short_repr(value)}; must fit in 64 bits)")
    return None


def _read_bytes(path: str) -> bytes:
    """The manifest's bytes (regular file, size cap); FvError naming it when it cannot be read."""
    try:
        return read_regular_file(path, "streaming manifest", MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise FvError(f"{path}: streaming manifest does not exist") from None
    except OSError as exc:
        raise FvError(f"{path}: cannot read streaming manifest ({exc.strerror or exc})") from None


#: The last manifests loaded, by (path, sha256 of the bytes): the same bytes parse to the same
#: manifest, so a command that reads one twice (preflight, then the published set's verification)
#: decodes a million row groups once. Manifests are never mutated after loading.
_LOADED: dict[tuple[str, str], Manifest] = {}
#: Row-group fingerprints recomputed, by the manifest's content sha256 (same bytes, same hash).
_RECOMPUTED: dict[str, str] = {}
_CACHE_SIZE = 2


def manifest_bytes_sha256(path: str) -> str:
    """sha256 of the manifest file's bytes, read as :func:`load_manifest` reads them (OSError if it cannot)."""
    return hashlib.sha256(read_regular_file(path, "streaming manifest", MAX_MANIFEST_BYTES)).hexdigest()


def _require_shallow(path: str, data: dict) -> None:
    """Refuse nesting beyond MAX_MANIFEST_DEPTH without walking a million flat row groups.

    ``_columns`` has checked that each row group's six fields are ints/strings, so only
    row groups with extra keys can nest; they are checked with everything but ``row_groups``.
    """
    row_groups = data["row_groups"]
    extra = list(compress(row_groups, map(len(ROW_GROUP_FIELDS).__ne__, map(len, row_groups))))
    rest = {k: v for k, v in data.items() if k != "row_groups"}
    if json_depth_exceeds(rest, MAX_MANIFEST_DEPTH) or json_depth_exceeds(extra, MAX_MANIFEST_DEPTH - 1):
        raise FvError(f"{path}: streaming manifest is not usable JSON (nested more than {MAX_MANIFEST_DEPTH} levels deep)")


def _require_int64(path: str, row_groups: list, columns: dict[str, list[int]]) -> None:
    """Every row-group integer fits in 64 bits (C-speed check; the culprit is found only on failure)."""
    for name, values in columns.items():
        try:
            array("q", values)
        except OverflowError:
            for i, value in enumerate(values):
                if not INT64_MIN <= value <= INT64_MAX:
                    raise _row_group_error(path, i, row_groups[i]) or FvError(
                        f"{path}: row_groups[{i}].{name} is out of range"
                    ) from None


def _columns(path: str, row_groups: list) -> tuple[list[str], list[int], list[int], list[int]]:
    """(files, rows, sample_starts, row_group ids) in one plain loop (measured faster than
    itemgetter/zip column tricks on a million row groups); slow path only on a bad entry.

    Every integer field is checked to fit in 64 bits."""
    n = len(row_groups)
    files: list[str] = [""] * n
    rows = [0] * n
    starts = [0] * n
    ids = [0] * n
    sizes = [0] * n
    mtimes = [0] * n
    for i, item in enumerate(row_groups):
        try:
            f = item["file"]
            r = item["rows"]
            s = item["sample_start"]
            g = item["row_group"]
            z = item["file_size"]
            t = item["file_mtime_ns"]
            if (
                type(f) is not str
                or not f
                or type(r) is not int
                or type(s) is not int
                or type(g) is not int
                or type(z) is not int
                or type(t) is not int
            ):
                raise TypeError
        except (KeyError, TypeError, IndexError):
            raise _row_group_error(path, i, item) or FvError(f"{path}: row_groups[{i}] is malformed") from None
        files[i] = f
        rows[i] = r
        starts[i] = s
        ids[i] = g
        sizes[i] = z
        mtimes[i] = t
    _require_int64(path, row_groups, {"rows": rows, "sample_start": starts, "row_group": ids,
                                      "file_size": sizes, "file_mtime_ns": mtimes})
    return files, rows, starts, ids


def _nul_free(text: str) -> bool:
    """Paths with a NUL byte make every os call raise ValueError; they are refused up front."""
    return "\x00" not in text


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Load and shape-check a manifest; FvError naming the file and the field at fault."""
    if not _nul_free(os.fspath(path)):
        raise FvError(f"{os.fspath(path)!r}: streaming manifest path contains a NUL byte")
    path = real(path)
    raw_bytes = _read_bytes(path)
    content_sha256 = hashlib.sha256(raw_bytes).hexdigest()
    cached = _LOADED.get((path, content_sha256))
    if cached is not None:
        return cached
    # Depth is checked below, cheaply, knowing the shape.
    data = decode(raw_bytes, path, "streaming manifest", max_depth=None)
    del raw_bytes
    if not isinstance(data, dict):
        raise FvError(f"{path}: streaming manifest must be a JSON object, got {_type_name(data)}")
    for name, kind in _TOP_FIELDS:
        if name not in data:
            raise FvError(f"{path}: field '{name}' is missing")
        value = data[name]
        ok = _is_int(value) if kind is int else isinstance(value, kind)
        if not ok:
            raise FvError(f"{path}: field '{name}' must be {kind.__name__} (got {_type_name(value)})")
        if kind is int and not INT64_MIN <= value <= INT64_MAX:
            raise FvError(f"{path}: field '{name}' is out of range (got {short_repr(value)}; must fit in 64 bits)")
    row_groups = data["row_groups"]
    if not row_groups:
        raise FvError(f"{path}: field 'row_groups' is empty")
    if "columns" in data and not isinstance(data["columns"], list):
        raise FvError(f"{path}: field 'columns' must be a list (got {_type_name(data['columns'])})")

    if not _nul_free(data["dataset_root"]):
        raise FvError(f"{path}: field 'dataset_root' contains a NUL byte ({data['dataset_root']!r})")

    files_col, rows, starts, ids = _columns(path, row_groups)
    _require_shallow(path, data)
    names = dict.fromkeys(files_col)
    name_list = tuple(names)
    for name in name_list:
        if not _nul_free(name):
            i = files_col.index(name)
            raise FvError(f"{path}: row_groups[{i}].file contains a NUL byte ({name!r})")
    for k, name in enumerate(name_list):
        names[name] = k
    file_index = list(map(names.__getitem__, files_col))
    # One shared string object per file (the parsed JSON has one per row group).
    files = list(map(name_list.__getitem__, file_index))
    loaded = Manifest(
        path=path,
        dataset_root=data["dataset_root"],
        fingerprint=data["fingerprint"],
        total_rows=data["total_rows"],
        rows=rows,
        sample_starts=starts,
        files=files,
        row_group_ids=ids,
        raw=data,
        file_names=name_list,
        file_index=file_index,
        version=data["version"],
        columns=data.get("columns"),
        content_sha256=content_sha256,
    )
    if len(_LOADED) >= _CACHE_SIZE:
        _LOADED.clear()
    _LOADED[(path, content_sha256)] = loaded
    return loaded


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class ManifestCheck:
    """Integrity problems (refusals), source drift (refusal unless skipped), and warnings."""

    problems: tuple[str, ...]
    source_problems: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems and not self.source_problems

    def to_json(self) -> dict:
        return fields_json(self)


def _examples(label: str, items: list[str], total: int) -> str:
    shown = "; ".join(items[:MAX_EXAMPLES])
    more = f" (and {total - MAX_EXAMPLES} more)" if total > MAX_EXAMPLES else ""
    return f"{label}: {shown}{more}"


def _check_values(m: Manifest) -> list[str]:
    """Contiguity, positivity, totals: one loop over the compact lists."""
    problems: list[str] = []
    bad_rows: list[str] = []
    bad_ids: list[str] = []
    bad_starts: list[str] = []
    n_rows = n_ids = n_starts = 0
    expected = 0
    rows, starts, ids = m.rows, m.sample_starts, m.row_group_ids
    for i in range(len(rows)):
        r = rows[i]
        if r <= 0:
            n_rows += 1
            if n_rows <= MAX_EXAMPLES:
                bad_rows.append(f"row_groups[{i}].rows={r}")
        if ids[i] < 0:
            n_ids += 1
            if n_ids <= MAX_EXAMPLES:
                bad_ids.append(f"row_groups[{i}].row_group={ids[i]}")
        if starts[i] != expected:
            n_starts += 1
            if n_starts <= MAX_EXAMPLES:
                bad_starts.append(f"row_groups[{i}].sample_start={starts[i]}, expected {expected}")
        expected += r
    p = m.path
    if n_rows:
        problems.append(_examples(f"{p}: field 'rows' must be > 0", bad_rows, n_rows))
    if n_ids:
        problems.append(_examples(f"{p}: field 'row_group' must be >= 0", bad_ids, n_ids))
    if n_starts:
        problems.append(_examples(f"{p}: field 'sample_start' is not the running sum of rows", bad_starts, n_starts))
    if m.total_rows != expected:
        problems.append(f"{p}: field 'total_rows' is {m.total_rows} but the rows sum to {expected}")
    return problems


def _check_order(m: Manifest) -> list[str]:
    """docs/formats.md §4 orders row groups by file then index; FastVideo does not enforce it."""
    rows_by_key = list(zip(m.files, m.row_group_ids, strict=True))
    for i in range(1, len(rows_by_key)):
        if rows_by_key[i] <= rows_by_key[i - 1]:
            return [
                f"{m.path}: row_groups[{i}] ({rows_by_key[i][0]!r}, row group {rows_by_key[i][1]}) is out of "
                "order or duplicated; FastVideo uses the manifest order as is"
            ]
    return []


def _real_file(root: str, name: str, dir_cache: dict[str, str]) -> str:
    """``real(join(root, name))`` with one realpath per distinct directory, not per file.

    realpath walks every component with an lstat each; a million-row-group manifest has
    ~16k files in a handful of directories. The last component still gets its own lstat,
    so a symlinked file is resolved (and an escaping one caught) exactly as before.
    """
    joined = os.path.expanduser(os.path.join(root, name))
    head, tail = os.path.split(joined)
    if tail in ("", ".", "..") or not head:
        return real(joined)
    real_head = dir_cache.get(head)
    if real_head is None:
        real_head = dir_cache[head] = os.path.realpath(head)
    full = os.path.join(real_head, tail)
    return os.path.realpath(full) if os.path.islink(full) else full


def _check_paths(m: Manifest, data_path: str | None) -> tuple[list[str], dict[str, str]]:
    """Root equality, manifest location, escaping files. Returns (problems, name → realpath)."""
    problems: list[str] = []
    root = m.dataset_root
    if data_path is not None:
        expected = real(data_path)
        if root != expected:
            problems.append(
                f"{m.path}: field 'dataset_root' is {root!r} but training.data.data_path resolves to {expected!r}"
            )
    manifest_parent = real(os.path.dirname(m.path) or ".")
    if os.path.isabs(root) and os.path.commonpath([root, manifest_parent]) == root:
        problems.append(f"{m.path}: the manifest is inside the dataset root {root!r}; it must live outside it")
    resolved: dict[str, str] = {}
    escaping: list[str] = []
    dir_cache: dict[str, str] = {}
    for name in m.file_names:
        full = _real_file(root, name, dir_cache)
        if not os.path.isabs(root) or os.path.commonpath([root, full]) != root:
            escaping.append(repr(name))
        else:
            resolved[name] = full
    if escaping:
        problems.append(_examples(f"{m.path}: field 'file' escapes dataset_root {root!r}", escaping, len(escaping)))
    return problems, resolved


def check_source(m: Manifest, resolved: dict[str, str]) -> list[str]:
    """os.stat each distinct file once; compare every row group's size and mtime_ns with it."""
    stats: list[tuple[int, int] | None] = []
    missing: list[str] = []
    for name in m.file_names:
        full = resolved.get(name)
        if full is None:  # escaping files are reported as integrity problems
            stats.append(None)
            continue
        try:
            st = os.stat(full)
            stats.append((st.st_size, st.st_mtime_ns))
        except OSError as exc:
            stats.append(None)
            missing.append(f"{name!r} ({exc.strerror or exc})")
    drift: list[str] = []
    n_drift = 0
    seen_bad: set[int] = set()
    for i, item in enumerate(m.raw["row_groups"]):
        k = m.file_index[i]
        st = stats[k]
        if st is None or k in seen_bad:
            continue
        size, mtime = item["file_size"], item["file_mtime_ns"]
        if size != st[0] or mtime != st[1]:
            seen_bad.add(k)
            n_drift += 1
            if n_drift <= MAX_EXAMPLES:
                what = []
                if size != st[0]:
                    what.append(f"file_size manifest={size} disk={st[0]}")
                if mtime != st[1]:
                    what.append(f"file_mtime_ns manifest={mtime} disk={st[1]}")
                drift.append(f"{m.files[i]!r} ({', '.join(what)})")
    problems: list[str] = []
    if missing:
        problems.append(_examples(f"{m.path}: dataset file missing or unreadable", missing, len(missing)))
    if n_drift:
        problems.append(_examples(f"{m.path}: dataset file changed since the manifest was built", drift, n_drift))
    return problems


def check_manifest(m: Manifest, data_path: str | None, *, source: bool = True) -> ManifestCheck:
    """Everything FastVideo would check before trusting the manifest, reported not raised.

    ``data_path`` is the run config's ``training.data.data_path`` (None skips that comparison).
    ``source=False`` skips the per-file stat (e.g. the dataset is not mounted here).
    """
    problems: list[str] = []
    if m.version != MANIFEST_VERSION:
        problems.append(f"{m.path}: field 'version' is {m.version!r}, expected {MANIFEST_VERSION}")
    recomputed = _RECOMPUTED.get(m.content_sha256) if m.content_sha256 else None
    if recomputed is None:
        recomputed = compute_fingerprint(m.raw["row_groups"])
        if m.content_sha256:
            if len(_RECOMPUTED) >= _CACHE_SIZE:
                _RECOMPUTED.clear()
            _RECOMPUTED[m.content_sha256] = recomputed
    if recomputed != m.fingerprint:
        problems.append(f"{m.path}: field 'fingerprint' is {m.fingerprint!r} but the row groups hash to {recomputed!r}")
    problems.extend(_check_values(m))
    path_problems, resolved = _check_paths(m, data_path)
    problems.extend(path_problems)
    source_problems = check_source(m, resolved) if source else []
    return ManifestCheck(tuple(problems), tuple(source_problems), tuple(_check_order(m)))
