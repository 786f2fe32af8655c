"""`cache verify`: real shards written with safetensors, expected values from safetensors' own reader.

Every expectation about what a shard holds (its tensor names, dtypes, shapes, whether the
file is readable at all) comes from ``safetensors.safe_open``, never from fvconsole's parser.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fvconsole.core.cache import scan_cache
from fvconsole.core.cache.verify import verify_cache, verify_entry
from fvconsole.demo.cache_builders import write_cache_entry

torch = pytest.importorskip("torch")
safetensors = pytest.importorskip("safetensors")
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

SHARD1 = "shard1-of-4.safetensors"


def _manifest(entry: str) -> dict:
    return json.loads(Path(entry, "manifest.json").read_text())


def _tensors(path: str) -> dict:
    with safe_open(path, framework="pt") as f:
        return {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - a safe_open handle is no dict


def _reader_view(path: str) -> dict[str, tuple[str, list[int]]]:
    """What safetensors itself says the shard holds: name -> (dtype code, shape)."""
    with safe_open(path, framework="pt") as f:
        return {name: (f.get_slice(name).get_dtype(), list(f.get_slice(name).get_shape())) for name in f.keys()}  # noqa: SIM118


def _safe_open_refuses(path: str) -> bool:
    try:
        with safe_open(path, framework="pt") as f:
            list(f.keys())
    except Exception:  # noqa: BLE001 - safetensors raises its own SafetensorError
        return True
    return False


def _problems(entry: str) -> list[dict]:
    return [p.to_json() for p in verify_entry(entry, os.path.basename(entry)).problems]


@pytest.fixture
def entry(tmp_path: Path) -> str:
    return write_cache_entry(tmp_path / "cache", num_shards=4, seed=3)


def test_a_good_entry_verifies_and_agrees_with_safetensors(entry: str) -> None:
    manifest = _manifest(entry)
    for i in range(4):  # the independent view: every shard holds every param, at its local shape
        view = _reader_view(os.path.join(entry, f"shard{i}-of-4.safetensors"))
        assert set(view) == set(manifest["params"])
    result = verify_entry(entry, os.path.basename(entry))
    assert result.ok, result.problems
    assert result.shards_checked == tuple(f"shard{i}-of-4.safetensors" for i in range(4))


def test_a_dtype_disagreement_names_shard_and_param(entry: str) -> None:
    path = os.path.join(entry, SHARD1)
    tensors = _tensors(path)
    tensors["final_norm.weight"] = tensors["final_norm.weight"].to(torch.bfloat16)
    save_file(tensors, path)
    got_dtype, _ = _reader_view(path)["final_norm.weight"]
    assert _manifest(entry)["params"]["final_norm.weight"]["dtype"] == "torch.float32"
    problems = _problems(entry)
    assert [(p["shard"], p["param"]) for p in problems] == [(SHARD1, "final_norm.weight")]
    assert "torch.float32 (F32)" in problems[0]["problem"] and repr(got_dtype) in problems[0]["problem"]


def test_a_shape_disagreement_uses_local_shape_for_a_dtensor(entry: str) -> None:
    name = "blocks.0.attn.to_qkv.weight"
    path = os.path.join(entry, SHARD1)
    tensors = _tensors(path)
    tensors[name] = tensors[name][:-1].contiguous()  # one row short: an uneven or wrong shard
    save_file(tensors, path)
    _, got_shape = _reader_view(path)[name]
    info = _manifest(entry)["params"][name]
    assert info["kind"] == "dtensor" and got_shape != info["local_shape"]
    problems = _problems(entry)
    assert [(p["shard"], p["param"]) for p in problems] == [(SHARD1, name)]
    assert str(got_shape) in problems[0]["problem"] and str(info["local_shape"]) in problems[0]["problem"]


def test_a_plain_tensor_is_checked_against_global_shape(entry: str) -> None:
    manifest = _manifest(entry)
    info = manifest["params"]["final_norm.weight"]
    assert info["kind"] == "tensor"
    info["global_shape"] = [info["global_shape"][0] + 1]
    Path(entry, "manifest.json").write_text(json.dumps(manifest))
    problems = _problems(entry)
    assert {(p["shard"], p["param"]) for p in problems} == {
        (f"shard{i}-of-4.safetensors", "final_norm.weight") for i in range(4)}


def test_names_missing_and_extra_with_the_zero_init_patterns_allowed(entry: str) -> None:
    manifest = _manifest(entry)
    manifest["params"]["blocks.0.attn.gate_compress.weight"] = {  # FastVideo zero-inits it when absent
        "kind": "tensor", "dtype": "torch.float32", "global_shape": [4]}
    manifest["params"]["blocks.1.mlp.weight"] = {"kind": "tensor", "dtype": "torch.float32", "global_shape": [4]}
    Path(entry, "manifest.json").write_text(json.dumps(manifest))
    path = os.path.join(entry, SHARD1)
    tensors = _tensors(path)
    tensors["stray.bias"] = torch.zeros(2)
    save_file(tensors, path)
    held = set(_reader_view(path))
    missing = set(manifest["params"]) - held
    assert missing == {"blocks.0.attn.gate_compress.weight", "blocks.1.mlp.weight"}
    assert held - set(manifest["params"]) == {"stray.bias"}
    got = {(p["shard"], p["param"]) for p in _problems(entry)}
    expected = {(f"shard{i}-of-4.safetensors", "blocks.1.mlp.weight") for i in range(4)} | {(SHARD1, "stray.bias")}
    assert got == expected


@pytest.mark.parametrize("change", ["truncate", "append"])
def test_a_file_safetensors_refuses_fails_verification(entry: str, change: str) -> None:
    path = os.path.join(entry, SHARD1)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:-3] if change == "truncate" else data + b"\0" * 3)
    assert _safe_open_refuses(path)
    problems = _problems(entry)
    assert problems and {p["shard"] for p in problems} == {SHARD1}
    if change == "truncate":  # the tensor whose bytes run past the end is named
        assert any(p["param"] is not None and "truncated" in p["problem"] for p in problems)


def test_verify_changes_no_mtime_or_atime(entry: str) -> None:
    """atime set older than mtime: a plain read would move it under relatime; verify must not."""
    paths = [entry, *(os.path.join(entry, n) for n in os.listdir(entry))]
    for i, p in enumerate(paths):
        os.utime(p, ns=(1_000_000_000 + i, 2_000_000_000 + i), follow_symlinks=False)
    before = {p: (os.lstat(p).st_atime_ns, os.lstat(p).st_mtime_ns) for p in paths}
    scan = scan_cache(os.path.dirname(entry), check_headers=False)
    for p in paths:  # the scan itself leaves them alone too
        os.utime(p, ns=before[p], follow_symlinks=False)
    assert verify_cache(scan, deep=True).ok
    assert {p: (os.lstat(p).st_atime_ns, os.lstat(p).st_mtime_ns) for p in paths} == before


def test_deep_reads_every_byte(entry: str) -> None:
    scan = scan_cache(os.path.dirname(entry))
    seen: list[tuple[int, int]] = []
    result = verify_cache(scan, deep=True, progress=lambda done, total, key: seen.append((done, total)))
    sizes = sum(os.path.getsize(os.path.join(entry, f"shard{i}-of-4.safetensors")) for i in range(4))
    assert result.entries[0].bytes_read == sizes
    assert seen[-1] == (sizes, sizes)


def test_deep_progress_ends_at_its_total_when_an_entry_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    good = write_cache_entry(root, num_shards=2, seed=1)
    unread = write_cache_entry(root, num_shards=2, status="incomplete", seed=2)  # shards but no manifest
    shards = [os.path.join(d, n) for d in (good, unread) for n in os.listdir(d) if n.endswith(".safetensors")]
    total = sum(os.path.getsize(p) for p in shards)
    seen: list[tuple[int, int]] = []
    result = verify_cache(scan_cache(root), deep=True, progress=lambda done, all_, key: seen.append((done, all_)))
    assert result.ok and result.not_verifiable and seen[-1] == (total, total)
    assert all(a <= b for (a, _), (b, _) in zip(seen, seen[1:], strict=False))  # never backwards


def test_cli_json_exit_codes_and_keys(entry: str, cli) -> None:
    root = os.path.dirname(entry)
    key = os.path.basename(entry)
    code, out, _ = cli(["cache", "verify", root, "--json"])
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and [e["key"] for e in doc["entries"]] == [key]
    path = os.path.join(entry, SHARD1)
    tensors = _tensors(path)
    tensors["final_norm.weight"] = tensors["final_norm.weight"].to(torch.float16)
    save_file(tensors, path)
    code, out, _ = cli(["cache", "verify", root, "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    (only,) = doc["entries"]
    assert only["ok"] is False and only["problems"][0]["shard"] == SHARD1
    assert only["problems"][0]["param"] == "final_norm.weight"
    code, out, _ = cli(["cache", "verify", root])
    assert code == 1 and f"{SHARD1}: 'final_norm.weight': dtype" in out
    code, out, _ = cli(["cache", "verify", root, "--key", "0" * 16, "--json"])
    assert code == 1 and json.loads(out)["missing"] == ["0" * 16]
    code, _, err = cli(["cache", "verify", root, "--key", "nope"])
    assert code == 2 and err.startswith("error: --key")


def test_cli_a_failed_verification_ends_in_one_error_line(entry: str, cli) -> None:
    """As every command that runs and fails (docs/cli.md): one `error:` line, and "error" under --json."""
    root = os.path.dirname(entry)
    key = os.path.basename(entry)
    path = os.path.join(entry, SHARD1)
    tensors = _tensors(path)
    tensors["final_norm.weight"] = tensors["final_norm.weight"].to(torch.float16)
    save_file(tensors, path)
    assert _reader_view(path)["final_norm.weight"][0] == "F16"  # safetensors' own reader
    code, out, err = cli(["cache", "verify", root])
    assert code == 1 and f"{SHARD1}: 'final_norm.weight': dtype" in out
    (line,) = err.splitlines()
    assert line.startswith("error: 1 of 1 verifiable entry failed verification") and key in line and SHARD1 in line
    code, out, err = cli(["cache", "verify", root, "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and key in doc["error"] and doc["entries"][0]["key"] == key
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    code, out, err = cli(["cache", "verify", root, "--key", "0" * 16, "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["missing"] == ["0" * 16] and "0" * 16 in doc["error"]


def _unverifiable_root(root: Path) -> dict[str, str]:
    """One entry of each kind that has nothing to verify the shards against, and a good one."""
    return {"good": os.path.basename(write_cache_entry(root, "a" * 16, num_shards=2, seed=1)),
            "crashed": os.path.basename(write_cache_entry(root, "1" * 16, num_shards=2, seed=2, status="incomplete")),
            "writing": os.path.basename(write_cache_entry(root, "2" * 16, num_shards=2, seed=3, status="writing")),
            "empty": os.path.basename(write_cache_entry(root, "3" * 16, num_shards=2, status="empty"))}


def test_entries_without_a_manifest_are_not_verifiable_not_failed(tmp_path: Path, cli) -> None:
    """Issue 29 item 1: a write in progress, a crashed write and an empty entry are no failure."""
    root = tmp_path / "cache"
    keys = _unverifiable_root(root)
    assert not (root / keys["crashed"] / "manifest.json").exists() and not os.listdir(root / keys["empty"])
    result = verify_cache(scan_cache(root))
    by_key = {e.key: e for e in result.entries}
    assert result.ok and by_key[keys["good"]].ok and by_key[keys["good"]].not_verifiable is None
    for name in ("crashed", "writing", "empty"):
        entry = by_key[keys[name]]
        assert not entry.ok and not entry.failed and not entry.problems and entry.not_verifiable
    assert "empty" in by_key[keys["empty"]].not_verifiable
    code, out, err = cli(["cache", "verify", str(root)])
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert f"{keys['empty']}  not verifiable: empty entry directory (nothing written)" in lines
    assert any(line.startswith(f"{keys['crashed']}  not verifiable: no manifest.json yet") for line in lines)
    assert lines[-1] == "all 1 verifiable entry verified; 3 not verifiable (no manifest.json yet, or empty)"
    code, out, _ = cli(["cache", "verify", str(root), "--json"])
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True
    verdicts = {e["key"]: (e["ok"], e["not_verifiable"], e["problems"]) for e in doc["entries"]}
    assert verdicts[keys["good"]] == (True, None, [])
    assert all(verdicts[keys[n]][0] is False and verdicts[keys[n]][1] and verdicts[keys[n]][2] == []
               for n in ("crashed", "writing", "empty"))
    code, out, _ = cli(["cache", "verify", str(root), "--key", keys["empty"]])
    assert code == 0 and out.splitlines()[-1].startswith("nothing verifiable: 1 entry")


def test_the_error_line_leads_with_an_entry_fastvideo_would_load(tmp_path: Path, cli) -> None:
    """A broken manifest (FastVideo reloads in full) sorts first by key; the error names the shard instead."""
    from fvconsole.demo.cache_builders import DISAGREEING_PARAM

    root = tmp_path / "cache"
    keys = _unverifiable_root(root)
    broken = os.path.basename(write_cache_entry(root, "0" * 16, num_shards=2, seed=4, status="invalid-manifest"))
    odd = os.path.basename(write_cache_entry(root, "f" * 16, num_shards=2, seed=5, status="disagreeing-shard"))
    code, out, err = cli(["cache", "verify", str(root)])
    (line,) = err.splitlines()
    assert code == 1 and out.splitlines()[-1] == (
        "2 of 3 verifiable entries failed verification; 3 not verifiable (no manifest.json yet, or empty)")
    assert line.startswith(f"error: 2 of 3 verifiable entries failed verification; first: {odd}: shard1-of-2.safetensors: "
                           f"'{DISAGREEING_PARAM}': dtype")
    assert broken in out and all(keys[n] not in line for n in keys)


def test_fleet_cache_verify_keeps_entries_without_a_manifest_apart(tmp_path: Path, srun_on_path: str,
                                                                   capsys) -> None:
    """A node-local cache: only rank 0's node has the manifest; every other node's entry is not verifiable."""
    from fvconsole.cli import main
    from fvconsole.demo.cache_builders import make_key

    key = make_key("fleet-per-node")
    write_cache_entry(tmp_path / "a1" / "wcache", key, num_shards=2, seed=1)
    write_cache_entry(tmp_path / "a2" / "wcache", key, num_shards=2, seed=1, status="incomplete", present=[1])
    template = str(tmp_path / "{node}" / "wcache")
    code = main(["fleet", "cache", "verify", "--nodes", "a[1-2]", "--cache-root", template, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] is True and doc["failing"] == []
    assert [(n["node"], n["key"]) for n in doc["not_verifiable"]] == [("a2", key)]
    assert "manifest.json" in doc["not_verifiable"][0]["why"]
    code = main(["fleet", "cache", "verify", "--nodes", "a[1-2]", "--cache-root", template])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and "not verifiable: 1 entry on a2" in out and "every verifiable entry agrees" in out


def test_cli_deep_prints_progress_on_stderr(entry: str, cli) -> None:
    code, out, err = cli(["cache", "verify", os.path.dirname(entry), "--deep"])
    assert code == 0 and "read" in out and "progress:" in err


def test_the_demo_cache_has_a_shard_whose_header_disagrees(tmp_path: Path) -> None:
    from fvconsole.demo.cache_builders import DISAGREEING_PARAM, build_demo_cache

    root = tmp_path / "cache"
    build_demo_cache(root)
    scan = scan_cache(root)
    result = verify_cache(scan)
    by_key = {e.key: e for e in result.entries}
    complete = [e for e in scan.entries if e.status == "complete"]
    failing = [e for e in complete if not by_key[e.key].ok]
    assert len(failing) == 1  # `cache ls` calls it complete: only verify sees it
    (problem,) = by_key[failing[0].key].problems
    shard = os.path.join(failing[0].path, problem.shard)
    assert problem.param == DISAGREEING_PARAM
    manifest = _manifest(failing[0].path)["params"][DISAGREEING_PARAM]
    assert _reader_view(shard)[DISAGREEING_PARAM][0] == "BF16" and manifest["dtype"] == "torch.float32"


def test_evict_invalid_verify_also_selects_what_fails_verification(tmp_path: Path, cli) -> None:
    from fvconsole.demo.cache_builders import DISAGREEING_PARAM

    root = tmp_path / "cache"
    old = 1_000_000_000.0
    good = os.path.basename(write_cache_entry(root, num_shards=2, seed=1, last_used=old))
    odd = write_cache_entry(root, num_shards=2, seed=2, status="disagreeing-shard", last_used=old)
    broken = os.path.basename(write_cache_entry(root, num_shards=2, seed=3, status="invalid-shard", last_used=old))
    assert _reader_view(os.path.join(odd, "shard1-of-2.safetensors"))[DISAGREEING_PARAM][0] == "BF16"
    odd = os.path.basename(odd)
    code, out, _ = cli(["cache", "evict", str(root), "--invalid", "--json"])
    assert code == 0 and {e["key"] for e in json.loads(out)["evict"]} == {broken}
    code, out, _ = cli(["cache", "evict", str(root), "--invalid", "--verify", "--json"])
    planned = {e["key"]: e["reason"] for e in json.loads(out)["evict"]}
    assert code == 0 and set(planned) == {broken, odd}
    assert "fails verification" in planned[odd] and DISAGREEING_PARAM in planned[odd]
    code, out, _ = cli(["cache", "evict", str(root), "--invalid", "--verify", "--yes", "--no-journal", "--json"])
    assert code == 0, out
    assert sorted(os.listdir(root)) == [good]
    code, _, err = cli(["cache", "evict", str(root), "--verify"])
    assert code == 2 and err.startswith("error: ")


def test_fleet_cache_verify_names_the_node_the_entry_and_the_shard(tmp_path: Path, srun_on_path: str,
                                                                   capsys) -> None:
    from fvconsole.cli import main
    from fvconsole.demo.cache_builders import DISAGREEING_PARAM, make_key

    key = make_key("fleet-verify")
    for node in ("a1", "a2"):
        write_cache_entry(tmp_path / node / "wcache", key, num_shards=2, seed=1,
                          status="disagreeing-shard" if node == "a2" else "complete")
    odd = tmp_path / "a2" / "wcache" / key / "shard1-of-2.safetensors"
    assert _reader_view(str(odd))[DISAGREEING_PARAM][0] == "BF16"  # safetensors' own reader
    template = str(tmp_path / "{node}" / "wcache")
    code = main(["fleet", "cache", "verify", "--nodes", "a[1-2]", "--cache-root", template, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False
    (failing,) = doc["failing"]
    assert (failing["node"], failing["key"]) == ("a2", key)
    assert {(p["shard"], p["param"]) for p in failing["problems"]} == {("shard1-of-2.safetensors", DISAGREEING_PARAM)}
    assert doc["nodes"]["a1"]["ok"] is True
    assert "a2" in doc["error"] and key in doc["error"]
    code = main(["fleet", "cache", "verify", "--nodes", "a[1-2]", "--cache-root", template])
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert code == 1 and key in out and line.startswith("error: 1 entry failed verification on a2")
    code = main(["fleet", "cache", "verify", "--nodes", "a1", "--cache-root", template])
    assert code == 0 and "every verifiable entry agrees" in capsys.readouterr().out
    code = main(["fleet", "cache", "verify", "--nodes", "a1,nosuch1", "--cache-root", template, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 3 and "error" in doc["nodes"]["nosuch1"]
    code = main(["fleet", "cache", "verify", "--nodes", "nosuch1", "--cache-root", template])
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert code == 1 and "agrees" not in out and "no node answered" in out
    assert line.startswith("error: 1 of 1 node failed (nosuch1); first: nosuch1: ")


def test_fleet_cache_verify_says_one_problem_and_three_and_one_node_of_two(tmp_path: Path, srun_on_path: str,
                                                                           capsys) -> None:
    """Counts with their noun (issue 28 item 3): "1 problem", "3 problems", "1 of 2 nodes", never "problem(s)"."""
    from fvconsole.cli import main
    from fvconsole.demo.cache_builders import DISAGREEING_PARAM, make_key

    key = make_key("fleet-verify-counts")
    for node in ("a1", "a2"):
        write_cache_entry(tmp_path / node / "wcache", key, num_shards=2, seed=1, status="disagreeing-shard")
    # a2's other shard disagrees too, and its header's bytes no longer fit its dtype: 3 problems
    _rewrite_header(str(tmp_path / "a2" / "wcache" / key / "shard0-of-2.safetensors"),
                    _set(DISAGREEING_PARAM, "dtype", "BF16"))
    template = str(tmp_path / "{node}" / "wcache")
    code = main(["fleet", "cache", "verify", "--nodes", "a[1-2]", "--cache-root", template])
    out, err = capsys.readouterr()
    assert code == 1 and err.startswith("error: 2 entries failed verification on a[1-2]")
    assert f"a1  {key}  1 problem\n" in out and f"a2  {key}  3 problems\n" in out
    code = main(["fleet", "cache", "verify", "--nodes", "a1,nosuch1", "--cache-root", template])
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert code == 3 and line.startswith("error: 2 of 2 nodes failed (a1,nosuch1); first: a1: "
                                         "1 of 1 verifiable entry failed verification; ")
    assert "(1 of 2 nodes answered)" in out
    write_cache_entry(tmp_path / "a1" / "wcache", key, num_shards=2, seed=1, status="complete")
    code = main(["fleet", "cache", "verify", "--nodes", "a1,nosuch[1-2]", "--cache-root", template])
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert code == 3 and "verified on 1 of 3 nodes: every verifiable entry agrees" in out
    assert line.startswith("error: 2 of 3 nodes failed (nosuch[1-2]); first: nosuch1: ")
    code = main(["fleet", "cache", "verify", "--nodes", "a1", "--cache-root", template])
    assert code == 0 and "verified on 1 of 1 node: every verifiable entry agrees" in capsys.readouterr().out


# ---------------------------------------------------------------- hostile headers (issue 29 item 2)

def _rewrite_header(path: str, change) -> None:
    """Rewrite a real shard's JSON header through ``change(header)``, its tensor data kept as it is.

    The header is read as the format says (8-byte little-endian length, then JSON), not by the
    code under test.
    """
    data = Path(path).read_bytes()
    times = os.stat(path)
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    change(header)
    raw = json.dumps(header).encode()
    Path(path).write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + length:])
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))  # the entry's age as it was


def _set(name: str, field: str, value):
    def change(header: dict) -> None:
        header[name][field] = value
    return change


HOSTILE_HEADERS = {
    "dtype a list": _set("final_norm.weight", "dtype", ["F32"]),
    "dtype an object": _set("final_norm.weight", "dtype", {"F32": 1}),
    "elements beyond int64": _set("final_norm.weight", "shape", [2**32, 2**32]),
    "bytes beyond int64": _set("final_norm.weight", "shape", [2**62]),
    "a dim beyond int64": _set("final_norm.weight", "shape", [2**64]),
    "a 4000-digit dim": _set("final_norm.weight", "shape", [10**4000]),
    "60,000 dims": _set("final_norm.weight", "shape", [2**62] * 60_000),
    "a 4000-digit offset": _set("final_norm.weight", "data_offsets", [0, 10**4000]),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_HEADERS))
def test_a_hostile_header_number_is_that_tensors_problem(entry: str, case: str) -> None:
    path = os.path.join(entry, SHARD1)
    _rewrite_header(path, HOSTILE_HEADERS[case])
    assert _safe_open_refuses(path)  # safetensors' own reader: the file is unusable
    result = verify_entry(entry, os.path.basename(entry))
    named = [p for p in result.problems if p.shard == SHARD1 and p.param == "final_norm.weight"]
    assert named, result.problems
    assert all(len(p.text()) < 400 for p in result.problems)  # bounded lines, whatever the numbers
    others = [p for p in result.problems if p.shard != SHARD1]
    assert others == []  # the other shards verified as before
    json.dumps(result.to_json())  # every number in the verdict can be written


def test_the_cli_keeps_going_past_an_entry_with_a_hostile_header(tmp_path: Path, cli) -> None:
    """cache ls, cache verify, cache evict --invalid --verify: one bad entry is that entry's problem."""
    root = tmp_path / "cache"
    old = 1_000_000_000.0
    good = os.path.basename(write_cache_entry(root, "a" * 16, num_shards=2, seed=1, last_used=old))
    bad = write_cache_entry(root, "b" * 16, num_shards=2, seed=2, last_used=old)
    odd = os.path.basename(write_cache_entry(root, "c" * 16, num_shards=2, seed=3, status="disagreeing-shard",
                                             last_used=old))
    _rewrite_header(os.path.join(bad, "shard0-of-2.safetensors"), HOSTILE_HEADERS["60,000 dims"])
    bad = os.path.basename(bad)
    code, out, err = cli(["cache", "verify", str(root), "--json"])
    doc = json.loads(out)
    assert code == 1 and "internal error" not in err
    verdicts = {e["key"]: e["ok"] for e in doc["entries"]}
    assert verdicts == {good: True, bad: False, odd: False}
    code, out, err = cli(["cache", "evict", str(root), "--invalid", "--verify", "--json"])
    assert code == 0, err
    assert {e["key"] for e in json.loads(out)["evict"]} == {bad, odd}
    code, out, err = cli(["cache", "ls", str(root), "--json"])
    assert code == 0 and {e["key"] for e in json.loads(out)["entries"]} == {good, bad, odd}


def test_a_60000_dim_header_is_judged_as_its_size_says(tmp_path: Path) -> None:
    """A 1 MB header is a verdict, not a minute of bignum multiplication (the time is a benchmark row)."""
    root = tmp_path / "cache"
    entry = write_cache_entry(root, "d" * 16, num_shards=2, seed=4)
    shard = os.path.join(entry, "shard1-of-2.safetensors")
    _rewrite_header(shard, _set("final_norm.weight", "shape", [2**62] * 80_000))
    assert os.path.getsize(shard) > 2**20
    (problem,) = [p for p in verify_entry(entry, "d" * 16).problems if "elements" in p.problem]
    assert "80000 dims" in problem.problem
