"""Manifest loading, FastVideo-identical fingerprint, integrity and source checks."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from migration_runs import edit_manifest

from fvconsole.core.formats.manifest import check_manifest, compute_fingerprint, load_manifest
from fvconsole.core.shared.errors import FvError
from fvconsole.demo.builders import build_manifest, synthetic_manifest, write_dataset, write_manifest


def fastvideo_fingerprint(row_groups) -> str:
    """Spelled out as in FastVideo's parquet_dataset_streaming_style._manifest_fingerprint."""
    payload = json.dumps(row_groups, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


@pytest.fixture()
def dataset(tmp_path):
    root = write_dataset(tmp_path / "data", files=3, row_groups_per_file=3, rows_per_group=[5, 7, 1])
    path = str(tmp_path / "cache" / "manifest.json")
    build_manifest(root, path)
    return root, path


def test_real_manifest_loads_and_checks_clean(dataset) -> None:
    root, path = dataset
    m = load_manifest(path)
    assert m.dataset_root == root and m.num_row_groups == 9 and m.total_rows == 39
    assert list(m.rows) == [5, 7, 1] * 3
    assert list(m.sample_starts) == [0, 5, 12, 13, 18, 25, 26, 31, 38]
    assert list(m.row_group_ids) == [0, 1, 2] * 3
    assert m.files[3] == os.path.join("shards", "part-00001.parquet") and len(m.file_names) == 3
    assert m.fingerprint == fastvideo_fingerprint(m.raw["row_groups"])
    check = check_manifest(m, root)
    assert check.ok and check.problems == () and check.source_problems == () and check.warnings == ()


def test_sample_ids_in_data_follow_manifest_order(dataset) -> None:
    import pyarrow.parquet as pq

    _, path = dataset
    m = load_manifest(path)
    for i in (0, 4, 8):
        table = pq.ParquetFile(os.path.join(m.dataset_root, m.files[i])).read_row_group(m.row_group_ids[i])
        assert table.num_rows == m.rows[i]
        assert table.column("id")[0].as_py() == f"sample-{m.sample_starts[i]:06d}"


def test_manifest_must_live_outside_dataset(tmp_path) -> None:
    root = write_dataset(tmp_path / "data", files=1, row_groups_per_file=1)
    with pytest.raises(ValueError):
        build_manifest(root, os.path.join(root, "manifest.json"))
    # A manifest placed inside anyway is an integrity problem.
    manifest = synthetic_manifest(2, rows=3, dataset_root=root)
    inside = write_manifest(os.path.join(root, "sub", "m.json"), manifest)
    problems = check_manifest(load_manifest(inside), root, source=False).problems
    assert any("inside the dataset root" in p for p in problems)


def test_fingerprint_matches_fastvideo_on_non_ascii_and_huge_integers() -> None:
    row_groups = [
        {"file": "vidéo/ünïcödé-片段.parquet", "row_group": 0, "rows": 3, "sample_start": 0,
         "file_size": 2**70 + 1, "file_mtime_ns": 1_795_999_704_378_096_983},
        {"sample_start": 3, "rows": 1, "row_group": 1, "file": "emoji-🎬 \"quoted\"\\.parquet",
         "file_size": 10**30, "file_mtime_ns": 0},
    ]
    fp = compute_fingerprint(row_groups)
    assert fp == fastvideo_fingerprint(row_groups)
    canonical = json.dumps(row_groups, sort_keys=True, separators=(",", ":"))
    assert "\\u00e9" in canonical and "\\ud83c\\udfac" in canonical  # ensure_ascii escaping is part of it
    assert fp != hashlib.sha256(json.dumps(row_groups, sort_keys=True, separators=(",", ":"),
                                           ensure_ascii=False).encode()).hexdigest()
    assert compute_fingerprint(synthetic_manifest(50)["row_groups"]) == synthetic_manifest(50)["fingerprint"]


def test_non_ascii_dataset_roundtrip(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "données"
    (root / "ç").mkdir(parents=True)
    for name in ("ç/vidéo-1.parquet", "ç/vidéo-2.parquet"):
        pq.write_table(pa.table({"id": ["a", "b", "c"]}), str(root / name), row_group_size=2)
    path = str(tmp_path / "m" / "manifest.json")
    raw = build_manifest(root, path)
    assert raw["fingerprint"] == fastvideo_fingerprint(raw["row_groups"])
    m = load_manifest(path)
    assert [g["rows"] for g in raw["row_groups"]] == [2, 1, 2, 1]
    assert check_manifest(m, str(root)).ok


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d.__setitem__("version", 1), "field 'version' is 1"),
        (lambda d: d["row_groups"][1].__setitem__("rows", 6), "field 'fingerprint'"),
        (lambda d: d.__setitem__("total_rows", 40), "field 'total_rows' is 40"),
        (lambda d: d["row_groups"][2].__setitem__("sample_start", 99), "field 'sample_start'"),
        (lambda d: d["row_groups"][0].__setitem__("rows", 0), "field 'rows' must be > 0"),
        (lambda d: d["row_groups"][0].__setitem__("row_group", -1), "field 'row_group' must be >= 0"),
        (lambda d: d["row_groups"][0].__setitem__("file", "../outside.parquet"), "field 'file' escapes dataset_root"),
        (lambda d: d["row_groups"][0].__setitem__("file", "/etc/passwd"), "field 'file' escapes dataset_root"),
        (lambda d: d.__setitem__("dataset_root", "/somewhere/else"), "field 'dataset_root'"),
    ],
)
def test_integrity_failures(dataset, mutate, fragment) -> None:
    root, path = dataset
    edit_manifest(path, mutate)
    check = check_manifest(load_manifest(path), root)
    assert any(fragment in p and path in p for p in check.problems), check.problems
    assert not check.ok


