"""srun dispatch without Slurm: step construction, the frame protocol, timeouts, per-node failures.

A stand-in ``srun`` (a small Python script in tmp_path, see tests/slurm_cluster.py) runs the
node command locally with ``SLURMD_NODENAME`` set, like srun does on a node, labels and cuts
output like srun, and misbehaves for chosen node names (busy, stuck, garbage, down), so
every failure path of the real dispatcher is exercised in both fan-outs. The real cluster is
covered by ``test_fleet_slurm.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fvconsole.cli import main
from fvconsole.cli.node import envelope, substitute_node
from fvconsole.core.fleet.aggregate import exit_code_for
from fvconsole.core.fleet.demux import StepDemux
from fvconsole.core.fleet.dispatch import (
    DispatchOptions,
    NodeOutcome,
    NodeSelection,
    build_steps,
    run_steps,
)
from fvconsole.core.fleet.documents import LS
from fvconsole.core.fleet.frames import CHUNK_CHARS, decode_result, parse_frame, result_lines, start_line
from fvconsole.core.fleet.outcomes import from_envelope
from fvconsole.core.fleet.selection import select_nodes
from fvconsole.core.shared.errors import FvError, UsageError
from fvconsole.demo.cache_builders import make_key, write_cache_entry

FANOUTS = ("per-node", "single-step")


@pytest.fixture
def caches(tmp_path: Path) -> tuple[str, str]:
    """Per-node roots tmp/<node>/wcache with one entry each; returns (template, key)."""
    key = make_key("fleet-dispatch")
    for node in ("a1", "a2", "hang1", "stuck1", "garbage1", "down1", "twice1", "flaky1"):
        write_cache_entry(tmp_path / node / "wcache", key, num_shards=2, status="complete", tensor_bytes=256)
    return str(tmp_path / "{node}" / "wcache"), key


def _demux(lines: list[str], nodes: tuple[str, ...] = ("n1",)) -> StepDemux:
    demux = StepDemux(nodes, cap=1 << 20)
    demux.feed_stdout("".join(line + "\n" for line in lines).encode())
    demux.finish()
    return demux


def test_per_node_and_single_step_shapes(fake_srun: str) -> None:
    sel = NodeSelection(("n1", "n2", "n3"), job_id="42", partition="gpu", srun_args=("--account=abc",))
    args = ["cache", "ls", "/x/{node}", "--json"]
    per = build_steps(sel, args, DispatchOptions(srun=fake_srun, fanout="per-node"))
    assert [s.nodes for s in per.steps] == [("n1",), ("n2",), ("n3",)]
    argv = list(per.steps[1].argv)
    for flag in ("--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--nodelist=n2", "--label", "--jobid=42",
                 "--overlap", "--partition=gpu", "--account=abc"):
        assert flag in argv
    assert argv[argv.index(sys.executable):][:2] == [sys.executable, "-c"] and argv[-len(args):] == args
    single = build_steps(sel, args, DispatchOptions(srun=fake_srun, fanout="single-step", timeout=30))
    [step] = single.steps
    argv = list(step.argv)
    assert step.nodes == sel.nodes
    for flag in ("--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--nodelist=n[1-3]", "--label",
                 "--kill-on-bad-exit=0", "--jobid=42", "--overlap"):
        assert flag in argv
    runner = argv[argv.index(sys.executable):]
    assert runner[:2] == [sys.executable, "-c"] and runner[3:] == ["--time-limit", "30", *args]
    without_job = build_steps(NodeSelection(("n1",)), ["cache", "ls"], DispatchOptions(srun=fake_srun))
    assert "--overlap" not in without_job.steps[0].argv


def test_auto_fanout_switches_to_one_step_above_the_threshold(fake_srun: str) -> None:
    opts = DispatchOptions(srun=fake_srun)
    small = build_steps(NodeSelection(tuple(f"n{i}" for i in range(1, 17))), ["cache", "ls"], opts)
    large = build_steps(NodeSelection(tuple(f"n{i}" for i in range(1, 18))), ["cache", "ls"], opts)
    assert (small.fanout, len(small.steps)) == ("per-node", 16)
    assert (large.fanout, len(large.steps)) == ("single-step", 1)


def test_different_requests_share_a_step_through_a_per_node_table(fake_srun: str) -> None:
    sel = NodeSelection(("n1", "n2", "n3"))
    requests = {"n1": ["cache", "evict", "/r", "--key", "a"], "n3": ["cache", "evict", "/r", "--key", "b"]}
    steps = build_steps(sel, requests, DispatchOptions(srun=fake_srun, fanout="single-step"))
    [step] = steps.steps
    assert step.nodes == ("n1", "n3") and "--nodelist=n[1,3]" in step.argv
    table = json.loads(step.argv[step.argv.index("--per-node") + 1])
    assert table == {"n1": requests["n1"], "n3": requests["n3"]}


def test_node_side_substitutes_and_frames(tmp_path: Path) -> None:
    assert substitute_node(["/r/{node}/c", "--json", "{node}{node}"], "n7") == ["/r/n7/c", "--json", "n7n7"]
    names = [f"k{i}" for i in range(60)]  # enough entries for a result of several frames
    for name in names:
        write_cache_entry(tmp_path / "n7" / "wcache", make_key(name), num_shards=1, tensor_bytes=128)
    env = {**os.environ, "SLURMD_NODENAME": "n7"}
    out = subprocess.run(
        [sys.executable, "-m", "fvconsole.cli.node", "cache", "ls", str(tmp_path / "{node}" / "wcache"), "--json"],
        capture_output=True, env=env, timeout=60,
    )
    assert out.returncode == 0
    lines = out.stdout.decode("ascii").splitlines()
    assert lines[0] == "FVNODE n7 start" and len(lines) > 3
    assert all(line.startswith("FVNODE n7 ") and len(line) < 1024 for line in lines)
    demux = StepDemux(("n7",), cap=1 << 24)
    demux.feed_stdout(out.stdout)
    demux.finish()
    payload = demux.streams["n7"].result.payload
    assert payload is not None and payload["exit"] == 0
    assert payload["output"]["root"] == str(tmp_path / "n7" / "wcache")
    assert sorted(e["key"] for e in payload["output"]["entries"]) == sorted(make_key(n) for n in names)


def test_node_side_without_slurm_reports_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SLURMD_NODENAME"}
    out = subprocess.run([sys.executable, "-m", "fvconsole.cli.node", "cache", "ls", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 1
    assert "SLURMD_NODENAME is not set" in out.stdout


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        (["FVNODE n1 0/1 {bad"], "invalid JSON"),
        (["FVNODE n2 0/1 {}"], "answered as node 'n2'"),
        (["FVNODE n1 0/1 {}", "FVNODE n1 0/1 {}"], "more than one result"),
        (["FVNODE n1 0/1 [1]"], "not a JSON object"),
        (["FVNODE n1"], "truncated"),
        (["FVNODE n1 0/2 {", "FVNODE n1 0/2 {"], "more than one result"),
        (["FVNODE n1 0/3 {"], "truncated result (1 of 3 frames)"),
        (["FVNODE n1 1/2 {}"], "out of order"),
        (["FVNODE n1 x/y {}"], "malformed result frame"),
        (['FVNODE n1 0/1 {"a": NaN}'], "NaN or Infinity"),
        (['FVNODE n1 0/1 {"a": -Infinity}'], "NaN or Infinity"),
        (['FVNODE n1 0/1 {"a": 1e999}'], "NaN or Infinity"),
        # Regression: these raised AttributeError / RecursionError instead of a per-node problem.
        (['FVNODE n1 0/1 {"a": ' + "1" * 5000 + "}"], "unusable JSON"),
        (["FVNODE n1 0/1 " + "[" * 100_000 + "]" * 100_000], "unusable JSON"),
    ],
)
def test_malformed_frames_are_that_nodes_problem(lines: list[str], fragment: str) -> None:
    stream = _demux(lines).streams["n1"]
    assert stream.result.payload is None or stream.result.problem
    assert fragment in stream.result.problem


def test_frames_survive_srun_labels_and_interleaving() -> None:
    """Two nodes' frames, labelled and interleaved line by line, fed in odd-sized pieces."""
    docs = {node: {"node": node, "exit": 0, "output": {"blob": node * 2000}} for node in ("n1", "n2")}
    frames = {node: [start_line(node), *result_lines(node, doc)] for node, doc in docs.items()}
    assert len(frames["n1"]) > 3 and all(len(f) < 1024 for f in frames["n1"])
    mixed = [f"{task}: {line}\n" for pair in zip(frames["n1"], frames["n2"], strict=True)
             for task, line in enumerate(pair)]
    data = ("srun: noise without a label\n" + "".join(mixed) + " 1: a prolog's chatter\n").encode()
    demux = StepDemux(("n1", "n2"), cap=1 << 20)
    for i in range(0, len(data), 777):
        demux.feed_stdout(data[i:i + 777])
    demux.finish()
    assert {n: demux.streams[n].result.payload for n in docs} == docs
    assert demux.settled and CHUNK_CHARS < 1000


