"""One door per hazard (issue 19): for each hazard, no module of ``fvconsole/`` goes around its door.

Each door's tests live in their own delimited block below.
"""

from __future__ import annotations

import ast
import functools
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
    ("fvconsole/core/locks.py", "OwnerLock.release"): "its own lock file, unlinked while still locked",
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


# ---- door: output-files (issue 19 item 3) and door: terminal-text (issue 19 item 8) ------
# Helpers are prefixed _io_ to keep this block apart.

@functools.cache
def _io_modules() -> tuple[tuple[str, ast.Module], ...]:
    return tuple((p.relative_to(PACKAGE.parent).as_posix(), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted(PACKAGE.rglob("*.py")))


def _io_dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _io_calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    return [(node, _io_dotted(node.func)) for node in ast.walk(tree) if isinstance(node, ast.Call)]


OUTPUT_DOORS = {
    "fvconsole/core/output_file.py": "the door: what is at a user-named path decides how it is written",
    "fvconsole/core/atomic.py": "atomic replace of fvconsole's own files (temp, fsync, rename); the door's tool",
}
#: Modules that rename or replace, other than the doors: module -> why that is no user-named output file.
OUTPUT_RENAME_ALLOWED = {
    "fvconsole/core/migration/publish.py": "publishes the staged sidecar set into --output-dir (rename or "
                                           "exchange), a directory judged by core/migration/output_dir.py",
    "fvconsole/core/cache/evict.py": "renames an entry to .evicting-* inside the cache root (eviction's first step)",
    "fvconsole/core/cache/lock.py": "puts the evictor's holder record into place (the locks door)",
    "fvconsole/core/locks.py": "moves a provably dead holder's lock file aside (the locks door)",
    "fvconsole/core/migration/faults.py": "the test-only fault hook's announcement file",
    "fvconsole/demo/cache_builders.py": "writes manifests into the demo's own cache, as FastVideo does",
}
#: Modules that open a file for writing, other than the doors: module (or folder) -> why.
OUTPUT_OPEN_ALLOWED = {
    "fvconsole/cli/streams.py": "points closed fds 0-2 at /dev/null",
    "fvconsole/core/cache/lock.py": "the evictor's own holder record, O_EXCL (the locks door)",
    "fvconsole/core/locks.py": "its own lock files: O_EXCL records, the evictor's lock file opened to write-lock it "
                               "(the locks door)",
    "fvconsole/core/migration/faults.py": "the test-only fault hook's trace and announcement files",
    "fvconsole/demo/": "fixture builders writing inside the workspace they build",
}
_RENAMERS = {"os.replace", "os.rename", "os.renames", "shutil.move", "os.link"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_APPEND", "O_CREAT", "O_TRUNC"}


def _io_allowed(rel: str, table: dict[str, str]) -> bool:
    return rel in OUTPUT_DOORS or any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in table)


def _io_has_write_flag(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in _WRITE_FLAGS for n in ast.walk(node))


def _io_writes(call: ast.Call, name: str, tree: ast.AST) -> bool:
    """Whether ``call`` opens a file for writing (``os.open`` with a write flag, ``open(.., "w")``).

    Flags held in a variable count when any assignment to that name in the module has one.
    """
    if name == "os.open":
        flags = call.args[1:2]
        names = {n.id for arg in flags for n in ast.walk(arg) if isinstance(n, ast.Name)}
        assigned = [a.value for a in ast.walk(tree) if isinstance(a, (ast.Assign, ast.AnnAssign))
                    and a.value is not None and any(isinstance(t, ast.Name) and t.id in names
                                                    for t in (a.targets if isinstance(a, ast.Assign) else [a.target]))]
        return any(_io_has_write_flag(node) for node in [*flags, *assigned])
    if name in ("open", "io.open") or name.endswith(".open"):
        modes = [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "mode")]
        return any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+")
                   for m in modes)
    return False