def test_escaping_symlink_inside_dataset_is_caught(dataset, tmp_path) -> None:
    root, path = dataset
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"x")
    os.symlink(outside, os.path.join(root, "zz-link.parquet"))
    edit_manifest(path, lambda d: d["row_groups"][0].__setitem__("file", "zz-link.parquet"))
    assert any("escapes dataset_root" in p for p in check_manifest(load_manifest(path), root).problems)


def test_order_violation_is_a_warning_not_a_refusal(tmp_path) -> None:
    manifest = synthetic_manifest(4, rows=2, row_groups_per_file=4)
    manifest["row_groups"][1]["row_group"], manifest["row_groups"][2]["row_group"] = 2, 1
    manifest["fingerprint"] = fastvideo_fingerprint(manifest["row_groups"])
    path = write_manifest(tmp_path / "m.json", manifest)
    check = check_manifest(load_manifest(path), manifest["dataset_root"], source=False)
    assert check.problems == () and any("row_groups[2]" in w for w in check.warnings)


def test_source_drift_touch_and_delete(dataset) -> None:
    root, path = dataset
    victim = os.path.join(root, "shards", "part-00001.parquet")
    st = os.stat(victim)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    check = check_manifest(load_manifest(path), root)
    assert check.problems == ()
    (drift,) = check.source_problems
    assert "shards/part-00001.parquet" in drift and "file_mtime_ns" in drift and "file_size" not in drift
    assert check_manifest(load_manifest(path), root, source=False).source_problems == ()
    os.unlink(os.path.join(root, "part-00000.parquet"))
    problems = check_manifest(load_manifest(path), root).source_problems
    assert any("missing or unreadable" in p and "part-00000.parquet" in p for p in problems)


