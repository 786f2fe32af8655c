"""A fleet node imports the fvconsole its caller runs, whatever the node's working directory holds.

srun keeps the caller's working directory for the nodes (an operator's home on a login node),
and ``python -m`` puts that directory first on ``sys.path``. Two directories are tried there:
one holding a checkout named ``fvconsole`` (a namespace package without the node runner: every
node of an editable install failed to import it), and one holding a real, different
``fvconsole/`` package (which shadowed any install: it would have run instead, here writing a
marker file). Both go through the real dispatch: the tests' stand-in srun in both fan-outs, the
demo's stand-in srun with ``fleet cache ls``, and the console's dispatcher (``SrunDispatcher``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fvconsole.cli import main
from fvconsole.demo.cache_builders import make_key, write_cache_entry
from fvconsole.demo.fleet_builders import build_fleet, local_dispatcher

SHADOW_NODE = """\
import pathlib
pathlib.Path({marker!r}).write_text("the working directory's fvconsole ran")
raise SystemExit(1)
"""


def _checkout(cwd: Path) -> None:
    """A source checkout named ``fvconsole`` (its package one level down): a namespace package here."""
    (cwd / "fvconsole" / "fvconsole").mkdir(parents=True)
    (cwd / "fvconsole" / "README.md").write_text("a checkout\n")


def _other_package(cwd: Path, marker: Path) -> None:
    """A real ``fvconsole`` package with its own node runner, which must never run."""
    pkg = cwd / "fvconsole"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def installed_version():\n    return '0.0.0-other'\n")
    (pkg / "cli" / "__init__.py").write_text("")
    (pkg / "cli" / "node.py").write_text(SHADOW_NODE.format(marker=str(marker)))
    (pkg / "cli" / "__main__.py").write_text("")


@pytest.fixture(params=["checkout", "other-package"])
def hostile_cwd(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory the nodes inherit; returns the marker a shadowing package would write."""
    cwd = tmp_path / "home"
    cwd.mkdir()
    marker = tmp_path / "shadow-ran"
    if request.param == "checkout":
        _checkout(cwd)
    else:
        _other_package(cwd, marker)
    monkeypatch.chdir(cwd)
    return marker


@pytest.mark.parametrize("fanout", ["per-node", "single-step"])
def test_nodes_import_the_callers_fvconsole(srun_on_path: str, tmp_path: Path, hostile_cwd: Path, capsys,
                                            fanout: str) -> None:
    key = make_key("pinned")
    for node in ("a1", "a2"):
        write_cache_entry(tmp_path / node / "c", key, num_shards=1, status="complete", tensor_bytes=128)
    code = main(["fleet", "cache", "ls", "--nodes", "a[1-2]", "--cache-root", str(tmp_path / "{node}" / "c"),
                 "--json", "--full", "--fanout", fanout])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert code == 0, (err, doc.get("nodes"))
    assert {node: [e["key"] for e in doc["nodes"][node]["entries"]] for node in ("a1", "a2")} == \
        {"a1": [key], "a2": [key]}
    assert not hostile_cwd.exists(), "the working directory's fvconsole ran on a node"


def test_the_demo_fleet_and_the_console_dispatcher_too(tmp_path: Path, hostile_cwd: Path, capsys,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = build_fleet(str(tmp_path / "fleet"), time.time())
    monkeypatch.setenv("PATH", str(Path(fleet.srun).parent) + os.pathsep + os.environ["PATH"])
    code = main(["fleet", "cache", "ls", "--nodes", "gpu[001-008]", "--cache-root", fleet.root, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["outcomes"] == {"ok": {"count": 8, "nodes": "gpu[001-008]",
                                                  "node_list": [f"gpu{i:03d}" for i in range(1, 9)]}}
    dispatcher = local_dispatcher(fleet)
    view = dispatcher.ls(dispatcher.select(None, None), fleet.root)
    assert [o.node for o in view.outcomes if o.ok] == list(fleet.nodes)
    assert not hostile_cwd.exists(), "the working directory's fvconsole ran on a node"
