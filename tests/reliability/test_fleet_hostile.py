"""Hostile and broken nodes in `fleet cache ls|evict`, and absurd fleet arguments.

Each node is a real process started by the stand-in srun (tests/slurm_cluster.py); a node
listed in ``$FAKE_SRUN_NODES/<node>.py`` runs that program instead of the fvconsole runner:
a node printing a gigabyte, bytes that are not UTF-8, JSON with NaN, fields of the wrong
type, terminal escape sequences. Invariant: the hostile node is that node's ``invalid``
(with a reason), every other node's result stands (exit 3), the login side stays bounded
in memory and time, and nothing untrusted reaches the terminal raw. Absurd arguments are
one-line usage errors (exit 2), judged before srun is looked for.
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

from fvconsole.demo.cache_builders import make_key, write_cache_entry

from .harness import assert_clean_error, cli_env, run_cli

KEY = make_key("fleet-hostile")

#: The real node runner whose command "printed" DOC (old and new runner locations).
PATCHED_RUNNER = """
import sys
try:
    import fvconsole.cli.node as runner
except ImportError:
    import fvconsole.core.fleet.node as runner
runner.run_captured = lambda argv: ({code}, {doc!r})
sys.exit(runner.main(sys.argv[1:]))
"""

#: A node whose output is raw bytes: a start frame, then BODY (``@N@``: the node's name).
RAW_NODE = """
import os, sys
node = os.environ["SLURMD_NODENAME"].encode()
out = sys.stdout.buffer
out.write(b"FVNODE " + node + b" start\\n")
out.write({body!r}.replace(b"@N@", node))
out.flush()
"""

#: 1 GiB on stdout, in 1 MiB writes (with or without a start frame first).
FLOOD_NODE = """
import os, sys
out = sys.stdout.buffer
if {framed}:
    out.write(b"FVNODE " + os.environ["SLURMD_NODENAME"].encode() + b" start\\n")
chunk = b"x" * (1 << 20)
for _ in range(1024):
    out.write(chunk)