def test_output_files_have_one_door() -> None:
    """Renames/replaces and opens for writing happen only in the output-file door, core/atomic.py
    and the allowlisted modules (each with its reason); the front ends never use core/atomic.py
    directly (a user-named path goes through core/output_file.py)."""
    renames, opens, atomic_users = [], [], []
    for rel, tree in _io_modules():
        for call, name in _io_calls(tree):
            renaming = name in _RENAMERS or (isinstance(call.func, ast.Attribute) and call.func.attr == "rename")
            if renaming and not _io_allowed(rel, OUTPUT_RENAME_ALLOWED):
                renames.append(f"{rel}:{call.lineno} {name or call.func.attr}")
            if _io_writes(call, name, tree) and not _io_allowed(rel, OUTPUT_OPEN_ALLOWED):
                opens.append(f"{rel}:{call.lineno} {name}")
        if rel.startswith(("fvconsole/cli/", "fvconsole/tui/")):
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "fvconsole.core.atomic":
                    atomic_users.append(f"{rel}:{node.lineno}")
    assert renames == [], "rename/replace outside the output-file door"
    assert opens == [], "a file opened for writing outside the output-file door"
    assert atomic_users == [], "front ends write user-named paths through core/output_file.py"
    for rel in (*OUTPUT_RENAME_ALLOWED, *OUTPUT_OPEN_ALLOWED):  # no stale entries
        assert (PACKAGE.parent / rel).exists(), rel


def test_output_files_door_is_what_the_callers_use() -> None:
    """--output (cli/formats.py) and the journal's append (core/journal.py) call the door."""
    used = {rel: {name for _, name in _io_calls(tree)} for rel, tree in _io_modules()}
    assert "write_output" in used["fvconsole/cli/formats.py"]
    assert "open_append" in used["fvconsole/core/journal.py"]
    fleet = used["fvconsole/cli/fleet.py"] | used["fvconsole/cli/cache.py"]
    assert "write_output_file" in fleet


#: The modules that write to the standard streams: everything else prints through them.
TERMINAL_STREAM_MODULES = {
    "fvconsole/cli/streams.py": "the CLI's guarded stdout/stderr: write_out/write_err, backslash replacement",
}
_STREAM_WRITES = {"sys.stdout.write", "sys.stderr.write", "sys.__stdout__.write", "sys.__stderr__.write",
                  "sys.stdout.writelines", "sys.stderr.writelines", "sys.stdout.buffer.write",
                  "sys.stderr.buffer.write"}


def test_terminal_text_has_one_door() -> None:
    """No print(), raw sys.stdout/sys.stderr write or stream on fd 1/2 outside the CLI's stream module;
    no second sanitiser (bidi/zero-width character tables live in core/printable.py only);
    the console's plain-text helpers use core.printable."""
    raw, tables = [], []
    for rel, tree in _io_modules():
        if rel not in TERMINAL_STREAM_MODULES:
            for call, name in _io_calls(tree):
                fd_write = name == "os.write" and call.args and isinstance(call.args[0], ast.Constant) \
                    and call.args[0].value in (1, 2)
                fd_dup = name in ("os.dup", "os.fdopen") and call.args and isinstance(call.args[0], ast.Constant) \
                    and call.args[0].value in (1, 2)
                nested = name == "os.fdopen" and call.args and isinstance(call.args[0], ast.Call) \
                    and _io_dotted(call.args[0].func) == "os.dup"
                if name == "print" or name in _STREAM_WRITES or fd_write or fd_dup or nested:
                    raw.append(f"{rel}:{call.lineno} {name}")
        if rel != "fvconsole/core/printable.py":
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and any(c in node.value for c in "\u200b\u200e\u202a\u202e\u2066\u2069\ufeff"):
                    tables.append(f"{rel}:{node.lineno}")
    assert raw == [], "write through cli.streams.write_out/write_err (or cli.common.say)"
    assert tables == [], "escape through core.printable, the one sanitiser"
    plain = dict(_io_modules())["fvconsole/tui/plain.py"]
    imported = {a.name for n in ast.walk(plain) if isinstance(n, ast.ImportFrom) and n.module == "fvconsole.core.printable"
                for a in n.names}
    assert {"printable", "pictured"} <= imported
# ---- end door: output-files, terminal-text ----------------------------------------------

# ---- door: untrusted-documents (issue 19 item 4) -----------------------------------------

#: The one module that decodes JSON documents (bounded, strict, typed fields).
UNTRUSTED_DOOR = "fvconsole/core/untrusted.py"
#: Modules that may decode JSON themselves, and why (there should be almost none).
UNTRUSTED_ALLOWED = {
    "fvconsole/demo/builders.py": "fixture builder: reads back the streaming manifest it just wrote, with FastVideo's "
                                  "own json.load, so the fixture's loader state matches FastVideo exactly",
}
_JSON_MODULES = ("json", "orjson", "simplejson", "ujson")
_DECODERS = ("load", "loads", "JSONDecoder", "raw_decode", "scanner", "decoder")


