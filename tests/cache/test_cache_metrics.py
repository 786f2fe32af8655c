"""`cache ls --format prometheus` (checked with prometheus_client's parser), `--output`, and `fleet cache ls --format csv`."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest
from mounts import tmpfs
from prometheus_client.parser import text_string_to_metric_families
from sized_cache import MIB, PAGE, fs_free, sized_entry
from slurm_cluster import write_fake_srun

from fvconsole.cli import main
from fvconsole.core.cache.columns import LABELS, METRICS
from fvconsole.core.cache.export import safe_cell

DAY = 86400.0
#: name -> (MiB, age): two complete entries, an incomplete one (no manifest) and a broken one.
SIZES = {"old": (3, 3 * DAY), "new": (1, DAY), "crashed": (2, 2 * DAY), "broken": (1, 4 * DAY)}


def _families(text: str) -> dict[str, list]:
    """name -> samples, from the reference parser (raises on anything not valid text format)."""
    families = list(text_string_to_metric_families(text))
    assert all(f.type == "gauge" and f.documentation for f in families)
    return {f.name: f.samples for f in families}


def _value(samples: list, **labels: str) -> float:
    [sample] = [s for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    return sample.value


def _sized_root(root: Path) -> dict[str, str]:
    keys = {name: sized_entry(root, name, mib, age) for name, (mib, age) in SIZES.items()}
    (root / keys["crashed"] / "manifest.json").unlink()  # incomplete: shards, no manifest
    torn = root / keys["broken"] / "manifest.json"
    torn.write_text("{ torn")  # invalid; its mtime (last use) stays that of the entry
    os.utime(torn, (os.stat(root / keys["broken"]).st_mtime,) * 2)
    return keys


def test_prometheus_metrics_parse_and_match_the_cache(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB", "2")
    with tmpfs(tmp_path / "shm", 16 * MIB) as shm:
        root = shm / "wcache"
        keys = _sized_root(root)
        free = fs_free(shm)
        assert main(["cache", "ls", str(root), "--format", "prometheus", "--per-entry"]) == 0
        text = capsys.readouterr().out
    metrics = _families(text)
    r = str(root)
    assert _value(metrics["fvconsole_cache_entries"], root=r, status="complete") == 2
    assert _value(metrics["fvconsole_cache_entries"], root=r, status="incomplete") == 1
    assert _value(metrics["fvconsole_cache_entries"], root=r, status="invalid") == 1
    assert _value(metrics["fvconsole_cache_entries"], root=r, status="partial") == 0
    manifest = len(json.dumps({"format_version": 1, "key": keys["old"], "num_shards": 1,
                               "params": {"w": {"kind": "tensor", "dtype": "torch.float32", "global_shape": [1]}}}))
    assert _value(metrics["fvconsole_cache_bytes"], root=r, status="complete") == 4 * MIB + 2 * manifest
    assert _value(metrics["fvconsole_cache_bytes"], root=r, status="incomplete") == 2 * MIB
    assert _value(metrics["fvconsole_cache_bytes"], root=r, status="invalid") == 1 * MIB + len("{ torn")
    assert _value(metrics["fvconsole_cache_cap_bytes"], root=r) == 2 * 2**30
    assert _value(metrics["fvconsole_cache_filesystem_size_bytes"], root=r) == 16 * MIB
    assert _value(metrics["fvconsole_cache_filesystem_free_bytes"], root=r) == free == 16 * MIB - 7 * MIB - 3 * PAGE  # three manifests
    # The oldest *used* entry: "broken" has no parsable manifest but its file's mtime still counts as last use.
    age = _value(metrics["fvconsole_cache_oldest_last_used_age_seconds"], root=r)
    assert 4 * DAY - 5 < age < 4 * DAY + 60
    assert _value(metrics["fvconsole_cache_entry_bytes"], root=r, key=keys["crashed"], status="incomplete") == 2 * MIB
    assert len(metrics["fvconsole_cache_entry_bytes"]) == 4
    assert "# TYPE fvconsole_cache_entries gauge" in text and text.endswith("\n")


#: The per-entry families (``--per-entry``) and the labels of their samples, in order, written out here:
#: what the listing's column table (core/cache/columns.py) declares a metric or a label of.
PER_ENTRY_FAMILIES = {"fvconsole_cache_entry_bytes"}
ENTRY_LABELS = ["root", "key", "status"]


def test_per_entry_families_are_exactly_those_the_column_table_declares(tmp_path: Path, capsys) -> None:
    root = tmp_path / "wcache"
    keys = {sized_entry(root, name, mib, DAY) for name, mib in (("a", 1), ("b", 2))}
    assert main(["cache", "ls", str(root), "--format", "prometheus"]) == 0
    whole = _families(capsys.readouterr().out)
    assert main(["cache", "ls", str(root), "--format", "prometheus", "--per-entry"]) == 0
    text = capsys.readouterr().out
    families = _families(text)
    assert set(families) - set(whole) == PER_ENTRY_FAMILIES
    assert {f"fvconsole_cache_{metric.name}" for metric in METRICS} == PER_ENTRY_FAMILIES
    assert [c.label for c in LABELS] == ENTRY_LABELS[1:]
    for name in PER_ENTRY_FAMILIES:
        assert {s.labels["key"] for s in families[name]} == keys
        lines = [line for line in text.splitlines() if line.startswith(name + "{")]
        assert len(lines) == len(keys)
        assert all(re.findall(r'(\w+)="', line.split("}")[0]) == ENTRY_LABELS for line in lines), lines
    assert {s.labels["status"] for s in families["fvconsole_cache_entry_bytes"]} == {"complete"}


def test_label_values_are_escaped(tmp_path: Path, capsys) -> None:
    hostile = tmp_path / 'we"ird\\root\nname\udcff'
    sized_entry(Path(hostile), "a", 1, DAY)
    assert main(["cache", "ls", str(hostile), "--format", "prometheus"]) == 0
    text = capsys.readouterr().out
    text.encode("utf-8")  # valid UTF-8 although the path is not
    metrics = _families(text)
    [root_label] = {s.labels["root"] for s in metrics["fvconsole_cache_entries"]}
    assert root_label == str(hostile).replace("\udcff", "\\xff")  # quote, backslash, newline survive; the byte shows
    assert _value(metrics["fvconsole_cache_entries"], root=root_label, status="complete") == 1


def test_output_file_is_replaced_atomically(tmp_path: Path, capsys) -> None:
    root = tmp_path / "wcache"
    sized_entry(root, "a", 1, DAY)
    target = tmp_path / "textfile" / "fvcache.prom"
    target.parent.mkdir()
    target.write_text("old\n")
    before = target.stat().st_ino
    assert main(["cache", "ls", str(root), "--format", "prometheus", "--output", str(target)]) == 0
    assert capsys.readouterr().out == ""  # everything went to the file
    assert target.stat().st_ino != before  # a new file renamed over the old one, never rewritten in place
    assert _value(_families(target.read_text())["fvconsole_cache_entries"], status="complete") == 1
    assert sorted(p.name for p in target.parent.iterdir()) == ["fvcache.prom"]  # no temp file left
    assert main(["cache", "ls", str(root), "--json", "--output", str(tmp_path / "ls.json")]) == 0
    assert json.loads((tmp_path / "ls.json").read_text())["entry_count"] == 1
    assert main(["cache", "ls", str(root), "--format", "prometheus", "--output", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path}: --output: ") and len(err.splitlines()) == 1


@pytest.mark.parametrize("argv", [["--json", "--format", "prometheus"], ["--per-entry"], ["--count", "2"],
                                  ["--watch", "0"], ["--watch", "nan"], ["--count", "0", "--watch", "1"]])
def test_inconsistent_ls_flags_are_usage_errors(tmp_path: Path, capsys, argv: list[str]) -> None:
    sized_entry(tmp_path / "wcache", "a", 1, DAY)
    try:
        code = main(["cache", "ls", str(tmp_path / "wcache"), *argv])
    except SystemExit as exc:  # argparse-level usage errors end the process like --help
        code = exc.code
    assert code == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_json_alias_and_format_json_are_the_same(tmp_path: Path, capsys) -> None:
    sized_entry(tmp_path / "wcache", "a", 1, DAY)
    assert main(["cache", "ls", str(tmp_path / "wcache"), "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main(["cache", "ls", str(tmp_path / "wcache"), "--format", "json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert one.keys() == two.keys() and one["entries"] == two["entries"]
    assert main(["cache", "ls", str(tmp_path / "missing"), "--format", "json"]) == 1
    assert "does not exist" in json.loads(capsys.readouterr().out)["error"]


# --------------------------------------------------------------------------- fleet CSV

#: A node whose `cache ls` answer holds formula-looking strings (a hostile or broken node).
FORMULA_NODE = """
import sys
import fvconsole.cli.node as runner
runner.run_captured = lambda argv: (0, {doc!r})
sys.exit(runner.main(sys.argv[1:]))
"""


def test_fleet_csv_rows_quoting_and_formula_safety(tmp_path: Path, capsys, monkeypatch) -> None:
    srun = write_fake_srun(tmp_path / "bin")
    monkeypatch.setenv("PATH", os.path.dirname(srun) + os.pathsep + os.environ["PATH"])
    hostile = tmp_path / "nodes"
    hostile.mkdir()
    doc = json.dumps({"root": '=HYPERLINK("http://x","click")', "fs_free_bytes": 5, "entries": [
        {"key": "+cmd|' /C calc'!A0", "status": "@SUM(1,2)", "bytes": 7, "last_used": 0, "writing": False,
         "shards_present": [0], "num_shards": 1, "path": "-x"}]})
    (hostile / "evil1.py").write_text(FORMULA_NODE.format(doc=doc))
    monkeypatch.setenv("FAKE_SRUN_NODES", str(hostile))
    base = tmp_path / 'roots, "quoted"'
    a1 = _sized_root(base / "a1" / "wc")
    (base / "a2" / "wc").mkdir(parents=True)  # empty: still one row
    template = str(base / "{node}" / "wc")
    code = main(["fleet", "cache", "ls", "--nodes", "a[1-3],evil1", "--cache-root", template, "--format", "csv",
                 "--fanout", "per-node"])
    out = capsys.readouterr().out
    assert code == 3  # a3's root is missing
    rows = list(csv.DictReader(io.StringIO(out)))
    by_node: dict[str, list[dict]] = {}
    for row in rows:
        by_node.setdefault(row["node"], []).append(row)
    assert {r["key"] for r in by_node["a1"]} == set(a1.values())
    assert all(r["root"] == str(base / "a1" / "wc") for r in by_node["a1"])  # comma and quotes survive quoting
    old = next(r for r in by_node["a1"] if r["key"] == a1["old"])
    assert (old["status"], old["bytes"], old["shards_present"], old["num_shards"]) == ("complete", str(3 * MIB + len(
        (base / "a1" / "wc" / a1["old"] / "manifest.json").read_text())), "1", "1")
    assert [(r["outcome"], r["key"]) for r in by_node["a2"]] == [("ok", "")]
    [a3] = by_node["a3"]
    assert a3["outcome"] == "failed" and "does not exist" in a3["error"]
    [evil] = by_node["evil1"]
    assert evil["root"].startswith("'=") and evil["key"].startswith("'+") and evil["status"].startswith("'@")
    assert evil["bytes"] == "7"


def test_safe_cell() -> None:
    assert [safe_cell(v) for v in ("=1+1", "+1", "-1", "@x", "\tx", "\rx", "ok", "", None, 5, -5, True)] == [
        "'=1+1", "'+1", "'-1", "'@x", "'\tx", "'\rx", "ok", "", "", 5, -5, "yes"]
