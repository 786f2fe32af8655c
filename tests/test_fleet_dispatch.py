"""srun dispatch without Slurm: command construction, result parsing, timeouts, per-node failures.

A stand-in ``srun`` (a small Python script in tmp_path) runs the node command locally with
``SLURMD_NODENAME`` set, like srun does on a node, and misbehaves for chosen node names
(hang, garbage, crash), so every failure path of the real dispatcher is exercised. The real
cluster is covered by ``test_fleet_slurm.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import write_fake_srun

from fvconsole.cli import main
from fvconsole.core.errors import FvError, UsageError
from fvconsole.core.fleet.aggregate import exit_code_for
from fvconsole.core.fleet.dispatch import (
    NodeOutcome,
    NodeSelection,
    build_plan,
    node_command,
    outcome_from_output,
    parse_node_output,
    run_plan,
    select_nodes,
)
from fvconsole.core.fleet.node import envelope, format_line, substitute_node
from fvconsole.demo.cache_builders import make_key, write_cache_entry


@pytest.fixture
def fake_srun(tmp_path: Path) -> str:
    return write_fake_srun(tmp_path / "bin")


@pytest.fixture
def caches(tmp_path: Path) -> tuple[str, str]:
    """Per-node roots tmp/<node>/wcache with one entry each; returns (template, key)."""
    key = make_key("fleet-dispatch")
    for node in ("a1", "a2", "hang1", "garbage1", "down1", "twice1"):
        write_cache_entry(tmp_path / node / "wcache", key, num_shards=2, status="complete", tensor_bytes=256)
    return str(tmp_path / "{node}" / "wcache"), key


def test_node_command_shape() -> None:
    sel = NodeSelection(("n1", "n2"), job_id="42", partition="gpu", srun_args=("--account=abc",))
    cmd = node_command("/usr/bin/srun", sel, "n2", ["cache", "ls", "/x/{node}", "--json"])
    argv = list(cmd.argv)
    assert argv[0] == "/usr/bin/srun"
    for flag in ("--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--nodelist=n2", "--jobid=42",
                 "--overlap", "--partition=gpu", "--account=abc"):
        assert flag in argv
    tail = argv[argv.index(sys.executable):]
    assert tail == [sys.executable, "-m", "fvconsole.core.fleet.node", "cache", "ls", "/x/{node}", "--json"]
    without_job = node_command("srun", NodeSelection(("n1",)), "n1", ["cache", "ls"])
    assert "--overlap" not in without_job.argv and not any(a.startswith("--jobid") for a in without_job.argv)


def test_node_side_substitutes_and_wraps(tmp_path: Path) -> None:
    assert substitute_node(["/r/{node}/c", "--json", "{node}{node}"], "n7") == ["/r/n7/c", "--json", "n7n7"]
    write_cache_entry(tmp_path / "n7" / "wcache", make_key("x"), num_shards=1, tensor_bytes=128)
    env = {**os.environ, "SLURMD_NODENAME": "n7"}
    out = subprocess.run(
        [sys.executable, "-m", "fvconsole.core.fleet.node", "cache", "ls", str(tmp_path / "{node}" / "wcache"),
         "--json"], capture_output=True, text=True, env=env, timeout=60,
    )
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("FVNODE n7 ")
    payload, problem = parse_node_output("n7", out.stdout)
    assert problem is None
    assert payload["exit"] == 0
    assert payload["output"]["root"] == str(tmp_path / "n7" / "wcache")
    assert [e["key"] for e in payload["output"]["entries"]] == [make_key("x")]


def test_node_side_without_slurm_reports_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLURMD_NODENAME"}
    out = subprocess.run([sys.executable, "-m", "fvconsole.core.fleet.node", "cache", "ls", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1
    assert "SLURMD_NODENAME is not set" in out.stdout


@pytest.mark.parametrize(
    ("stdout", "fragment"),
    [
        ("FVNODE n1 {bad", "invalid JSON"),
        ("FVNODE n2 {}", "answered as node 'n2'"),
        ("FVNODE n1 {}\nFVNODE n1 {}", "2 result lines"),
        ("FVNODE n1 [1]", "not a JSON object"),
        ("FVNODE n1", "truncated"),
        # Regression: these raised AttributeError / RecursionError instead of a per-node problem.
        ('FVNODE n1 {"a": ' + "1" * 5000 + "}", "unusable JSON"),
        ("FVNODE n1 " + "[" * 100_000 + "]" * 100_000, "unusable JSON"),
    ],
)
def test_parse_rejects_malformed_lines(stdout: str, fragment: str) -> None:
    payload, problem = parse_node_output("n1", stdout)
    assert payload is None and fragment in problem


def test_outcome_classification() -> None:
    ok = outcome_from_output("n1", "noise\n" + format_line("n1", envelope("n1", 0, '{"entries": []}')), "", 0)
    assert ok.ok and ok.output == {"entries": []}
    failed = outcome_from_output("n1", format_line("n1", envelope("n1", 1, '{"error": "root missing"}')), "", 0)
    assert failed.kind == "failed" and failed.error == "root missing"
    assert failed.to_json()["error"] == "root missing" and failed.to_json()["exit_code"] == 1
    invalid = outcome_from_output("n1", format_line("n1", envelope("n1", 0, "not json at all")), "", 0)
    assert invalid.kind == "invalid" and "invalid JSON" in invalid.error and "not json" in invalid.error
    usage = outcome_from_output("n1", format_line("n1", envelope("n1", 2, "")), "fvconsole: error: bad flag\n", 0)
    assert usage.kind == "failed" and usage.error == "exit 2: fvconsole: error: bad flag"
    silent = outcome_from_output("n1", "", "srun: error: Node n1 not responding\n", 1)
    assert silent.kind == "unreachable" and "not responding" in silent.error


def test_exit_codes() -> None:
    good = NodeOutcome("a", "ok", 0, {}, None)
    bad = NodeOutcome("b", "failed", 1, {"error": "x"}, "x")
    hung = NodeOutcome("c", "timeout", None, None, "timed out")
    assert exit_code_for([good, good]) == 0
    assert exit_code_for([good, bad]) == 3
    assert exit_code_for([bad, bad]) == 1
    assert exit_code_for([hung], executing=True) == 3
    assert exit_code_for([hung], executing=False) == 1


def test_dispatch_reports_each_failure_per_node(fake_srun: str, caches: tuple[str, str]) -> None:
    template, key = caches
    sel = NodeSelection(("a1", "hang1", "garbage1", "down1", "twice1", "a2", "nosuch1"))
    plan = build_plan(sel, ["cache", "ls", template, "--json"], timeout=3, parallel=8, srun=fake_srun)
    seen: list[str] = []
    run = run_plan(plan, progress=lambda done, total, msg: seen.append(msg))
    by = run.by_node()
    assert [o.node for o in run.outcomes] == list(sel.nodes)
    assert by["a1"].ok and by["a2"].ok
    assert [e["key"] for e in by["a1"].output["entries"]] == [key]
    assert by["hang1"].kind == "timeout" and "timed out after 3s" in by["hang1"].error
    assert by["garbage1"].kind == "invalid" and "invalid JSON" in by["garbage1"].error
    assert by["down1"].kind == "unreachable" and "Invalid node name" in by["down1"].error
    assert by["twice1"].kind == "invalid"
    assert by["nosuch1"].kind == "failed" and "does not exist" in by["nosuch1"].error
    assert len(seen) == len(sel.nodes)
    assert exit_code_for(run.outcomes) == 3


def test_cli_ls_partial_failure_exit_3(fake_srun: str, caches: tuple[str, str], monkeypatch, capsys) -> None:
    template, key = caches
    monkeypatch.setenv("PATH", os.path.dirname(fake_srun) + os.pathsep + os.environ["PATH"])
    code = main(["fleet", "cache", "ls", "--nodes", "a[1-2],nosuch1", "--cache-root", template, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3
    assert set(out["nodes"]) == {"a1", "a2", "nosuch1"}
    assert "error" in out["nodes"]["nosuch1"] and "entries" in out["nodes"]["a1"]
    assert out["keys"] == {key: {"a1": "complete", "a2": "complete"}}
    assert out["total_bytes"] == out["nodes"]["a1"]["total_bytes"] + out["nodes"]["a2"]["total_bytes"]


def test_cli_without_srun_exit_1(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun anywhere
    code = main(["fleet", "cache", "ls", "--nodes", "n[1-3]", "--cache-root", "/x/{node}", "--json"])
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["error"].startswith("srun not found: fleet commands need Slurm")
    assert "Traceback" not in captured.err


def test_selection_errors(capsys) -> None:
    with pytest.raises(UsageError):
        select_nodes(None, None)
    with pytest.raises(FvError, match="selection is empty"):
        select_nodes("", None)
    with pytest.raises(UsageError, match="not a Slurm job id"):
        select_nodes(None, "12; rm -rf /")
    assert main(["fleet", "cache", "ls", "--cache-root", "/x"]) == 2
    assert main(["fleet", "cache", "ls", "--nodes", "", "--cache-root", "/x", "--json"]) == 1
    assert main(["fleet", "cache", "ls", "--nodes", "n[1-", "--cache-root", "/x", "--json"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert "unbalanced" in json.loads(out[-1])["error"]


def test_evict_needs_a_selector(capsys) -> None:
    assert main(["fleet", "cache", "evict", "--nodes", "n1", "--cache-root", "/x"]) == 2
    assert "nothing selected" in capsys.readouterr().err


def test_fleet_evict_executes_exactly_the_preview(fake_srun: str, tmp_path: Path, monkeypatch, capsys) -> None:
    old, new = make_key("old"), make_key("new")
    for node in ("a1", "a2"):
        write_cache_entry(tmp_path / node / "c", old, num_shards=1, status="incomplete", tensor_bytes=256)
        write_cache_entry(tmp_path / node / "c", new, num_shards=1, status="complete", tensor_bytes=256)
    template = str(tmp_path / "{node}" / "c")
    monkeypatch.setenv("PATH", os.path.dirname(fake_srun) + os.pathsep + os.environ["PATH"])
    assert main(["fleet", "cache", "evict", "--nodes", "a[1-2]", "--cache-root", template, "--invalid", "--json"]) == 0
    preview = json.loads(capsys.readouterr().out)
    assert preview["executed"] is False
    assert [e["key"] for e in preview["nodes"]["a1"]["evict"]] == [old]
    assert (tmp_path / "a1" / "c" / old).exists()  # dry run: nothing deleted
    assert main(["fleet", "cache", "evict", "--nodes", "a[1-2]", "--cache-root", template, "--invalid",
                 "--yes", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["executed"] is True
    assert done["freed_bytes"] == preview["freed_bytes"] > 0
    for node in ("a1", "a2"):
        assert sorted(p.name for p in (tmp_path / node / "c").iterdir()) == [new]
        assert [e["key"] for e in done["nodes"][node]["evict"]] == [old]


def test_fleet_evict_yes_executes_nothing_when_no_node_could_plan(fake_srun: str, tmp_path: Path,
                                                                  monkeypatch, capsys) -> None:
    """Every node's root is missing: --yes dispatches nothing and says executed: false."""
    monkeypatch.setenv("PATH", os.path.dirname(fake_srun) + os.pathsep + os.environ["PATH"])
    template = str(tmp_path / "{node}" / "missing")
    assert main(["fleet", "cache", "evict", "--nodes", "a[1-2]", "--cache-root", template, "--invalid",
                 "--yes", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["executed"] is False and doc["freed_bytes"] == 0
    assert "nothing was executed" in doc["error"]
    assert set(doc["nodes"]) == {"a1", "a2"} and all("error" in n for n in doc["nodes"].values())


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env=env, timeout=60)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_login_and_node_sides_stay_light(tmp_path: Path) -> None:
    """`fleet --help` on the login node and `cache ls` on each node never import torch/textual/pyarrow."""
    login = _modules_after(
        "import contextlib, io\nfrom fvconsole.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['fleet', 'cache', 'ls', '--help'])"
    )
    write_cache_entry(tmp_path / "n1", make_key("light"), num_shards=1, tensor_bytes=128)
    node = _modules_after(
        "import contextlib, io\nfrom fvconsole.core.fleet.node import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['cache', 'ls', {str(tmp_path / '{node}')!r}, '--json'])",
        env={**os.environ, "SLURMD_NODENAME": "n1"},
    )
    assert "fvconsole.core.fleet.node" in node and "fvconsole.core.cache.scan" in node
    for heavy in ("torch", "textual", "pyarrow"):
        assert heavy not in login and heavy not in node, heavy


def test_interrupt_stops_every_srun_in_flight(fake_srun: str, caches: tuple[str, str], tmp_path: Path,
                                              monkeypatch) -> None:
    template, _ = caches
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_SRUN_PIDS", str(pids))
    plan = build_plan(NodeSelection(("hang1", "a1")), ["cache", "ls", template, "--json"], timeout=600,
                      parallel=2, srun=fake_srun)

    def interrupt(done: int, total: int, message: str) -> None:
        # Ctrl-C as soon as a1 answered and hang1's srun is surely running (it never answers)
        for _ in range(300):
            if (pids / "hang1.pid").exists():
                break
            time.sleep(0.1)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, progress=interrupt)
    pid = int((pids / "hang1.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_non_finite_or_non_positive_timeout_is_a_usage_error(value: str, capsys) -> None:
    # Regression: nan/inf passed validation and crashed later as "internal error: ValueError".
    assert main(["fleet", "cache", "ls", "--nodes", "n1", "--cache-root", "/x", f"--timeout={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --timeout must be a positive number of seconds") and "internal" not in err
