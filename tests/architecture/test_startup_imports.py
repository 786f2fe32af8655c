"""Headless paths stay light: no torch, textual or pyarrow unless the data demands it.

On a login node ``import torch`` from a shared filesystem takes seconds, so every headless
subcommand except ``demo`` must run without it (issue 14). Each command below runs for real,
on real fixtures (a DCP checkpoint, Parquet, safetensors), in a fresh interpreter that then
reports which heavy modules it loaded. ``verify --deep`` reads Parquet and may import pyarrow;
``--torch-check`` asks for torch and must get it.
`tests/architecture/test_import_hygiene.py` covers importing the core modules themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "textual", "pyarrow")

_PROBE = """
import contextlib, io, json, sys
HEAVY = ("torch", "textual", "pyarrow")
from fvconsole.cli import main
results = []
for args in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
    # sys.modules only grows, so the first command listing a module is the one that imported it.
    results.append({"code": code, "stdout": out.getvalue(), "heavy": [m for m in HEAVY if m in sys.modules]})
print(json.dumps(results))
"""


def _run_cli(*commands: list[str], prelude: str = "") -> list[dict]:
    """Run several ``fvconsole`` commands in order in ONE fresh interpreter (startup is slow)."""
    code = prelude + _PROBE
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(commands)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real small cache root: complete, partial and invalid entries (real safetensors files)."""
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path_factory.mktemp("cache") / "root"
    write_cache_entry(root, num_shards=2, seed=1)
    write_cache_entry(root, num_shards=4, status="partial", seed=2)
    write_cache_entry(root, num_shards=2, status="invalid-shard", seed=3)
    return str(root)


HELP_COMMANDS = [
    ["--help"],
    ["--version"],
    ["checkpoints", "--help"],
    ["checkpoints", "ls", "--help"],
    ["checkpoints", "show", "--help"],
    ["migrate", "--help"],
    ["sidecars", "--help"],
    ["cache", "--help"],
    ["cache", "ls", "--help"],
    ["cache", "evict", "--help"],
    ["cache", "verify", "--help"],
]


def test_help_texts_and_cache_ls_json_do_not_import_heavy_libraries(cache_root: str) -> None:
    commands = [*HELP_COMMANDS, ["cache", "ls", cache_root, "--json"]]
    results = _run_cli(*commands)
    for args, result in zip(commands, results, strict=True):
        assert result["code"] == 0, f"`fvconsole {' '.join(args)}` exited {result['code']}"
        assert result["stdout"].strip(), f"`fvconsole {' '.join(args)}` printed nothing"
        assert result["heavy"] == [], f"`fvconsole {' '.join(args)}` imports {result['heavy']}"
    payload = json.loads(results[-1]["stdout"])
    assert len(payload["entries"]) == 3, "the scan must have looked at every entry"
    statuses = sorted(entry["status"] for entry in payload["entries"])
    assert "complete" in statuses and "invalid" in statuses


def test_probe_detects_a_heavy_import() -> None:
    """Guard the guard: the same probe does see a heavy module when something really imports it."""
    results = _run_cli(["--version"], prelude="import pyarrow  # noqa: F401\n")
    assert results[0]["heavy"] == ["pyarrow"]


def test_checkpoints_ls_and_migrate_dry_run_do_not_import_heavy_libraries(tmp_path) -> None:
    """The DCP keys come from the core's own reader, so listing and planning need no torch."""
    from fvconsole.demo.builders import build_run

    run = build_run(tmp_path / "run", steps=(2,), kind="legacy", num_gpus=2)
    out = tmp_path / "sidecars"
    dry_run = ["migrate", "--config", run.config_path, "--checkpoint", run.checkpoints[0], "--output-dir", str(out),
               "--expected-step", "2", "--expected-world-size", "2", "--consumed-batches-per-rank", "2", "--json"]
    listing, plan = _run_cli(["checkpoints", "ls", run.output_dir, "--json"], dry_run)
    assert listing["code"] == 0 and plan["code"] == 0, (listing, plan["stdout"][-500:])
    assert listing["heavy"] == [], f"`checkpoints ls` imports {listing['heavy']}"
    assert plan["heavy"] == [], f"the migrate dry run imports {plan['heavy']}"
    assert "legacy" in listing["stdout"], "the listing must have read the DCP keys to tell the kind"
    assert len(json.loads(plan["stdout"])["plan"]["ranks"]) == 2
    assert not out.exists(), "a dry run writes nothing"


