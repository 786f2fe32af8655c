"""The house (issue 28): folders that show the architecture, checked from the code's own imports.

- ``fvconsole/core/`` holds nothing at its root but ``__init__.py``: every module sits in a package.
- The core packages stand on floors: a module imports only its own package and packages on a
  lower floor (:data:`FLOORS`), never one on its own floor or above.
- No import circle between modules, function-local imports included (``TYPE_CHECKING`` blocks
  aside: they never run); in the core none even counting ``TYPE_CHECKING`` imports.
- The front ends (``cli/``, ``tui/``) import the core only through a package's façade,
  ``fvconsole.core.<package>``, and only names it lists in ``__all__``.

Expected values here are written by hand (the floors, the package list), never read from the code.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "fvconsole"
CORE = PACKAGE / "core"

#: The core's packages, floor by floor: a package may import only packages on lower floors.
FLOORS = {
    "shared": 0,
    "formats": 1,
    "journal": 1,
    "checkpoints": 2,
    "cache": 2,
    "migration": 3,
    "fleet": 3,
    "retention": 4,
    "preflight": 5,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, name: str, modules: dict[str, Path],
             typing: bool = False) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names) for every import that can run (``typing``: and those of
    ``TYPE_CHECKING`` blocks), resolved to fvconsole modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fvconsole"):
                    found.append((node.lineno, alias.name, []))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("fvconsole"):
                names = [a.name for a in node.names]
                submodules = [n for n in names if f"{target}.{n}" in modules]
                for sub in submodules:
                    found.append((node.lineno, f"{target}.{sub}", []))
                rest = [n for n in names if n not in submodules]
                if rest:
                    found.append((node.lineno, target, rest))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph(typing: bool = False) -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for _, target, _names in _imports(path, name, modules, typing):
            if target in modules and target != name:
                graph[name].add(target)
    return graph


def test_core_root_holds_only_its_init() -> None:
    loose = sorted(p.name for p in CORE.iterdir() if p.suffix == ".py" and p.name != "__init__.py")
    assert loose == []
    packages = sorted(p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert set(packages) <= set(FLOORS), f"a core package with no floor: {set(packages) - set(FLOORS)}"


def test_core_packages_import_only_lower_floors() -> None:
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        if not name.startswith("fvconsole.core."):
            continue
        own = name.split(".")[2]
        for line, target, _ in _imports(path, name, modules):
            if not target.startswith("fvconsole.core."):
                continue
            other = target.split(".")[2]
            if other != own and FLOORS[other] >= FLOORS[own]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({own}, floor {FLOORS[own]}) "
                             f"imports {target} ({other}, floor {FLOORS[other]})")
    assert wrong == []


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules of each import circle (Tarjan's strongly connected components of two or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan, iterative enough for a package of this size
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(_modules()):
        if v not in index:
            strong(v)
    return circles


def test_no_import_circles() -> None:
    # A package's façade importing its own modules is not a circle unless a module imports the
    # façade back: that edge is what this finds.
    assert _circles(_graph()) == []


def test_no_core_import_circle_even_through_type_checking_imports() -> None:
    """A ``TYPE_CHECKING`` import never runs, but a reader still follows it: in the core none closes
    a circle (the migration plan and its receipt once did, the receipt typing the plan)."""
    assert [c for c in _circles(_graph(typing=True)) if any(m.startswith("fvconsole.core.") for m in c)] == []


def test_front_ends_import_the_core_only_through_facades() -> None:
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        if not name.startswith(("fvconsole.cli", "fvconsole.tui")):
            continue
        for line, target, names in _imports(path, name, modules):
            if not target.startswith("fvconsole.core"):
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if target.count(".") != 2:
                if target.rsplit(".", 1)[0].count(".") == 2 and target.rsplit(".", 1)[1] in _facade(target.rsplit(".", 1)[0]):
                    continue  # a namespace the façade exports on purpose (shared.flags)
                wrong.append(f"{where} imports {target}, a module inside a package")
                continue
            exported = _facade(target)
            wrong += [f"{where} imports {target}.{n}, which its __all__ does not list" for n in names if n not in exported]
    assert wrong == []


def _facade(package: str) -> set[str]:
    return set(getattr(importlib.import_module(package), "__all__", ()))


def test_the_checker_sees_a_circle_and_a_climb(tmp_path: Path) -> None:
    """The checks above can fail: a planted circle and an upward import are both found."""
    pkg = tmp_path / "fvconsole" / "core"
    (pkg / "shared").mkdir(parents=True)
    (pkg / "cache").mkdir()
    for p in (tmp_path / "fvconsole", pkg, pkg / "shared", pkg / "cache"):
        (p / "__init__.py").write_text("")
    (pkg / "shared" / "a.py").write_text("def f():\n    from fvconsole.core.cache import b\n")
    (pkg / "cache" / "b.py").write_text("from fvconsole.core.shared.a import f\n")
    modules = {_module_name_in(tmp_path, p): p for p in (tmp_path / "fvconsole").rglob("*.py")}
    a = pkg / "shared" / "a.py"
    seen = [t for _, t, _ in _imports_in(tmp_path, a, modules)]
    assert seen == ["fvconsole.core.cache.b"]
    b = pkg / "cache" / "b.py"
    assert [t for _, t, _ in _imports_in(tmp_path, b, modules)] == ["fvconsole.core.shared.a"]


def _module_name_in(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports_in(root: Path, path: Path, modules: dict[str, Path]) -> list[tuple[int, str, list[str]]]:
    return _imports(path, _module_name_in(root, path), modules)