"""


def _strict(text: str) -> object:
    """json.loads that refuses NaN/Infinity (what any other JSON reader does)."""
    def refuse(name: str) -> object:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def fleet(tmp_path: Path) -> dict:
    """Nodes ok1, ok2 with a real cache each; a stand-in srun; a directory for hostile nodes."""
    for node in ("ok1", "ok2"):
        write_cache_entry(tmp_path / node / "wc", KEY, num_shards=2, status="complete", tensor_bytes=256)
    hostile = tmp_path / "nodes"
    hostile.mkdir()
    srun = write_fake_srun(tmp_path / "bin")
    env = {"PATH": os.path.dirname(srun) + os.pathsep + os.environ["PATH"], "FAKE_SRUN_NODES": str(hostile)}
    return {"root": str(tmp_path / "{node}" / "wc"), "hostile": hostile, "env": env, "base": tmp_path}


def _node(fleet: dict, name: str, program: str) -> None:
    (fleet["hostile"] / f"{name}.py").write_text(program)


def _ls(fleet: dict, nodes: str, *extra: str, timeout: float = 120) -> tuple[int, dict, str]:
    result = run_cli(["fleet", "cache", "ls", "--nodes", nodes, "--cache-root", fleet["root"], "--json", "--full",
                      "--timeout", "30", *extra], env=fleet["env"], timeout=timeout)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.describe()
    return result.returncode, _strict(result.stdout), result.stderr


def _assert_others_stand(doc: dict) -> None:
    for node in ("ok1", "ok2"):
        assert [e["key"] for e in doc["nodes"][node]["entries"]] == [KEY], doc["nodes"][node]
    assert doc["keys"] == {KEY: {"ok1": "complete", "ok2": "complete"}}


@pytest.mark.fault("hostile input", "a fleet node prints 1 GiB on stdout (with or without a start frame, "
                                    "per-node and single-step fan-out)")
@pytest.mark.parametrize(("fanout", "framed"), [("per-node", False), ("single-step", True),
                                                ("single-step", False)])
def test_a_node_printing_a_gigabyte_is_invalid_and_costs_little(fleet: dict, fanout: str, framed: bool) -> None:
    _node(fleet, "flood1", FLOOD_NODE.format(framed=framed))
    argv = [sys.executable, "-m", "fvconsole", "fleet", "cache", "ls", "--nodes", "ok[1-2],flood1",
            "--cache-root", fleet["root"], "--json", "--full", "--fanout", fanout]
    started = time.monotonic()
    out = subprocess.run(argv, env=cli_env(fleet["env"]), capture_output=True, timeout=240)
    elapsed = time.monotonic() - started
    err = out.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "MemoryError" not in err, err[-2000:]
    doc = _strict(out.stdout.decode())
    assert out.returncode == 3
    flood = doc["nodes"]["flood1"]
    assert flood["failure"] == "invalid" and "output exceeds" in flood["error"], flood
    _assert_others_stand(doc)
    assert elapsed < 60


@pytest.mark.fault("hostile input", "a fleet node prints 1 GiB: the login node's memory stays bounded")
def test_flood_memory_is_bounded(fleet: dict) -> None:
    """Measured in a child of a fresh process, so earlier tests' children do not count."""
    _node(fleet, "flood1", FLOOD_NODE.format(framed=False))
    probe = (
        "import resource, subprocess, sys\n"
        f"run = subprocess.run({[sys.executable, '-m', 'fvconsole', 'fleet', 'cache', 'ls', '--nodes', 'ok1,flood1', '--cache-root', fleet['root'], '--json', '--fanout', 'per-node']!r}, "  # noqa: E501
        "capture_output=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, run.returncode)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=cli_env(fleet["env"]), capture_output=True, text=True,
                         timeout=240)
    peak, code = map(int, out.stdout.strip().splitlines()[-1].split())
    assert code == 3  # it ran: ok1 answered, flood1 did not
    # the fvconsole process (or the stand-in srun) peaks far below the gigabyte the node printed
    assert peak < 400 << 20, f"peak RSS {peak >> 20} MiB"


@pytest.mark.fault("hostile input", "a fleet node's result is not valid UTF-8")
@pytest.mark.parametrize("fanout", ["per-node", "single-step"])
def test_invalid_utf8_from_one_node(fleet: dict, fanout: str) -> None:
    body = b'FVNODE @N@ 0/1 {"node": "@N@", "exit": 0, "output": {"entries": [], "note": "\xff\xfe"}}\n'
    _node(fleet, "bad1", RAW_NODE.format(body=body))
    code, doc, err = _ls(fleet, "ok[1-2],bad1", "--fanout", fanout)
    assert code == 3
    assert doc["nodes"]["bad1"]["failure"] == "invalid" and "not ASCII" in doc["nodes"]["bad1"]["error"]
    _assert_others_stand(doc)


NAN_DOC = '{"cap_bytes": 100, "entries": [{"key": "k", "status": "complete", "bytes": NaN}], "total_bytes": Infinity}'


@pytest.mark.fault("hostile input", "a fleet node's JSON contains NaN / Infinity (its command's output, or its frame)")
@pytest.mark.parametrize("fanout", ["per-node", "single-step"])
def test_nan_from_one_node(fleet: dict, fanout: str) -> None:
    _node(fleet, "nan1", PATCHED_RUNNER.format(code=0, doc=NAN_DOC))
    body = b'FVNODE @N@ 0/1 {"node": "@N@", "exit": 0, "output": ' + NAN_DOC.encode() + b"}\n"
    _node(fleet, "nan2", RAW_NODE.format(body=body))
    code, doc, err = _ls(fleet, "ok[1-2],nan[1-2]", "--fanout", fanout)  # the output must parse strictly
    assert code == 3
    for node in ("nan1", "nan2"):
        assert doc["nodes"][node]["failure"] == "invalid", doc["nodes"][node]
        assert "NaN" in doc["nodes"][node]["error"], doc["nodes"][node]
    _assert_others_stand(doc)


