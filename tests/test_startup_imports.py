"""Startup paths stay light: no torch, textual or pyarrow for help texts and `cache ls --json`.

`tests/test_import_hygiene.py` covers `fvconsole --help` and the core modules; this extends the
check to the other cheap entry points, run for real in a fresh interpreter each.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