_FRESH = """
import contextlib, io, json, sys
from fvconsole.cli import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                  "heavy": [m for m in ("torch", "textual", "pyarrow") if m in sys.modules]}))
"""


def _run_fresh(args: list[str]) -> dict:
    """One ``fvconsole`` command in its own fresh interpreter; its result and heavy modules."""
    proc = subprocess.run([sys.executable, "-c", _FRESH, json.dumps(args)], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).parent)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real legacy run (DCP checkpoint, Parquet dataset) and a real safetensors cache root."""
    from fvconsole.demo.builders import build_run
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path_factory.mktemp("headless")
    run = build_run(root / "run", steps=(2,), kind="legacy", num_gpus=4)
    cache = root / "cache"
    keep = write_cache_entry(cache, num_shards=2, seed=1)
    victim = write_cache_entry(cache, num_shards=2, status="partial", seed=2)
    return {"run": run, "cache": str(cache), "keep": os.path.basename(keep), "victim": os.path.basename(victim),
            "out": str(root / "sidecars")}


def _commands(ws: dict) -> list[tuple[list[str], set[str]]]:
    """(argv, heavy modules it may import), in an order where each command's inputs exist."""
    run, out, cache = ws["run"], ws["out"], ws["cache"]
    ckpt = run.checkpoints[0]
    plan = ["migrate", "--config", run.config_path, "--checkpoint", ckpt, "--output-dir", out,
            "--expected-step", "2", "--expected-world-size", "4", "--consumed-batches-per-rank", "2"]
    verify = ["sidecars", "verify", "--config", run.config_path, "--checkpoint", ckpt, "--sidecar-dir", out]
    none: set[str] = set()
    return [
        (["--help"], none),
        (["checkpoints", "ls", run.output_dir], none),
        (["checkpoints", "ls", run.output_dir, "--json"], none),
        (["checkpoints", "show", ckpt], none),
        (["checkpoints", "show", ckpt, "--json"], none),
        (plan, none),
        ([*plan, "--json"], none),
        ([*plan, "--yes"], none),
        ([*plan, "--yes", "--overwrite", "--json"], none),
        (verify, none),
        ([*verify, "--json"], none),
        ([*verify, "--deep", "--json"], {"pyarrow"}),
        (["cache", "ls", cache], none),
        (["cache", "ls", cache, "--json"], none),
        (["cache", "verify", cache, "--json"], none),
        (["cache", "verify", cache, "--deep"], none),
        (["cache", "evict", cache, "--key", ws["victim"]], none),
        (["cache", "evict", cache, "--key", ws["victim"], "--yes", "--json"], none),
        (["fleet", "--help"], none),
        (["fleet", "cache", "--help"], none),
        (["fleet", "cache", "ls", "--help"], none),
        (["fleet", "cache", "evict", "--help"], none),
        (["fleet", "cache", "verify", "--help"], none),
    ]


def test_every_headless_subcommand_runs_without_heavy_imports(workspace: dict) -> None:
    for args, allowed in _commands(workspace):
        result = _run_fresh(args)
        shown = " ".join(os.path.basename(a) if os.sep in a else a for a in args)
        assert result["code"] == 0, f"`fvconsole {shown}` exited {result['code']}: {result['stderr'][-500:]}"
        assert result["stdout"].strip(), f"`fvconsole {shown}` printed nothing"
        unexpected = set(result["heavy"]) - allowed
        assert not unexpected, f"`fvconsole {shown}` imports {sorted(unexpected)}"
    # The commands really did their work (so "no import" is not "did nothing").
    assert len(os.listdir(workspace["out"])) == 5  # four sidecars and the receipt
    assert not os.path.exists(os.path.join(workspace["cache"], workspace["victim"]))
    deep = _run_fresh([*_commands(workspace)[11][0]])
    assert "pyarrow" in deep["heavy"] and json.loads(deep["stdout"])["ranks"][0]["next_sample_id"]


def test_torch_check_imports_torch_when_asked(workspace: dict) -> None:
    """Guard the guard: the probe sees torch when a command really needs it."""
    run = workspace["run"]
    out = str(Path(workspace["out"]).with_name("checked"))
    args = ["migrate", "--config", run.config_path, "--checkpoint", run.checkpoints[0], "--output-dir", out,
            "--expected-step", "2", "--expected-world-size", "4", "--consumed-batches-per-rank", "2", "--yes",
            "--torch-check"]
    result = _run_fresh(args)
    assert result["code"] == 0, result["stderr"][-500:]
    assert "torch" in result["heavy"]