def test_a_node_over_its_budget_is_cut_off_without_holding_its_output() -> None:
    demux = StepDemux(("n1", "n2"), cap=10_000)
    demux.feed_stdout(b"0: FVNODE n1 start\n1: FVNODE n2 start\n")
    for _ in range(1000):  # n1 sends a line of 1 MB in pieces; n2 stays quiet
        demux.feed_stdout(b"0: " + b"x" * 1000)
    assert demux.streams["n1"].over_cap and not demux.streams["n2"].over_cap
    assert demux._out.held <= 70_000  # never the whole line
    demux.feed_stdout(b"\n" + "".join(f"1: {f}\n" for f in result_lines("n2", {"exit": 0})).encode())
    demux.finish()
    assert demux.streams["n2"].result.payload == {"exit": 0} and demux.settled


def test_outcome_classification() -> None:
    ok = from_envelope("n1", envelope("n1", 0, '{"entries": []}'), expects=LS, timeout=5)
    assert ok.ok and ok.output == {"entries": []}
    failed = from_envelope("n1", envelope("n1", 1, '{"error": "root missing"}'), expects=LS, timeout=5)
    assert failed.kind == "failed" and failed.error == "root missing"
    assert failed.to_json()["error"] == "root missing" and failed.to_json()["exit_code"] == 1
    invalid = from_envelope("n1", envelope("n1", 0, "not json at all"), expects=LS, timeout=5)
    assert invalid.kind == "invalid" and "invalid JSON" in invalid.error and "not json" in invalid.error
    usage = from_envelope("n1", envelope("n1", 2, ""), expects=LS, timeout=5, why="fvconsole: error: bad flag")
    assert usage.kind == "failed" and usage.error == "exit 2: fvconsole: error: bad flag"
    late = from_envelope("n1", {"node": "n1", "exit": None, "output": None, "timeout": 5}, expects=LS, timeout=5)
    assert late.kind == "timeout" and late.error == "timed out after 5s" and late.may_have_acted
    stopped = from_envelope("n1", envelope("n1", 143, '{"error": "interrupted by SIGTERM"}'), expects=LS, timeout=5)
    assert stopped.kind == "failed" and not stopped.may_have_acted  # an orderly stop that changed nothing
    killed = from_envelope("n1", envelope("n1", 137, '{"error": "killed"}'), expects=LS, timeout=5)
    assert killed.kind == "failed" and killed.may_have_acted  # SIGKILL mid-eviction: anything may be gone


