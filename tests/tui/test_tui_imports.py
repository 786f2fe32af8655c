"""The console's modules import each other without a circle, counting ``TYPE_CHECKING`` imports.

``tests/architecture/test_layout.py`` finds circles among the imports that run; an import made
only for the type checker still ties two modules together (``messages.py`` named the eviction
dialog's ``EvictOptions``, which imported ``base.py``, which imports ``messages.py``). Here every
``import`` and ``from ... import`` of a ``fvconsole.tui`` module counts, wherever it stands.
"""

from __future__ import annotations

import ast
from pathlib import Path

TUI = Path(__file__).resolve().parents[2] / "fvconsole" / "tui"


def imports_of(source: str, modules: set[str]) -> set[str]:
    """The ``fvconsole.tui`` modules ``source`` imports, at any place (TYPE_CHECKING blocks, functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in modules}
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each module from which an import path leads back to itself, with that path."""
    found = []
    for start in sorted(graph):
        paths = [[start]]
        seen: set[str] = set()
        while paths:
            path = paths.pop()
            for target in sorted(graph[path[-1]]):
                if target == start:
                    found.append([*path, start])
                    paths = []
                    break
                if target not in seen:
                    seen.add(target)
                    paths.append([*path, target])
    return found


def tui_graph() -> dict[str, set[str]]:
    modules = {"fvconsole.tui." + ".".join(p.relative_to(TUI).with_suffix("").parts): p
               for p in TUI.rglob("*.py") if p.stem != "__init__"}  # a folder per view, widgets/ too
    return {name: imports_of(path.read_text(encoding="utf-8"), set(modules)) - {name}
            for name, path in modules.items()}


def test_no_import_circle_in_the_console_counting_type_checking_imports() -> None:
    graph = tui_graph()
    assert len(graph) > 25 and graph["fvconsole.tui.cache.view"]  # the modules and their imports were read
    assert circles(graph) == []


def test_the_circle_check_finds_a_circle_through_a_type_checking_import() -> None:
    modules = {"fvconsole.tui.a", "fvconsole.tui.b", "fvconsole.tui.c"}
    sources = {
        "fvconsole.tui.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fvconsole.tui.b import B\n",
        "fvconsole.tui.b": "from fvconsole.tui import c\n",
        "fvconsole.tui.c": "def f():\n    from fvconsole.tui.a import A\n",
    }
    graph = {name: imports_of(source, modules) for name, source in sources.items()}
    assert graph == {"fvconsole.tui.a": {"fvconsole.tui.b"}, "fvconsole.tui.b": {"fvconsole.tui.c"},
                     "fvconsole.tui.c": {"fvconsole.tui.a"}}
    assert ["fvconsole.tui.a", "fvconsole.tui.b", "fvconsole.tui.c", "fvconsole.tui.a"] in circles(graph)
    assert circles({**graph, "fvconsole.tui.c": set()}) == []
