"""One door per hazard (issue 19): for each hazard, no module of ``fvconsole/`` goes around its door.

Each door's tests live in their own delimited block below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fvconsole"


def _modules() -> list[tuple[str, ast.Module, str]]:
    """(path relative to the package's parent, AST, source) of every module of ``fvconsole/``."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        out.append((path.relative_to(PACKAGE.parent).as_posix(), ast.parse(source), source))
    return out


def _dotted(node: ast.AST) -> str:
    """``os.path.join`` for an attribute chain, ``walk`` for a bare name, "" otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


# ---- door: process-use (issue 19 item 7) -------------------------------------------------

#: The only module that reads /proc/<pid>/fd or /proc/<pid>/maps.
PROCESS_USE_DOOR = "fvconsole/core/process_use.py"


def test_process_use_has_one_door() -> None:
    """No module but the door names a process's fd table or maps (in a string or an f-string)."""
    offenders = []
    for rel, tree, _ in _modules():
        if rel == PROCESS_USE_DOOR:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            else:
                continue
            if text.endswith(("/fd", "/maps")) or "/fd/" in text or text in ("fd", "maps"):
                offenders.append(f"{rel}:{node.lineno}: {text!r}")
    assert offenders == []


def test_the_process_use_door_check_can_fail() -> None:
    """The check above sees the door itself (its own strings would be offenders elsewhere)."""
    source = (PACKAGE / "core" / "process_use.py").read_text()
    assert '/fd"' in source and '/maps"' in source

# ---- end door: process-use ---------------------------------------------------------------

# ---- door: bounded-walks (issue 19 item 9) -----------------------------------------------

#: The one walker every size and recursive scan uses.
WALK_DOOR = "fvconsole/core/walk.py"
#: Modules that may walk a tree themselves, and why.
WALK_ALLOWED = {
    # Its listing sits in a helper its loop calls (not seen by the check), allowed whatever it becomes:
    "fvconsole/core/removal.py": "the removal door: its fd-based walk is the removal itself (mount-aware)",
    "fvconsole/demo/builders.py": "mirrors FastVideo's own _scan_manifest (os.walk), so the oracle matches it exactly",
    "fvconsole/demo/workspace.py": "the demo's own workspace, built by this process (the removal door owns its rebuild)",
}
_WALKS = ("os.walk", "os.fwalk")
_LISTINGS = ("os.scandir", "os.listdir", "scandir", "listdir")


def _walk_offences(tree: ast.Module) -> list[str]:
    """A tree walk: os.walk/fwalk, Path.rglob/walk, recursive glob, or a listing inside a
    ``while`` loop (an explicit stack) or inside a function that calls itself."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name in _WALKS or attr in ("rglob", "walk") or (
                attr == "glob" and any(k.arg == "recursive" for k in node.keywords)):
            found.append(f"{node.lineno}: {name or attr}")
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        recursive = any(isinstance(n, ast.Call) and _dotted(n.func) == func.name for n in ast.walk(func))
        loops = [n for n in ast.walk(func) if isinstance(n, ast.While)]
        looped = {id(c) for loop in loops for c in ast.walk(loop)}
        for n in ast.walk(func):
            if isinstance(n, ast.Call) and _dotted(n.func) in _LISTINGS and (recursive or id(n) in looped):
                found.append(f"{n.lineno}: {_dotted(n.func)} in {func.name} ({'recursion' if recursive else 'a stack'})")
    return found


def test_walks_have_one_door() -> None:
    offenders = []
    for rel, tree, _ in _modules():
        if rel == WALK_DOOR or rel in WALK_ALLOWED:
            continue
        offenders += [f"{rel}:{o}" for o in _walk_offences(tree)]
    assert offenders == []


def test_the_walk_door_check_sees_a_walk() -> None:
    """The detector finds the walker's own stack walk and the allowlisted walks (so it can fail)."""
    assert _walk_offences(ast.parse((PACKAGE / "core" / "walk.py").read_text()))
    for rel in ("fvconsole/demo/builders.py", "fvconsole/demo/workspace.py"):
        assert _walk_offences(ast.parse((PACKAGE.parent / rel).read_text())), rel
    sample = "import os\ndef size(p):\n    return sum(size(e.path) for e in os.scandir(p))\n"
    assert _walk_offences(ast.parse(sample))

# ---- end door: bounded-walks -------------------------------------------------------------

# ---- door: removal (issue 19 item 1) ----------------------------------------------------
def _calls_in_functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """Every node with the qualified name of the function (or class) it is in ("" at module level)."""
    def walk(node: ast.AST, where: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from walk(child, f"{where}.{child.name}" if where else child.name)
            else:
                yield where, child
                yield from walk(child, where)
    yield from walk(tree, "")


REMOVAL_DOOR = "fvconsole/core/removal.py"
#: Single-file unlinks of fvconsole's own files, outside the door: (module, function) -> why it is safe.
REMOVAL_ALLOWED = {
    ("fvconsole/core/atomic.py", "atomic_write_bytes"): "its own O_EXCL temp file, after a failed write",
    ("fvconsole/core/cache/lock.py", "EvictorLock._write_record"): "its own temp holder record",
    ("fvconsole/core/cache/lock.py", "EvictorLock._clean_dead_temps"): "temp holder records of dead evictors",
    ("fvconsole/core/cache/lock.py", "EvictorLock.release"): "its own holder record",
    ("fvconsole/core/locks.py", "FileLock.release"): "its own lock file",
    ("fvconsole/core/locks.py", "FileLock._create"): "its own temp lock record (after link)",
    ("fvconsole/core/locks.py", "FileLock._create_direct"): "its own lock file, after a failed write",
    ("fvconsole/core/locks.py", "FileLock._break"): "a provably dead holder's lock file, moved aside first",
    ("fvconsole/core/locks.py", "FileLock._clean_own_temps"): "temp lock records of this identity's dead runs",
    ("fvconsole/demo/builders.py", "write_checkpoint"): "the .metadata of a checkpoint it just wrote (fixture)",
}
#: Names that delete whatever object they are called on (Path.unlink, os.rmdir, shutil.rmtree ...).
_DELETERS = {"rmtree", "rmdir", "unlink", "removedirs", "unlinkat"}


def _deletions(tree: ast.AST) -> Iterator[tuple[str, int, str]]:
    """(function, line, what) of every way to delete something that a module uses."""
    for where, node in _calls_in_functions(tree):
        if isinstance(node, ast.Attribute) and (
                node.attr in _DELETERS
                or (node.attr == "remove" and isinstance(node.value, ast.Name) and node.value.id == "os")):
            yield where, node.lineno, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil", "pathlib"):
            for alias in node.names:
                if alias.name in _DELETERS | {"remove"}:
                    yield where, node.lineno, f"from {node.module} import {alias.name}"


def test_removal_has_one_door() -> None:
    """Only ``core/removal.py`` deletes trees; elsewhere only the listed single-file unlinks of fvconsole's own files."""
    found, used = [], set()
    for module, tree, _ in _modules():
        if module == REMOVAL_DOOR:
            continue
        for where, line, what in _deletions(tree):
            if "rmtree" in what or "rmdir" in what or (module, where) not in REMOVAL_ALLOWED:
                found.append(f"{module}:{line} ({where or 'module level'}): {what}")
            else:
                used.add((module, where))
    assert found == [], "deletes outside core/removal.py (use remove_tree / remove_flat_dir / remove_empty_dir):\n" \
        + "\n".join(found)
    assert set(REMOVAL_ALLOWED) - used == set(), "allowlist entries that no longer unlink anything: remove them"


def test_removal_door_scan_sees_every_kind_of_deletion() -> None:
    """The scan itself must be able to fail: each way of deleting is caught."""
    sample = ast.parse(
        "import os, shutil\nfrom shutil import rmtree\n"
        "def f(p):\n    shutil.rmtree(p)\n    os.rmdir(p)\n    os.remove(p)\n    p.unlink()\n    os.removedirs(p)\n"
        "def g(items):\n    items.remove(1)\n")
    assert [what for _, _, what in _deletions(sample)] == [
        "from shutil import rmtree", "shutil.rmtree", "os.rmdir", "os.remove", "p.unlink", "os.removedirs"]
# ---- end door: removal ------------------------------------------------------------------