def test_source_check_stats_each_file_once(dataset, monkeypatch) -> None:
    root, path = dataset
    m = load_manifest(path)
    calls: list[str] = []
    real_stat = os.stat

    def counting_stat(p, *a, **kw):
        if str(p).endswith(".parquet"):
            calls.append(str(p))
        return real_stat(p, *a, **kw)

    monkeypatch.setattr(os, "stat", counting_stat)
    assert check_manifest(m, root).ok
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 3


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("[1, 2]", "must be a JSON object"),
        ("{bad json", "not valid JSON"),
        ('{"version": 2}', "field 'dataset_root' is missing"),
        ('{"version": "2", "dataset_root": "/d", "total_rows": 1, "row_groups": [], "fingerprint": "x"}',
         "field 'version' must be int"),
        ('{"version": 2, "dataset_root": "/d", "total_rows": 1, "row_groups": [], "fingerprint": "x"}',
         "field 'row_groups' is empty"),
        ('{"version": 2, "dataset_root": "/d", "total_rows": 1, "row_groups": [7], "fingerprint": "x"}',
         "row_groups[0] must be an object"),
        ('{"version": 2, "dataset_root": "/d", "total_rows": 1, "fingerprint": "x", "row_groups": '
         '[{"file": "a", "row_group": 0, "rows": "1", "sample_start": 0, "file_size": 1, "file_mtime_ns": 1}]}',
         "row_groups[0].rows must be an integer"),
        ('{"version": 2, "dataset_root": "/d", "total_rows": 1, "fingerprint": "x", "row_groups": '
         '[{"file": "a", "row_group": 0, "rows": 1, "sample_start": 0, "file_size": 1}]}',
         "row_groups[0].file_mtime_ns is missing"),
        ('{"version": 2, "dataset_root": "/d", "total_rows": 1, "fingerprint": "x", "row_groups": '
         '[{"file": "", "row_group": 0, "rows": 1, "sample_start": 0, "file_size": 1, "file_mtime_ns": 1}]}',
         "row_groups[0].file must be a non-empty string"),
        # Regression: these escaped as RecursionError / ValueError (digit limit) instead of FvError.
        ("[" * 100_000 + "]" * 100_000, "not usable JSON"),
        ('{"version": 2, "total_rows": ' + "1" * 5000 + "}", "not usable JSON"),
    ],
)
def test_shape_errors_name_file_and_field(tmp_path, content, fragment) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(content)
    with pytest.raises(FvError) as info:
        load_manifest(path)
    assert str(path) in str(info.value) and fragment in str(info.value)


def test_missing_manifest(tmp_path) -> None:
    with pytest.raises(FvError, match="does not exist"):
        load_manifest(tmp_path / "nope.json")


def test_many_problems_are_summarised(tmp_path) -> None:
    manifest = synthetic_manifest(1000, rows=1)
    for g in manifest["row_groups"]:
        g["rows"] = 0
    path = write_manifest(tmp_path / "m.json", manifest)
    problems = check_manifest(load_manifest(path), manifest["dataset_root"], source=False).problems
    rows_problem = next(p for p in problems if "'rows'" in p)
    assert "(and 997 more)" in rows_problem and len(rows_problem) < 400


def test_fingerprint_fast_path_equals_upstream_formula_on_a_large_manifest() -> None:
    manifest = synthetic_manifest(20_000, seed=5)
    manifest["row_groups"][7]["file"] = "naïve/片段.parquet"
    assert compute_fingerprint(manifest["row_groups"]) == fastvideo_fingerprint(manifest["row_groups"])


def test_nul_bytes_in_manifest_paths_are_shape_errors(tmp_path) -> None:
    # Regression (reliability D2): realpath on a NUL byte raised ValueError -> "internal error".
    with pytest.raises(FvError, match="NUL byte"):
        load_manifest(str(tmp_path / "m\x00.json"))
    manifest = synthetic_manifest(4, rows=2)
    manifest["dataset_root"] = "/data/\x00x"
    with pytest.raises(FvError, match="field 'dataset_root' contains a NUL byte"):
        load_manifest(write_manifest(tmp_path / "a.json", manifest))
    manifest = synthetic_manifest(4, rows=2, row_groups_per_file=2)
    manifest["row_groups"][2]["file"] = "bad\x00.parquet"
    manifest["row_groups"][3]["file"] = "bad\x00.parquet"
    with pytest.raises(FvError, match=r"row_groups\[2\]\.file contains a NUL byte"):
        load_manifest(write_manifest(tmp_path / "b.json", manifest))


def test_symlinked_subdirectory_escaping_the_root_is_caught(dataset, tmp_path) -> None:
    # The per-directory realpath cache must still resolve symlinked directories.
    root, path = dataset
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.parquet").write_bytes(b"x")
    os.symlink(outside, os.path.join(root, "sub"))
    edit_manifest(path, lambda d: d["row_groups"][0].__setitem__("file", "sub/x.parquet"))
    problems = check_manifest(load_manifest(path), root).problems
    assert any("escapes dataset_root" in p and "sub/x.parquet" in p for p in problems)


def test_non_regular_manifest_is_refused_without_reading_it(tmp_path) -> None:
    # Regression (reliability D3): /dev/zero as the manifest was read until the OOM killer came.
    with pytest.raises(FvError, match="streaming manifest must be a regular file, but it is a character device"):
        load_manifest("/dev/zero")
    fifo = tmp_path / "m.json"
    os.mkfifo(fifo)
    with pytest.raises(FvError, match="a FIFO"):
        load_manifest(fifo)