KILL_ON_IMPORT = """
import os, sys
class _Fault:
    def find_spec(self, name, path=None, target=None):
        if name == "fvconsole.cli.cache":
            os.kill(os.getpid(), {signum})
        return None
sys.meta_path.insert(0, _Fault())
"""


@pytest.mark.parametrize(("signum", "name"), [(9, "SIGKILL"), (11, "SIGSEGV")])
def test_runner_reports_a_command_killed_by_a_signal(tmp_path: Path, signum: int, name: str) -> None:
    """The node runner outlives its command: a task that dies by a signal makes srun drop the
    step's output still in flight (every other node's result), so the runner reports the death."""
    (tmp_path / "sitecustomize.py").write_text(KILL_ON_IMPORT.format(signum=signum))
    env = {**os.environ, "SLURMD_NODENAME": "n7", "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "fvconsole.cli.node", "--time-limit", "60", "cache", "ls",
                          str(tmp_path), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr  # the task itself ends well
    frames = [parse_frame(line.encode()) for line in out.stdout.splitlines()]
    assert frames[0] is not None and frames[0].seq is None  # the start frame
    payload, problem = decode_result("".join(f.chunk for f in frames[1:]))
    assert problem is None
    assert payload == {"node": "n7", "exit": 128 + signum,
                       "output": {"error": f"the command was killed by {name} before it reported"}}


@pytest.mark.parametrize(
    ("output", "fragment"),
    [
        ({"entries": [{"key": "k", "status": "complete", "bytes": "12"}]}, "n1: cache ls JSON entries[0] field 'bytes'"),
        ({"entries": [{"key": 5, "status": "complete", "bytes": 1}]}, "n1: cache ls JSON entries[0] field 'key'"),
        ({"entries": {"k": 1}}, "n1: cache ls JSON field 'entries' must be a list"),
        ({"entries": [1]}, "n1: cache ls JSON entries[0] must be a JSON object"),
        ({"entries": [{"key": "k", "status": "ok", "bytes": True}]}, "n1: cache ls JSON entries[0] field 'bytes'"),
        ({"entries": [{"key": "k", "status": "ok", "bytes": 10 ** 30}]}, "n1: cache ls JSON entries[0] field 'bytes'"),
        ({"entries": [{"key": "k", "status": "ok", "bytes": 1, "last_used": "yesterday"}]}, "last_used"),
        ({"entries": [], "fs_free_bytes": -1}, "fs_free_bytes"),
        ({}, "n1: cache ls JSON field 'entries' is missing"),
    ],
)
def test_fields_of_the_wrong_type_make_the_node_invalid(output: dict, fragment: str) -> None:
    outcome = from_envelope("n1", {"node": "n1", "exit": 0, "output": output}, expects=LS, timeout=5)
    assert outcome.kind == "invalid" and fragment in outcome.error


def test_exit_codes() -> None:
    good = NodeOutcome("a", "ok", 0, {}, None)
    bad = NodeOutcome("b", "failed", 1, {"error": "x"}, "x")
    hung = NodeOutcome("c", "timeout", None, None, "timed out")
    assert exit_code_for([good, good]) == 0
    assert exit_code_for([good, bad]) == 3
    assert exit_code_for([bad, bad]) == 1
    assert exit_code_for([hung], executing=True) == 3
    assert exit_code_for([hung], executing=False) == 1


@pytest.mark.parametrize("fanout", FANOUTS)
def test_dispatch_reports_each_failure_per_node(fake_srun: str, caches: tuple[str, str], fanout: str) -> None:
    template, key = caches
    sel = NodeSelection(("a1", "hang1", "stuck1", "garbage1", "down1", "twice1", "a2", "nosuch1"))
    steps = build_steps(sel, ["cache", "ls", template, "--json"],
                        DispatchOptions(srun=fake_srun, timeout=3, parallel=8, fanout=fanout), expects=LS)
    seen: list[str] = []
    run = run_steps(steps, progress=lambda done, total, msg: seen.append(msg))
    by = run.by_node()
    assert [o.node for o in run.outcomes] == list(sel.nodes)
    assert by["a1"].ok and by["a2"].ok
    assert [e["key"] for e in by["a1"].output["entries"]] == [key]
    assert by["hang1"].kind == "timeout" and "timed out after 3s" in by["hang1"].error
    assert by["stuck1"].kind == "timeout" and "timed out after 3s" in by["stuck1"].error
    assert by["garbage1"].kind == "invalid" and "invalid JSON" in by["garbage1"].error
    assert by["down1"].kind == "unreachable" and "Invalid node name" in by["down1"].error
    assert by["twice1"].kind == "invalid" and "more than one result" in by["twice1"].error
    assert by["nosuch1"].kind == "failed" and "does not exist" in by["nosuch1"].error
    assert len(seen) == len(sel.nodes)
    assert exit_code_for(run.outcomes) == 3
    # per node: down1's srun never started its runner, so it is tried once more (and fails again);
    # single step: the launch fails (down1, and hang1 is busy), so every node is retried alone, once
    assert run.job_steps == len(sel.nodes) + 1


@pytest.mark.parametrize("fanout", ["per-node", "single-step"])
def test_a_launch_refused_for_a_moment_is_retried_once(fake_srun: str, caches: tuple[str, str], fanout: str) -> None:
    """Defect: slurmctld refusing an allocation for a moment ("Unable to allocate resources:
    Invalid argument") made a per-node run report the node unreachable, though nothing had run
    there; a node whose runner never started is now tried once more, alone."""
    template, key = caches
    sel = NodeSelection(("a1", "flaky1", "a2"))
    steps = build_steps(sel, ["cache", "ls", template, "--json"],
                        DispatchOptions(srun=fake_srun, timeout=5, fanout=fanout), expects=LS)
    run = run_steps(steps)
    by = run.by_node()
    assert by["flaky1"].ok and [e["key"] for e in by["flaky1"].output["entries"]] == [key]
    assert by["a1"].ok and by["a2"].ok
    # per node: 3 steps + flaky1 again; single step: 1 step (refused as a whole) + 3 alone
    assert run.job_steps == 4


def test_single_step_is_one_job_step_with_a_stuck_and_a_failing_node(fake_srun: str,
                                                                     caches: tuple[str, str]) -> None:
    template, key = caches
    sel = NodeSelection(("a1", "stuck1", "nosuch1", "a2"))
    steps = build_steps(sel, ["cache", "ls", template, "--json"],
                        DispatchOptions(srun=fake_srun, timeout=3, fanout="single-step"), expects=LS)
    started = time.monotonic()
    run = run_steps(steps)
    by = run.by_node()
    assert run.job_steps == 1
    assert by["a1"].ok and by["a2"].ok and [e["key"] for e in by["a2"].output["entries"]] == [key]
    assert by["stuck1"].kind == "timeout" and by["nosuch1"].kind == "failed"
    # the stuck node stopped itself at its own limit: the step did not wait for the login-side slack
    assert time.monotonic() - started < 3 + 10


def test_cli_ls_partial_failure_exit_3(srun_on_path: str, caches: tuple[str, str], capsys) -> None:
    template, key = caches
    code = main(["fleet", "cache", "ls", "--nodes", "a[1-2],nosuch1", "--cache-root", template, "--json", "--full"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3
    assert set(out["nodes"]) == {"a1", "a2", "nosuch1"}
    assert "error" in out["nodes"]["nosuch1"] and "entries" in out["nodes"]["a1"]
    assert out["keys"] == {key: {"a1": "complete", "a2": "complete"}}
    assert out["total_bytes"] == out["nodes"]["a1"]["total_bytes"] + out["nodes"]["a2"]["total_bytes"]


@pytest.mark.parametrize("fanout", FANOUTS)
def test_cli_ls_summary_is_the_default_json(srun_on_path: str, caches: tuple[str, str], capsys, fanout: str) -> None:
    template, key = caches
    code = main(["fleet", "cache", "ls", "--nodes", "a[1-2],nosuch1", "--cache-root", template, "--json",
                 "--fanout", fanout])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["form"] == "summary"
    assert out["keys"] == {key: {"bytes": out["total_bytes"], "nodes": 2,
                                 "statuses": {"complete": {"count": 2, "nodes": "a[1-2]"}}}}
    assert out["node_sets"] == {"a[1-2]": ["a1", "a2"]}  # each key's node set named once, expanded once
    assert out["outcomes"] == {"ok": {"count": 2, "nodes": "a[1-2]", "node_list": ["a1", "a2"]},
                               "failed": {"count": 1, "nodes": "nosuch1", "node_list": ["nosuch1"]}}
    assert out["nodes"]["nosuch1"]["outcome"] == "failed" and "does not exist" in out["nodes"]["nosuch1"]["error"]
    assert out["nodes"]["a1"]["outcome"] == "ok" and out["nodes"]["a1"]["entries"] == 1
    assert out["dispatch"] == {"fanout": fanout, "job_steps": 3 if fanout == "per-node" else 1}


def test_cli_without_srun_exit_1(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun anywhere
    code = main(["fleet", "cache", "ls", "--nodes", "n[1-3]", "--cache-root", "/x/{node}", "--json"])
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["error"].startswith("srun not found: fleet commands need Slurm")
    assert "Traceback" not in captured.err


@pytest.fixture
def no_srun(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH without srun: usage errors must still be usage errors (they are judged first)."""
    monkeypatch.setenv("PATH", str(tmp_path))


def test_selection_errors(no_srun: None, capsys) -> None:
    with pytest.raises(UsageError):
        select_nodes(None, None)
    with pytest.raises(FvError, match="selection is empty"):
        select_nodes("", None)
    with pytest.raises(UsageError, match="not a Slurm job id"):
        select_nodes(None, "12; rm -rf /")
    assert main(["fleet", "cache", "ls", "--cache-root", "/x"]) == 2
    assert main(["fleet", "cache", "ls", "--nodes", "n[1-", "--cache-root", "/x", "--json"]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert "unbalanced" in json.loads(out[-1])["error"]
    assert main(["fleet", "cache", "ls", "--job", "12;x", "--cache-root", "/x"]) == 2


def test_evict_needs_a_selector(no_srun: None, capsys) -> None:
    assert main(["fleet", "cache", "evict", "--nodes", "n1", "--cache-root", "/x"]) == 2
    assert "nothing selected" in capsys.readouterr().err


@pytest.mark.parametrize("fanout", FANOUTS)
def test_fleet_evict_executes_exactly_the_preview(srun_on_path: str, tmp_path: Path, capsys, fanout: str) -> None:
    old, new, odd = make_key("old"), make_key("new"), make_key("odd")
    for node in ("a1", "a2", "a3"):
        write_cache_entry(tmp_path / node / "c", old, num_shards=1, status="incomplete", tensor_bytes=256)
        write_cache_entry(tmp_path / node / "c", new, num_shards=1, status="complete", tensor_bytes=256)
    write_cache_entry(tmp_path / "a2" / "c", odd, num_shards=1, status="incomplete", tensor_bytes=256)
    template = str(tmp_path / "{node}" / "c")
    argv = ["fleet", "cache", "evict", "--nodes", "a[1-3]", "--cache-root", template, "--invalid", "--json",
            "--fanout", fanout]
    assert main(argv) == 0
    preview = json.loads(capsys.readouterr().out)
    assert preview["executed"] is False
    assert [e["key"] for e in preview["nodes"]["a1"]["evict"]] == [old]
    assert sorted(e["key"] for e in preview["nodes"]["a2"]["evict"]) == sorted([old, odd])
    assert (tmp_path / "a1" / "c" / old).exists()  # dry run: nothing deleted
    assert main([*argv, "--yes"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["executed"] is True
    assert done["freed_bytes"] == preview["freed_bytes"] > 0
    for node in ("a1", "a2", "a3"):
        assert sorted(p.name for p in (tmp_path / node / "c").iterdir()) == [new]
    assert sorted(e["key"] for e in done["nodes"]["a2"]["evict"]) == sorted([old, odd])


def test_fleet_evict_unreachable_target_per_node_and_best_effort(srun_on_path: str, tmp_path: Path, capsys) -> None:
    """100% free cannot be reached on any node: each node evicts only what --invalid chose, the fleet says
    where the target is out of reach, and --best-effort (sent to the nodes in their argv) takes the rest."""
    old, new = make_key("old"), make_key("new")
    for node in ("a1", "a2"):
        write_cache_entry(tmp_path / node / "c", old, num_shards=1, status="incomplete", tensor_bytes=256)
        write_cache_entry(tmp_path / node / "c", new, num_shards=1, status="complete", tensor_bytes=256)
    argv = ["fleet", "cache", "evict", "--nodes", "a[1-2]", "--cache-root", str(tmp_path / "{node}" / "c"),
            "--invalid", "--min-free-percent", "100", "--grace", "0", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    preview = json.loads(captured.out)
    for node in ("a1", "a2"):
        doc = preview["nodes"][node]
        assert [e["key"] for e in doc["evict"]] == [old]
        assert doc["free_target"]["reached"] is False and doc["free_target"]["evicted_for_target"] is False
    assert any(w.startswith("free-space target cannot be reached on a[1-2]: nothing is evicted for it there")
               for w in preview["warnings"]), preview["warnings"]
    assert main([*argv, "--best-effort"]) == 0
    best = json.loads(capsys.readouterr().out)
    for node in ("a1", "a2"):
        assert sorted(e["key"] for e in best["nodes"][node]["evict"]) == sorted([old, new])
        assert best["nodes"][node]["free_target"]["best_effort"] is True
    assert not any("cannot be reached" in w for w in best["warnings"])


def test_fleet_evict_yes_executes_nothing_when_no_node_could_plan(srun_on_path: str, tmp_path: Path, capsys) -> None:
    """Every node's root is missing: --yes dispatches nothing and says executed: false."""
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
        "import contextlib, io\nfrom fvconsole.cli.node import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['cache', 'ls', {str(tmp_path / '{node}')!r}, '--json'])",
        env={**os.environ, "SLURMD_NODENAME": "n1"},
    )
    assert "fvconsole.cli.node" in node and "fvconsole.core.cache.scan" in node
    for heavy in ("torch", "textual", "pyarrow"):
        assert heavy not in login and heavy not in node, heavy


def test_core_fleet_imports_no_cli() -> None:
    """The node-side runner is an entry point outside core: core.fleet never imports the CLI."""
    mods = _modules_after("import fvconsole.core.fleet.ops, fvconsole.core.fleet.eviction")
    assert not any(m == "fvconsole.cli" or m.startswith(("fvconsole.cli.", "fvconsole.tui")) for m in mods)


def test_interrupt_stops_every_srun_in_flight(fake_srun: str, caches: tuple[str, str], tmp_path: Path,
                                              monkeypatch) -> None:
    template, _ = caches
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("FAKE_SRUN_PIDS", str(pids))
    steps = build_steps(NodeSelection(("hang1", "a1")), ["cache", "ls", template, "--json"],
                        DispatchOptions(srun=fake_srun, timeout=600, parallel=2, fanout="per-node"))

    def interrupt(done: int, total: int, message: str) -> None:
        # Ctrl-C as soon as a1 answered and hang1's srun is surely running (it never answers)
        for _ in range(300):
            if (pids / "hang1.pid").exists():
                break
            time.sleep(0.1)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_steps(steps, progress=interrupt)
    pid = int((pids / "hang1.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "1e308"])
def test_out_of_range_timeout_is_a_usage_error(no_srun: None, value: str, capsys) -> None:
    # Regression: nan/inf passed validation and crashed later as "internal error: ValueError";
    # 1e308 overflowed the wait; and without srun on PATH every one of them said "srun not found".
    assert main(["fleet", "cache", "ls", "--nodes", "n1", "--cache-root", "/x", f"--timeout={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --timeout must be a positive number of seconds") and "internal" not in err
    assert err.strip().splitlines()[1:] == ["try: fvconsole fleet cache ls --help"]


# ---------------------------------------------------------------- linear line splitting (issue 29 item 3)

@given(st.lists(st.sampled_from([b"a", b"\n", b"0: ", b"FVNODE n1 start", b"x" * 300]), max_size=60),
       st.lists(st.integers(1, 700), min_size=1, max_size=20))
@settings(max_examples=300, deadline=None)
def test_lines_are_the_texts_lines_however_the_bytes_arrive(pieces: list[bytes], cuts: list[int]) -> None:
    """The oracle is bytes.split: whole lines up to the cap, every byte counted once (an open last line +1)."""
    from fvconsole.core.fleet import demux

    data = b"".join(pieces)
    lines = demux._Lines()
    got, at, i = [], 0, 0
    while at < len(data):
        step = cuts[i % len(cuts)]
        got += lines.feed(data[at:at + step])
        at, i = at + step, i + 1
    got += lines.feed(b"", final=True)
    expected = data.split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    assert [line for line, _, whole in got if whole] == [x for x in expected if len(x) <= demux.MAX_LINE]
    assert sum(size for _, size, _ in got) == len(data) + (1 if data and not data.endswith(b"\n") else 0)


def _split_cost(line_bytes: int, total: int = 4 << 20, piece: int = 16) -> float:
    """CPU seconds to feed ``total`` bytes of ``line_bytes``-long lines in ``piece``-byte pieces (best of 2)."""
    data = (b"x" * (line_bytes - 1) + b"\n") * (total // line_bytes)
    best = float("inf")
    for _ in range(2):
        demux = StepDemux(("n1",), cap=1 << 30)
        started = time.process_time()
        for at in range(0, len(data), piece):
            demux.feed_stdout(data[at:at + piece])
        demux.finish()
        best = min(best, time.process_time() - started)
        assert demux.streams["n1"].bytes == len(data)
    return best


def test_a_long_open_line_in_small_pieces_costs_what_short_lines_cost() -> None:
    """srun forwards output in pieces of <= 1 KiB; the old splitter re-joined the open line (up to
    64 KiB) for every piece, so 60 KB lines cost ~20x what 1 KB lines cost, byte for byte.
    Linear: the same bytes in the same pieces cost about the same, whatever the lines' length."""
    short, long = _split_cost(1_000), _split_cost(60_000)
    assert long < 5 * short + 0.05, (short, long)
