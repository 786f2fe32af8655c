"""No dead code: vulture over the package, the benchmarks and the scripts finds nothing.

The paths, the confidence (60, vulture's lowest: every unused name is reported) and the
Textual by-name hooks are ``[tool.vulture]`` in pyproject.toml; what is used where vulture
cannot see is a line of ``.vulture_whitelist.py`` with its reason.
"""

from __future__ import annotations

import ast
import pathlib
import runpy
import subprocess
import sys

import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]
WHITELIST = REPO / ".vulture_whitelist.py"


def test_vulture_finds_no_dead_code() -> None:
    proc = subprocess.run([sys.executable, "-m", "vulture"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.stdout == "" and proc.returncode == 0, (
        "vulture reports unused code: remove it, or if it is used where vulture cannot see, add a line "
        f"with the reason to .vulture_whitelist.py\n{proc.stdout}{proc.stderr}")


def test_vulture_covers_the_package_benchmarks_and_scripts_at_its_lowest_confidence() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["vulture"]
    assert set(config["paths"]) == {"fvconsole", "benchmarks", "scripts", ".vulture_whitelist.py"}
    assert config["min_confidence"] == 60


def test_every_whitelist_entry_names_something_that_exists() -> None:
    # Executing the whitelist looks every entry up: a renamed or removed name raises here.
    runpy.run_path(str(WHITELIST))
    tree = ast.parse(WHITELIST.read_text(encoding="utf-8"))
    lines = WHITELIST.read_text(encoding="utf-8").splitlines()
    entries = [node for node in tree.body[1:] if isinstance(node, ast.Expr)]  # body[0]: the docstring
    assert len(entries) >= 10, "the whitelist's entries were not found"
    for node in entries:
        line = lines[node.lineno - 1]
        assert line.partition("#")[2].strip(), f"whitelist entry without a reason: {line!r}"