MIXED_DOC = json.dumps({"cap_bytes": 100, "fs_free_bytes": 5, "total_bytes": 20, "entries": [
    {"key": "a", "status": "complete", "bytes": 10, "last_used": 1.5},
    {"key": "b", "status": "complete", "bytes": "10", "last_used": "yesterday"},
]})
MIXED_EVICT = json.dumps({"evict": [{"key": "a"}, "junk"], "freed_bytes": "lots", "root": "/x"})


@pytest.mark.fault("hostile input", "a fleet node's JSON has fields of the wrong type (ls and evict, text and --json)")
@pytest.mark.parametrize("fanout", ["per-node", "single-step"])
def test_mixed_field_types_from_one_node(fleet: dict, fanout: str) -> None:
    _node(fleet, "mixed1", PATCHED_RUNNER.format(code=0, doc=MIXED_DOC))
    code, doc, err = _ls(fleet, "ok[1-2],mixed1", "--fanout", fanout)
    assert code == 3
    assert doc["nodes"]["mixed1"]["failure"] == "invalid" and "mixed1: cache ls JSON entries[1] field 'bytes'" in doc["nodes"]["mixed1"]["error"]
    _assert_others_stand(doc)
    text = run_cli(["fleet", "cache", "ls", "--nodes", "ok[1-2],mixed1", "--cache-root", fleet["root"],
                    "--fanout", fanout], env=fleet["env"])
    assert text.returncode == 3 and "internal error" not in text.stderr and "Traceback" not in text.stderr
    assert "mixed1: cache ls JSON entries[1] field 'bytes'" in text.stdout
    _node(fleet, "mixed1", PATCHED_RUNNER.format(code=0, doc=MIXED_EVICT))
    for extra in ([], ["--json"]):
        ev = run_cli(["fleet", "cache", "evict", "--nodes", "ok[1-2],mixed1", "--cache-root", fleet["root"],
                      "--invalid", "--fanout", fanout, *extra], env=fleet["env"])
        assert ev.returncode == 3, ev.describe()
        assert "internal error" not in ev.stderr and "Traceback" not in ev.stderr, ev.describe()
        assert "unexpected JSON from the command: mixed1: cache evict JSON field 'freed_bytes'" in ev.stdout


ESC_DOC = json.dumps({"root": "/x\x1b]0;pwned\x07", "entries": [
    {"key": "k\x1b[2J\x1b]0;owned\x07", "status": "complete\x1b[31m", "bytes": 1}]})


@pytest.mark.fault("hostile input", "terminal escape sequences in a fleet node's keys, statuses and errors")
def test_escape_sequences_from_a_node_never_reach_the_terminal(fleet: dict) -> None:
    _node(fleet, "esc1", PATCHED_RUNNER.format(code=0, doc=ESC_DOC))
    _node(fleet, "esc2", PATCHED_RUNNER.format(code=1, doc=json.dumps({"error": "gone\x1b]2;title\x07\x9b2J"})))
    text = run_cli(["fleet", "cache", "ls", "--nodes", "ok[1-2],esc[1-2]", "--cache-root", fleet["root"]],
                   env=fleet["env"])
    assert text.returncode == 3, text.describe()
    for stream in (text.stdout, text.stderr):
        assert "\x1b" not in stream and "\x07" not in stream and "\x9b" not in stream
    assert "k\\x1b[2J\\x1b]0;owned\\x07" in text.stdout and "gone\\x1b]2;title" in text.stdout
    code, doc, _ = _ls(fleet, "ok[1-2],esc[1-2]")
    assert doc["nodes"]["esc1"]["entries"][0]["key"] == "k\x1b[2J\x1b]0;owned\x07"  # --json stays exact


