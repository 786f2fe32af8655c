"""The CLI keeps no module-level state: what a command did travels with that command.

Why: ``main()`` runs several times in one process (the fleet's node runner, the tests); a
ContextVar or a module-level list that one run fills and another reads (the node runner once
read the last error's reason from a list in ``fvconsole.cli``) is state nobody sees passed.
An AST scan of ``fvconsole/cli/``: no module-level ContextVar or thread-local, no ``global``
rebinding, and no module-level list/dict/set that any CLI module mutates.
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "fvconsole" / "cli"
STATE_FACTORIES = {"ContextVar", "local"}
CONTAINERS = {"list", "dict", "set", "defaultdict", "OrderedDict", "deque", "Counter", "bytearray"}
MUTATORS = {"append", "extend", "insert", "clear", "update", "add", "pop", "popitem", "remove", "discard",
            "setdefault", "sort", "reverse", "appendleft", "extendleft", "set", "reset"}


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(CLI.parent.parent)): ast.parse(p.read_text()) for p in sorted(CLI.glob("*.py"))}


def _called(value: ast.AST | None) -> str | None:
    if isinstance(value, ast.Call):
        func = value.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def _module_bindings(tree: ast.Module) -> list[tuple[str, ast.AST | None, int]]:
    """(name, value, line) of every assignment at module level (also under a module-level if/try)."""
    found = []
    stack = list(tree.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Assign):
            found += [(t.id, stmt.value, stmt.lineno) for t in stmt.targets if isinstance(t, ast.Name)]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            found.append((stmt.target.id, stmt.value, stmt.lineno))
        elif isinstance(stmt, (ast.If, ast.Try)):
            stack += [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", []),
                      *[s for h in getattr(stmt, "handlers", []) for s in h.body]]
    return found


def _is_container(value: ast.AST | None) -> bool:
    return isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) \
        or _called(value) in CONTAINERS


def _name_of(node: ast.AST) -> str | None:
    """``x`` for ``x`` or ``module.x``."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _mutated_names(tree: ast.Module) -> set[str]:
    """Names (or attributes) this module mutates in place: ``x.append(...)``, ``x[k] = ...``, ``del x[k]``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            names.add(_name_of(node.func.value) or "")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(_name_of(node.value) or "")
        elif isinstance(node, ast.AugAssign):
            names.add(_name_of(node.target) or "")
    return names - {""}


def test_no_module_level_context_or_thread_state() -> None:
    found = [f"{path}:{line}: {name} = {_called(value)}(...)"
             for path, tree in _modules().items() for name, value, line in _module_bindings(tree)
             if _called(value) in STATE_FACTORIES]
    assert found == []


def test_no_global_rebinding() -> None:
    found = [f"{path}:{node.lineno}: global {', '.join(node.names)}"
             for path, tree in _modules().items() for node in ast.walk(tree) if isinstance(node, ast.Global)]
    assert found == []


def test_no_mutated_module_level_container() -> None:
    modules = _modules()
    mutated = set().union(*(_mutated_names(tree) for tree in modules.values()))
    found = [f"{path}:{line}: {name} (mutated)" for path, tree in modules.items()
             for name, value, line in _module_bindings(tree) if _is_container(value) and name in mutated]
    assert found == []