def _json_decoding(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for every way a module decodes JSON: ``json.loads``, ``from json import loads``, aliases."""
    modules: dict[str, str] = {}  # local name -> the JSON module it is
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in _JSON_MODULES:
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _JSON_MODULES:
            for alias in node.names:
                if alias.name in _DECODERS or alias.name == "*":
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _DECODERS:
            base = _dotted(node.value)
            if base.split(".")[0] in modules:
                found.append((node.lineno, f"{base}.{node.attr}"))
    return found


def test_untrusted_documents_have_one_door() -> None:
    """No module but the door decodes JSON (journal lines, holder records, receipts, manifests, frames...)."""
    offenders = []
    for rel, tree, _ in _modules():
        if rel == UNTRUSTED_DOOR or rel in UNTRUSTED_ALLOWED:
            continue
        offenders += [f"{rel}:{line}: {what}" for line, what in _json_decoding(tree)]
    assert offenders == []


def test_the_untrusted_documents_check_can_fail() -> None:
    """The check sees each spelling it forbids, and the door and every allowed module still decode."""
    sample = ast.parse("import json\nimport orjson as oj\nfrom json import loads\n"
                       "json.loads(b)\noj.loads(b)\njson.JSONDecoder().raw_decode(s)\n")
    assert {what for _, what in _json_decoding(sample)} == {
        "from json import loads", "json.loads", "oj.loads", "json.JSONDecoder"}
    assert _json_decoding(ast.parse("import json\njson.dumps(x)\n")) == []
    trees = {rel: tree for rel, tree, _ in _modules()}
    for rel in (UNTRUSTED_DOOR, *UNTRUSTED_ALLOWED):
        assert _json_decoding(trees[rel]), f"{rel} no longer decodes JSON: drop it from the allowlist"

# ---- end door: untrusted-documents -------------------------------------------------------

# ---- door: locks (issue 19 item 5) --------------------------------------------------------

#: The one module that takes a lock: migration lock files, the evictor's OFD lock, the journal's append lock.
LOCKS_DOOR = "fvconsole/core/locks.py"
#: Ways of taking a lock (attribute names: fcntl calls, lock commands, exclusive creation).
_LOCK_TAKERS = {"flock", "lockf", "F_OFD_SETLK", "F_OFD_SETLKW", "F_SETLK", "F_SETLKW", "O_EXCL"}
#: (module, name) -> why that use is no lock (an O_EXCL create of a unique temp file is not a lock).
LOCKS_ALLOWED = {
    ("fvconsole/core/atomic.py", "O_EXCL"): "creates its own uniquely named temp file before the rename",
    ("fvconsole/core/cache/lock.py", "O_EXCL"): "creates the holder record's uniquely named temp file (the lock "
                                                "itself is core/locks.py's OwnerLock)",
}


def _lock_takers(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, name) of every lock-taking attribute or name a module uses (``fcntl.flock``, ``os.O_EXCL`` ...)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _LOCK_TAKERS:
            yield node.lineno, node.attr
        elif isinstance(node, ast.ImportFrom) and node.module in ("fcntl", "os"):
            for alias in node.names:
                if alias.name in _LOCK_TAKERS:
                    yield node.lineno, alias.name


def test_locks_have_one_door() -> None:
    """No module but ``core/locks.py`` takes a lock (flock, lockf, fcntl lock commands, O_EXCL lock files)."""
    found, used = [], set()
    for module, tree, _ in _modules():
        if module == LOCKS_DOOR:
            continue
        for line, name in _lock_takers(tree):
            if (module, name) in LOCKS_ALLOWED:
                used.add((module, name))
            else:
                found.append(f"{module}:{line}: {name}")
    assert found == [], "locks taken outside core/locks.py:\n" + "\n".join(found)
    assert set(LOCKS_ALLOWED) - used == set(), "allowlist entries that no longer match anything: remove them"


def test_locks_door_check_sees_every_way_of_locking() -> None:
    """The check must be able to fail: each way of taking a lock is caught, in the door itself too."""
    sample = ast.parse("import fcntl, os\nfrom fcntl import flock\n"
                       "def f(fd, p):\n    fcntl.flock(fd, 2)\n    fcntl.lockf(fd, 2)\n"
                       "    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, b'')\n    os.open(p, os.O_CREAT | os.O_EXCL)\n")
    assert sorted(name for _, name in _lock_takers(sample)) == ["F_OFD_SETLK", "O_EXCL", "flock", "flock", "lockf"]
    door = ast.parse((PACKAGE.parent / LOCKS_DOOR).read_text())
    assert {"F_OFD_SETLK", "lockf", "O_EXCL"} <= {name for _, name in _lock_takers(door)}

# ---- end door: locks ----------------------------------------------------------------------