@pytest.mark.fault("hostile input", "absurd fleet arguments: --timeout 1e308, a 5000-digit hostlist range, "
                                    "n[1-100000000], 5000 bracket groups, without srun on PATH too")
@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--nodes", "n1", "--timeout", "1e308"], ["--timeout"]),
        (["--nodes", "n[1-" + "9" * 5000 + "]"], ["--nodes", "digits"]),
        (["--nodes", "n" + "7" * 5000], ["--nodes"]),
        (["--nodes", "n[1-100000000]"], ["--nodes", "more than"]),
        (["--nodes", "n" + "[1]" * 5000], ["--nodes"]),
        (["--nodes", "n1", "--parallel", "0"], ["--parallel"]),
    ],
)
@pytest.mark.parametrize("srun", ["stand-in", "missing"])
def test_absurd_fleet_arguments_are_usage_errors(fleet: dict, tmp_path: Path, args: list[str], names: list[str],
                                                 srun: str) -> None:
    env = dict(fleet["env"])
    if srun == "missing":
        env["PATH"] = str(tmp_path / "empty")
    started = time.monotonic()
    result = run_cli(["fleet", "cache", "ls", "--cache-root", fleet["root"], *args], env=env, timeout=60)
    line = assert_clean_error(result, codes=(2,), names=names)
    assert len(line) < 400 and time.monotonic() - started < 30


MARKUP_DOC = json.dumps({"entries": [
    {"key": "[/]s52", "status": "complete", "bytes": 1},
    {"key": "[link=https://example.invalid]k[/link]", "status": "[bold]complete", "bytes": 2},
    {"key": "k\x1b]0;title\x07", "status": "complete", "bytes": 3},
]})


@pytest.mark.fault("tui", "Rich markup and escape sequences in a fleet node's keys, statuses and errors (console)")
def test_fleet_view_shows_what_nodes_send_as_plain_text(fleet: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from textual.widgets import Input, Static
    from tour import settle

    from fvconsole.core.fleet.ops import SrunDispatcher
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.fleet.view import FleetView
    from fvconsole.tui.state import ConsoleState
    from fvconsole.tui.widgets.tables import FastTable

    _node(fleet, "mark1", PATCHED_RUNNER.format(code=0, doc=MARKUP_DOC))
    _node(fleet, "mark2", PATCHED_RUNNER.format(code=1, doc=json.dumps({"error": "[/]broken [red]x\x1b[2J"})))
    monkeypatch.setenv("FAKE_SRUN_NODES", str(fleet["hostile"]))
    srun = os.path.join(fleet["env"]["PATH"].split(os.pathsep)[0], "srun")

    async def body() -> None:
        app = FvConsoleApp(ConsoleState())
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(app, pilot)
            await pilot.press("4")
            await pilot.pause()
            view = app.query_one(FleetView)
            view.query_one("#fleet-job", Input).value = ""
            view.query_one("#fleet-nodes", Input).value = "ok1,mark[1-2]"
            view.query_one("#fleet-root", Input).value = fleet["root"]
            view.dispatcher = SrunDispatcher(timeout=60, srun=srun)
            view.action_scan()
            await settle(app, pilot)
            await settle(app, pilot)
            matrix = view.query_one("#fleet-matrix", FastTable)
            shown = {str(matrix.get_row(key)[0]) for key in matrix.rows}
            assert {"[/]s52", "[link=https://example.invalid]k[/link]", "k\\x1b]0;title\\x07"} <= shown
            nodes = view.query_one("#fleet-node-table", FastTable)
            assert str(nodes.get_row("mark2")[-1]) == "error: [/]broken [red]x\\x1b[2J"
            detail = str(view.query_one("#fleet-detail", Static).render())
            assert "[/]broken [red]x" in detail and "\x1b" not in detail
            await pilot.press("tab")  # the console still runs
            await settle(app, pilot)

    asyncio.run(body())
