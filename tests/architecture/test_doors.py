"""One door per hazard (issue 19): for each hazard, no module of ``fvconsole/`` goes around its door.

One table, ``DOORS``: a row per hazard names the one module that may do it (the door), what
counts as doing it (a scan of a module's syntax tree: the forbidden calls, imports, strings),
the few other places allowed, each with its reason, and samples the scan must catch. Three
tests run every row: nothing goes around the door and every allowlist entry still matches
(``test_no_module_goes_around_its_door``), the scan catches each sample and passes each clean
one (``test_each_door_scan_can_fail``), and the named callers use the door
(``test_the_callers_use_their_door``). A new door is a new row.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fvconsole.core.shared.optional import EXTRAS

PACKAGE = Path(__file__).resolve().parents[2] / "fvconsole"
REPO = PACKAGE.parent

#: What a scan reports: (line, what, key). The key is what an allowlist entry names: the module
#: (``"fvconsole/core/x.py"``, or a folder ``"fvconsole/demo/"``), ``(module, function)`` or
#: ``(module, name)``; None for what no allowlist may excuse.
Finding = tuple[int, str, object]
Key = str | tuple[str, str]


@functools.cache
def modules() -> tuple[tuple[str, ast.Module], ...]:
    """(path relative to the repository, syntax tree) of every module of ``fvconsole/``."""
    return tuple((p.relative_to(REPO).as_posix(), ast.parse(p.read_text(encoding="utf-8")))
                 for p in sorted(PACKAGE.rglob("*.py")))


def dotted(node: ast.AST) -> str:
    """``os.path.join`` for an attribute chain, ``walk`` for a bare name, "" otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def calls(tree: ast.AST) -> Iterator[tuple[ast.Call, str]]:
    return ((node, dotted(node.func)) for node in ast.walk(tree) if isinstance(node, ast.Call))


def imported(tree: ast.AST, module: str) -> set[str]:
    """The names ``from <module> import ...`` brings into ``tree``."""
    return {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == module for a in n.names}


def in_functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """Every node with the qualified name of the function (or class) it is in ("" at module level)."""
    def walk(node: ast.AST, where: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from walk(child, f"{where}.{child.name}" if where else child.name)
            else:
                yield where, child
                yield from walk(child, where)
    yield from walk(tree, "")


# ----------------------------------------------------------------------------- the scans
# Each: (module path, tree) -> findings. They read the syntax only: a scan never imports a module.

def process_use_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """A process's fd table or maps named in a string or an f-string."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        else:
            continue
        if text.endswith(("/fd", "/maps")) or "/fd/" in text or text in ("fd", "maps"):
            yield node.lineno, repr(text), rel


_WALKS = ("os.walk", "os.fwalk")
_LISTINGS = ("os.scandir", "os.listdir", "scandir", "listdir")


def walk_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """A tree walk: os.walk/fwalk, Path.rglob/walk, recursive glob, or a listing inside a
    ``while`` loop (an explicit stack) or inside a function that calls itself."""
    for node, name in calls(tree):
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name in _WALKS or attr in ("rglob", "walk") or (
                attr == "glob" and any(k.arg == "recursive" for k in node.keywords)):
            yield node.lineno, name or attr, rel
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        recursive = any(isinstance(n, ast.Call) and dotted(n.func) == func.name for n in ast.walk(func))
        looped = {id(c) for loop in ast.walk(func) if isinstance(loop, ast.While) for c in ast.walk(loop)}
        for n, name in calls(func):
            if name in _LISTINGS and (recursive or id(n) in looped):
                yield n.lineno, f"{name} in {func.name} ({'recursion' if recursive else 'a stack'})", rel


#: Names that delete whatever object they are called on (Path.unlink, os.rmdir, shutil.rmtree ...).
_DELETERS = {"rmtree", "rmdir", "unlink", "removedirs", "unlinkat"}


def removal_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """Every way to delete: keyed by (module, function), a tree removal (rmtree, rmdir) by None."""
    for where, node in in_functions(tree):
        if isinstance(node, ast.Attribute) and (
                node.attr in _DELETERS
                or (node.attr == "remove" and isinstance(node.value, ast.Name) and node.value.id == "os")):
            what = ast.unparse(node)
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil", "pathlib"):
            names = [a.name for a in node.names if a.name in _DELETERS | {"remove"}]
            if not names:
                continue
            what = f"from {node.module} import {', '.join(names)}"
        else:
            continue
        tree_removal = "rmtree" in what or "rmdir" in what
        yield node.lineno, f"({where or 'module level'}) {what}", None if tree_removal else (rel, where)


_RENAMERS = {"os.replace", "os.rename", "os.renames", "shutil.move", "os.link"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_APPEND", "O_CREAT", "O_TRUNC"}
_MODE = re.compile(r"[rwxabtU+]{1,4}")


def rename_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """A rename or replace: os.replace/rename/renames/link, shutil.move, ``<path>.rename``."""
    for call, name in calls(tree):
        if name in _RENAMERS or (isinstance(call.func, ast.Attribute) and call.func.attr == "rename"):
            yield call.lineno, name or call.func.attr, rel


def _has_write_flag(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in _WRITE_FLAGS for n in ast.walk(node))


def _opens_for_writing(call: ast.Call, tree: ast.AST) -> bool:
    """Whether an ``os.open`` call has a write flag (flags held in a variable count when any
    assignment to that name in the module has one)."""
    flags = call.args[1:2]
    names = {n.id for arg in flags for n in ast.walk(arg) if isinstance(n, ast.Name)}
    assigned = [a.value for a in ast.walk(tree) if isinstance(a, (ast.Assign, ast.AnnAssign))
                and a.value is not None and any(
                    isinstance(t, ast.Name) and t.id in names
                    for t in (a.targets if isinstance(a, ast.Assign) else [a.target]))]
    return any(_has_write_flag(node) for node in [*flags, *assigned])


def open_for_writing_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """``os.open`` with a write flag (flags held in a variable count when any assignment to that
    name in the module has one) or ``open(.., "w"/"a"/"x"/"+")``."""
    for call, name in calls(tree):
        if name == "os.open":
            writes = _opens_for_writing(call, tree)
        elif name in ("open", "io.open") or name.endswith(".open"):
            # open(path, mode); Path.open(mode): a mode is the second argument, or the first of a method
            first = 0 if name.endswith(".open") and name != "io.open" else 1
            modes = [*call.args[first:2], *(k.value for k in call.keywords if k.arg == "mode")]
            writes = any(isinstance(m, ast.Constant) and isinstance(m.value, str) and _MODE.fullmatch(m.value)
                         and set(m.value) & set("wax+") for m in modes)
        else:
            writes = False
        if writes:
            yield call.lineno, name, rel


def atomic_import_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """An import of ``fvconsole.core.shared.atomic`` (the output-file door's tool)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module == "fvconsole.core.shared.atomic") or (
                isinstance(node, ast.Import) and any(a.name == "fvconsole.core.shared.atomic" for a in node.names)):
            yield node.lineno, "imports fvconsole.core.shared.atomic", rel


_STREAM_WRITES = {"sys.stdout.write", "sys.stderr.write", "sys.__stdout__.write", "sys.__stderr__.write",
                  "sys.stdout.writelines", "sys.stderr.writelines", "sys.stdout.buffer.write",
                  "sys.stderr.buffer.write"}


def stream_write_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """print(), a raw sys.stdout/sys.stderr write, os.write to fd 1/2, a stream on a dup of fd 1/2."""
    for call, name in calls(tree):
        first = call.args[0] if call.args else None
        on_std_fd = isinstance(first, ast.Constant) and first.value in (1, 2)
        nested = name == "os.fdopen" and isinstance(first, ast.Call) and dotted(first.func) == "os.dup"
        if name == "print" or name in _STREAM_WRITES or nested or (
                on_std_fd and name in ("os.write", "os.dup", "os.fdopen")):
            yield call.lineno, name, rel


_INVISIBLES = "\u200b\u200e\u202a\u202e\u2066\u2069\ufeff"


def sanitiser_table_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """A string holding bidi or zero-width characters: a second table of what to escape."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(c in node.value for c in _INVISIBLES):
            yield node.lineno, "bidi/zero-width characters", rel


_JSON_MODULES = ("json", "orjson", "simplejson", "ujson")
_DECODERS = ("load", "loads", "JSONDecoder", "raw_decode", "scanner", "decoder")


def json_decoding_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """Every way a module decodes JSON: ``json.loads``, ``from json import loads``, aliases."""
    aliases: set[str] = set()  # local names of a JSON module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in _JSON_MODULES}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _JSON_MODULES:
            for alias in node.names:
                if alias.name in _DECODERS or alias.name == "*":
                    yield node.lineno, f"from {node.module} import {alias.name}", rel
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _DECODERS and dotted(node.value).split(".")[0] in aliases:
            yield node.lineno, f"{dotted(node.value)}.{node.attr}", rel


#: Ways of taking a lock (attribute names: fcntl calls, lock commands, exclusive creation).
_LOCK_TAKERS = {"flock", "lockf", "F_OFD_SETLK", "F_OFD_SETLKW", "F_SETLK", "F_SETLKW", "O_EXCL"}


def lock_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """Every lock-taking attribute or name (``fcntl.flock``, ``os.O_EXCL`` ...), keyed by (module, name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _LOCK_TAKERS:
            yield node.lineno, node.attr, (rel, node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module in ("fcntl", "os"):
            for alias in node.names:
                if alias.name in _LOCK_TAKERS:
                    yield node.lineno, alias.name, (rel, alias.name)


#: The top-level import names that only an extra provides.
_EXTRA_PACKAGES = frozenset(name for names in EXTRAS.values() for name in names)
_OPTIONAL_CALLS = ("require", "require_all", "optional", "demo_module")


def optional_import_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """An extra's package imported itself (``import``, ``importlib.import_module``, ``find_spec``),
    a door call at module level outside ``fvconsole/demo/``, or naming the wrong extra."""
    type_checking = {id(n) for node in ast.walk(tree)
                     if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    in_function = {id(n) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                         ast.Lambda))
                   for n in ast.walk(node) if n is not node}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in _EXTRA_PACKAGES and id(node) not in type_checking:
                yield node.lineno, f"imports {name} itself", rel
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        literal = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        top = literal.split(".")[0] if isinstance(literal, str) else None
        if func.split(".")[-1] in ("import_module", "__import__", "find_spec") and top in _EXTRA_PACKAGES:
            yield node.lineno, f"{func}({literal!r})", rel
        if func.split(".")[-1] in _OPTIONAL_CALLS:
            if id(node) not in in_function and not rel.startswith("fvconsole/demo/"):
                yield node.lineno, f"{func}() at module level (import it where it is needed)", rel
            extra = next((k.value.value for k in node.keywords if k.arg == "extra"
                          and isinstance(k.value, ast.Constant)), None)
            if extra is not None and top is not None and top not in EXTRAS.get(extra, ()):
                yield node.lineno, f"{literal!r} is not a package of the {extra!r} extra", rel


def noatime_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """``O_NOATIME`` named (``os.O_NOATIME``, ``getattr(os, "O_NOATIME", 0)``): the open-then-fall-back rule."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == "O_NOATIME") or (
                isinstance(node, ast.Constant) and node.value == "O_NOATIME"):
            yield node.lineno, "O_NOATIME", rel


def read_open_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """``os.open`` without a write flag (a read-only fd on a file or directory), keyed by (module, function)."""
    for where, node in in_functions(tree):
        if isinstance(node, ast.Call) and dotted(node.func) == "os.open" and not _opens_for_writing(node, tree):
            yield node.lineno, f"({where or 'module level'}) os.open", (rel, where)


def listing_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """A directory listed (``os.scandir``, ``os.listdir``, ``Path.iterdir``), keyed by (module, function)."""
    for where, node in in_functions(tree):
        if isinstance(node, ast.Call) and (dotted(node.func) in ("os.scandir", "os.listdir") or (
                isinstance(node.func, ast.Attribute) and node.func.attr == "iterdir")):
            yield node.lineno, f"({where or 'module level'}) {ast.unparse(node.func)}", (rel, where)


def sidecar_decoding_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """A torch.save file decoded by the torch-free reader itself (``torch_zip.loads``, ``from ...torch_zip import loads``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("torch_zip"):
            for alias in node.names:
                if alias.name in ("loads", "*"):
                    yield node.lineno, f"from {node.module} import {alias.name}", rel
        elif isinstance(node, ast.Attribute) and node.attr == "loads" and dotted(node.value).endswith("torch_zip"):
            yield node.lineno, f"{dotted(node.value)}.loads", rel


_PICKLE_VM = "fvconsole.core.formats.inert_pickle"


def _text(node: ast.AST) -> str | None:
    """A string constant's text, or an f-string's constant parts joined; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def dcp_metadata_scan(rel: str, tree: ast.AST) -> Iterator[Finding]:
    """``dcp/.metadata`` named as a path (keyed by module), or the inert pickle VM's decoders imported
    (``load``, ``load_recorded``, the module itself: keyed (module, "decoder"))."""
    for node in ast.walk(tree):
        text = _text(node)
        if text is not None and (text == ".metadata" or text.endswith("/.metadata")):
            yield node.lineno, repr(text), rel
        elif isinstance(node, ast.ImportFrom) and node.module == _PICKLE_VM:
            for alias in node.names:
                if alias.name in ("load", "load_recorded", "*"):
                    yield node.lineno, f"from {node.module} import {alias.name}", (rel, "decoder")
        elif isinstance(node, ast.ImportFrom) and node.module == "fvconsole.core.formats" and any(
                alias.name == "inert_pickle" for alias in node.names):
            yield node.lineno, "from fvconsole.core.formats import inert_pickle", (rel, "decoder")
        elif isinstance(node, ast.Import) and any(alias.name == _PICKLE_VM for alias in node.names):
            yield node.lineno, f"import {_PICKLE_VM}", (rel, "decoder")


# ----------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class Door:
    """One hazard: the one module that does it, and what else may, each with its reason."""

    name: str  #: as in docs/DESIGN.md's ``## Doors`` (``<!-- door:NAME -->``), a suffix for a second scan
    door: str  #: the one module allowed to do it (or the one package: a folder, ``.../``)
    reason: str  #: why the hazard needs one door
    scan: Callable[[str, ast.AST], Iterable[Finding]]  #: what counts as doing it
    #: Other places that may, each with its reason; every entry must still match a finding.
    allowed: Mapping[Key, str] = field(default_factory=dict)
    #: Modules that may, whether or not the scan sees them do it now (another door's own module).
    exempt: Mapping[str, str] = field(default_factory=dict)
    #: The scan must see the door itself do it (proof that it looks where the hazard is);
    #: False with the reason where the door does it in a way the scan does not spell.
    door_seen: bool | str = True
    #: Source a module around the door would hold: each must be caught, in a module under cli/.
    caught: tuple[str, ...] = ()
    #: Source that must not be caught (what the scan must not confuse with the hazard).
    passed: tuple[str, ...] = ()
    #: Callers that must use the door: (modules, names they call between them), or (modules, the
    #: module they import the names from, names).
    callers: tuple[tuple[tuple[str, ...], frozenset[str]] | tuple[tuple[str, ...], str, frozenset[str]], ...] = ()


def _allows(key: Key, finding_key: object) -> bool:
    if isinstance(key, str) and key.endswith("/") and isinstance(finding_key, (str, tuple)):
        return (finding_key if isinstance(finding_key, str) else finding_key[0]).startswith(key)
    return key == finding_key


DOORS: tuple[Door, ...] = (
    Door("process-use", "fvconsole/core/shared/process_use.py",
         "a PID's fd table and maps are read once per scan, bounded, partial when a process cannot be read",
         process_use_scan,
         caught=('p = f"/proc/{pid}/fd"\n', "open('/proc/self/maps')\n", "os.path.join(p, 'fd')\n"),
         passed=("x = 'fdisk'\n",)),
    Door("bounded-walks", "fvconsole/core/shared/walk.py",
         "every size and recursive scan stops at MAX_ENTRIES/MAX_DEPTH and never follows a symlink",
         walk_scan,
         allowed={
             "fvconsole/demo/builders.py": "mirrors FastVideo's own _scan_manifest (os.walk), so the oracle "
                                           "matches it exactly",
             "fvconsole/demo/workspace.py": "the demo's own workspace, built by this process (the removal door "
                                            "owns its rebuild)",
         },
         # Its listing sits in a helper its loop calls (not seen by the scan), allowed whatever it becomes:
         exempt={"fvconsole/core/shared/removal.py": "the removal door: its fd-based walk is the removal itself "
                                              "(mount-aware)"},
         caught=("import os\ndef size(p):\n    return sum(size(e.path) for e in os.scandir(p))\n",
                 "import os\nfor top, dirs, files in os.walk(p):\n    pass\n", "n = len(list(p.rglob('*')))\n",
                 "import glob\nglob.glob('**', recursive=True)\n",
                 "import os\ndef f(stack):\n    while stack:\n        stack += os.listdir(stack.pop())\n"),
         passed=("import os\ndef f(p):\n    return os.listdir(p)\n",)),
    Door("removal", "fvconsole/core/shared/removal.py",
         "deleting is fd-based, never through a symlink, never across a mount, never outside the root",
         removal_scan,
         # Single-file unlinks of fvconsole's own files: (module, function) -> why it is safe.
         allowed={
             ("fvconsole/core/shared/atomic.py", "atomic_write_bytes"): "its own O_EXCL temp file, after a failed write",
             ("fvconsole/core/shared/locks/holder.py", "HolderRecord.publish"): "its own temp holder record, after a failed "
                                                                         "write",
             ("fvconsole/core/shared/locks/holder.py", "HolderRecord.withdraw"): "its own holder record, still under the lock",
             ("fvconsole/core/shared/locks/holder.py", "clean_dead_temps"): "temp records of this identity's dead runs",
             ("fvconsole/core/shared/locks/readers.py", "_clean_dead_records"): "reader records (and their temps) of "
                                                                                 "this identity's dead readers",
             ("fvconsole/core/shared/locks/lock_file.py", "FileLock.release"): "its own lock file",
             ("fvconsole/core/shared/locks/lock_file.py", "FileLock._create"): "its own temp lock record (after link)",
             ("fvconsole/core/shared/locks/lock_file.py", "FileLock._create_direct"): "its own lock file, after a failed write",
             ("fvconsole/core/shared/locks/lock_file.py", "FileLock._break"): "a provably dead holder's lock file, moved aside first",
             ("fvconsole/core/shared/locks/owner_lock.py", "OwnerLock.release"): "its own lock file, unlinked while still locked",
             ("fvconsole/demo/builders.py", "write_checkpoint"): "the .metadata of a checkpoint it just wrote "
                                                                 "(fixture)",
         },
         caught=("import shutil\nshutil.rmtree(p)\n", "from shutil import rmtree\n", "import os\nos.rmdir(p)\n",
                 "import os\nos.remove(p)\n", "def f(p):\n    p.unlink()\n", "import os\nos.removedirs(p)\n",
                 "from os import unlink\n",
                 # an allowlisted function that starts removing trees is caught all the same:
                 "import shutil\nclass FileLock:\n    def release(self):\n        shutil.rmtree(self.path)\n"),
         passed=("def g(items):\n    items.remove(1)\n",)),
    Door("output-files", "fvconsole/core/shared/output_file.py",
         "what is at a user-named path decides how it is written (a FIFO, a symlink, a directory)",
         rename_scan,
         allowed={
             "fvconsole/core/migration/publish.py": "publishes the staged sidecar set into --output-dir (rename or "
                                                    "exchange), a directory judged by core/migration/output_dir.py",
             "fvconsole/core/cache/evict.py": "renames an entry to .evicting-* inside the cache root (eviction's "
                                              "first step)",
             "fvconsole/core/retention/execute.py": "renames a checkpoint-<step> dir out of FastVideo's pattern "
                                                    "inside the output dir (a prune's first step), or back when "
                                                    "its re-check fails",
             "fvconsole/core/shared/locks/": "puts a holder record into place; moves a provably dead holder's lock "
                                               "file aside (the locks door)",
             "fvconsole/core/migration/faults.py": "the test-only fault hook's announcement file",
             "fvconsole/demo/cache_builders.py": "writes manifests into the demo's own cache, as FastVideo does",
         },
         exempt={"fvconsole/core/shared/atomic.py": "atomic replace of fvconsole's own files (temp, fsync, rename); the "
                                             "door's tool"},
         door_seen="it renames through core/shared/atomic.py, its tool",
         caught=("import os\nos.replace(a, b)\n", "import os\nos.rename(a, b)\n", "import shutil\nshutil.move(a, b)\n",
                 "import os\nos.link(a, b)\n", "p.rename(q)\n"),
         passed=("import os\nos.path.join(a, b)\n",)),
    Door("output-files: open for writing", "fvconsole/core/shared/output_file.py",
         "a file opened for writing at a user-named path must be judged first (FIFO, symlink, device)",
         open_for_writing_scan,
         allowed={
             "fvconsole/cli/streams.py": "points closed fds 0-2 at /dev/null",
             "fvconsole/core/shared/locks/": "its own lock files: O_EXCL records, the evictor's lock file opened to "
                                        "write-lock it (the locks door)",
             "fvconsole/core/migration/faults.py": "the test-only fault hook's trace and announcement files",
             "fvconsole/demo/": "fixture builders writing inside the workspace they build",
         },
         exempt={"fvconsole/core/shared/atomic.py": "atomic replace of fvconsole's own files (temp, fsync, rename); the "
                                             "door's tool"},
         caught=("open(p, 'w')\n", "open(p, mode='a')\n", "import io\nio.open(p, 'x')\n", "p.open('r+')\n",
                 "import os\nos.open(p, os.O_WRONLY | os.O_CREAT)\n",
                 "import os\nFLAGS = os.O_RDWR\nos.open(p, FLAGS)\n"),
         passed=("open(p)\n", "open(p, 'rb')\n", "import os\nos.open(p, os.O_RDONLY)\n", "z.open('weights.bin')\n",
                 "p.open()\n"),
         callers=((("fvconsole/cli/formats.py",), frozenset({"write_output"})),  # --output of cache ls
                  (("fvconsole/core/journal/log.py",), frozenset({"open_append"})),
                  (("fvconsole/cli/fleet.py", "fvconsole/cli/cache.py"), frozenset({"write_output_file"})))),
    Door("output-files: its tool", "fvconsole/core/shared/output_file.py",
         "the front ends write a user-named path through core/shared/output_file.py, never core/shared/atomic.py directly",
         atomic_import_scan,
         allowed={"fvconsole/core/": "the core writes its own files (receipts, records) atomically",
                  "fvconsole/demo/": "fixture builders writing inside the workspace they build"},
         caught=("from fvconsole.core.shared.atomic import atomic_write_bytes\n", "import fvconsole.core.shared.atomic\n"),
         passed=("from fvconsole.core.shared.output_file import write_output\n",)),
    Door("terminal-text", "fvconsole/cli/streams.py",
         "untrusted text reaches the terminal only escaped, and a stream that cannot encode it never crashes",
         stream_write_scan,
         caught=("print(x)\n", "import sys\nsys.stdout.write(x)\n", "import sys\nsys.stderr.buffer.write(b)\n",
                 "import os\nos.write(1, b)\n", "import os\nf = os.fdopen(2, 'w')\n",
                 "import os\nf = os.fdopen(os.dup(fd), 'w')\n"),
         passed=("import os\nos.write(fd, b)\n", "out.write(x)\n")),
    Door("terminal-text: one sanitiser", "fvconsole/core/shared/terminal_text.py",
         "one rule for what is escaped: a second table of invisible characters would drift from it",
         sanitiser_table_scan,
         door_seen="it escapes by Unicode category, so it holds no table of characters",
         caught=("BIDI = '\u202e\u2066'\n", "x = s.replace('\u200b', '')\n"),
         passed=("x = '\\\\u200b'\n",),
         callers=((("fvconsole/tui/plain.py",), "fvconsole.core.shared", frozenset({"printable", "pictured"})),)),
    Door("untrusted-documents", "fvconsole/core/shared/untrusted.py",
         "a decoded document is bounded (size, depth, numbers) and its fields typed, one error naming the field",
         json_decoding_scan,
         allowed={"fvconsole/demo/builders.py": "fixture builder: reads back the streaming manifest it just wrote, "
                                                "with FastVideo's own json.load, so the fixture's loader state "
                                                "matches FastVideo exactly"},
         caught=("import json\njson.loads(b)\n", "import orjson as oj\noj.loads(b)\n", "from json import loads\n",
                 "import json\njson.JSONDecoder().raw_decode(s)\n", "from json import *\n"),
         passed=("import json\njson.dumps(x)\n", "loads(b)\n")),
    Door("sidecars", "fvconsole/core/formats/sidecar_files.py",
         "a sidecar someone else wrote is decoded bounded and every integer in it range-checked before any "
         "arithmetic (decode_sidecar), one error naming the field",
         sidecar_decoding_scan,
         allowed={"fvconsole/core/migration/write.py": "reads back the bytes it has just written and compares them "
                                                       "with the payload it encoded, nothing taken from them"},
         caught=("from fvconsole.core.formats import torch_zip\ntorch_zip.loads(b)\n",
                 "from fvconsole.core.formats.torch_zip import loads\n",
                 "import fvconsole.core.formats.torch_zip\nfvconsole.core.formats.torch_zip.loads(b)\n"),
         passed=("from fvconsole.core.formats import torch_zip\ntorch_zip.dumps(p)\n", "import json\njson.loads(b)\n"),
         callers=((("fvconsole/core/migration/source_state.py", "fvconsole/core/migration/verify.py"),
                   "fvconsole.core.formats.sidecar_files", frozenset({"decode_sidecar"})),)),
    Door("dcp-metadata", "fvconsole/core/checkpoints/dcp_metadata.py",
         "a checkpoint's dcp/.metadata (a pickle anyone with write access may plant) is read bounded, decoded "
         "inertly under DCP_LIMITS and refused in one wording naming the file, by one reader",
         dcp_metadata_scan,
         allowed={
             ("fvconsole/core/formats/torch_zip.py", "decoder"): "decodes torch.save's data.pkl (sidecars, RNG "
                                                                 "snapshots) with its own resolvers and caps",
             "fvconsole/tui/checkpoints/rows.py": "stats the file for a row's save time (dcp.save writes it last); "
                                                  "never reads it",
             "fvconsole/demo/builders.py": "fixture builder: removes the .metadata of a checkpoint it just wrote",
         },
         caught=("import os\np = os.path.join(d, 'dcp', '.metadata')\n", "p = f'{d}/dcp/.metadata'\n",
                 "from fvconsole.core.formats.inert_pickle import load\n",
                 "from fvconsole.core.formats.inert_pickle import load_recorded as lr\n",
                 "from fvconsole.core.formats import inert_pickle\n", "import fvconsole.core.formats.inert_pickle\n"),
         passed=("x = 'metadata.json'\n", "from fvconsole.core.formats.inert_pickle import InertObject\n",
                 '"""Reads dcp/.metadata once."""\n', "from fvconsole.core.checkpoints import read_dcp_metadata\n"),
         callers=((("fvconsole/cli/checkpoints.py",), "fvconsole.core.checkpoints", frozenset({"read_dcp_metadata"})),
                  (("fvconsole/core/checkpoints/detail.py",), "fvconsole.core.checkpoints.dcp_metadata",
                   frozenset({"read_dcp_metadata"})),
                  (("fvconsole/core/checkpoints/storage.py",), "fvconsole.core.checkpoints.dcp_metadata",
                   frozenset({"read_dcp_metadata"})),
                  (("fvconsole/core/checkpoints/listing.py",), "fvconsole.core.checkpoints.dcp_metadata",
                   frozenset({"dataloader_key_count", "dcp_metadata_gap"})),
                  (("fvconsole/core/migration/inputs.py",), "fvconsole.core.checkpoints.dcp_metadata",
                   frozenset({"dcp_metadata_refusal"})))),
    Door("locks", "fvconsole/core/shared/locks/",
         "a lock names its holder's host, boot and PID namespace, so a stale one is judged the same everywhere",
         lock_scan,
         # An O_EXCL create of a uniquely named temp file is no lock: (module, name) -> why.
         allowed={
             ("fvconsole/core/shared/atomic.py", "O_EXCL"): "creates its own uniquely named temp file before the rename",
         },
         caught=("import fcntl\nfcntl.flock(fd, 2)\n", "from fcntl import flock\n", "import fcntl\nfcntl.lockf(fd, 2)\n",
                 "import fcntl\nfcntl.fcntl(fd, fcntl.F_OFD_SETLK, b'')\n",
                 "import os\nos.open(p, os.O_CREAT | os.O_EXCL)\n"),
         passed=("import fcntl\nfcntl.fcntl(fd, fcntl.F_GETFL)\n",)),
    Door("optional-imports", "fvconsole/core/shared/optional.py",
         "the base install has no torch, safetensors, numpy or pyarrow: a missing one is one line naming the extra",
         optional_import_scan,
         door_seen="it imports a name passed in (importlib.import_module(module)); "
                   "tests/architecture/test_lean_install.py checks that line",
         caught=("import torch\n", "def f():\n    import pyarrow.parquet as pq\n",
                 "def f():\n    from safetensors.torch import save_file\n",
                 "import importlib\nnp = importlib.import_module('numpy')\n",
                 "torch = require('torch', extra='torch', purpose='x')\n",
                 "def f():\n    require('pyarrow', extra='torch', purpose='x')\n"),
         passed=("def f():\n    require('torch', extra='torch', purpose='x')\n",
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n")),
    Door("no-atime", "fvconsole/core/shared/safe_read.py",
         "reading or listing never moves an atime: one rule for O_NOATIME and its EPERM fall-back (open_noatime)",
         noatime_scan,
         caught=("import os\nfd = os.open(p, os.O_RDONLY | os.O_NOATIME)\n",
                 "import os\nNOATIME = getattr(os, 'O_NOATIME', 0)\n"),
         passed=("x = 'without O_NOATIME, the atime moves'\n",),
         callers=((("fvconsole/core/shared/walk.py", "fvconsole/core/shared/removal.py"),
                   "fvconsole.core.shared.safe_read", frozenset({"open_noatime"})),)),
    Door("input-files", "fvconsole/core/shared/safe_read.py",
         "a file found in a directory a user controls is opened one way: never through a symlink, never "
         "blocking on a FIFO, atime untouched (open_input; open_regular for a named input file)",
         read_open_scan,
         allowed={
             ("fvconsole/core/shared/atomic.py", "fsync_dir"): "a directory fvconsole just wrote into, for fsync",
             ("fvconsole/core/shared/durable.py", "fsync_at"): "a file fvconsole wrote, for fsync",
             ("fvconsole/core/migration/write.py", "write_set"): "the staging dir this run just made",
             ("fvconsole/core/shared/mounts.py", "_read_bounded"): "/proc (no atimes, no symlinks planted)",
             ("fvconsole/core/shared/locks/holder.py", "read_record"): "a lock record (the locks door reads its own)",
             ("fvconsole/core/shared/locks/owner_lock.py", "is_write_locked"): "a lock file, for F_OFD_GETLK only",
             ("fvconsole/core/shared/locks/root_lock.py", "RootLock.acquire"): "the cache root, to hold the lock file by "
                                                                      "its directory fd",
             ("fvconsole/core/journal/log.py", "read_journal"): "the journal, fvconsole's own file",
         },
         exempt={"fvconsole/core/shared/removal.py": "the removal door opens through open_noatime itself"},
         door_seen="it opens through open_noatime, whose os.open calls take their flags as a parameter",
         caught=("import os\nfd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)\n",),
         passed=("import os\nfd = os.open(p, os.O_WRONLY | os.O_CREAT)\n",),
         callers=((("fvconsole/core/cache/files.py", "fvconsole/core/cache/scan.py", "fvconsole/core/migration/publish.py"),
                   "fvconsole.core.shared.safe_read", frozenset({"open_input"})),)),
    Door("listings", "fvconsole/core/shared/walk.py",
         "listing a directory by name moves its atime: every listing goes through walk.listing (O_NOATIME) or "
         "lists a directory fd opened by the input-file door",
         listing_scan,
         allowed={
             ("fvconsole/core/cache/files.py", "iter_fd"): "lists a directory fd opened by open_input",
             ("fvconsole/core/cache/files.py", "list_fd"): "lists a directory fd opened by open_input",
             ("fvconsole/core/cache/files.py", "list_fd_opening"): "lists a directory fd opened by open_input",
             ("fvconsole/core/migration/publish.py", "verify_published"): "lists a directory fd opened by open_input",
             ("fvconsole/core/shared/process_use.py", "scan_processes"): "/proc (no atimes to keep)",
             ("fvconsole/core/shared/process_use.py", "_read_fds"): "/proc (no atimes to keep)",
             ("fvconsole/core/shared/locks/owner_lock.py", "_holds_write_lock"): "/proc (no atimes to keep)",
             ("fvconsole/tui/widgets/inputs.py", "complete_path"): "completes the path the operator is typing",
             "fvconsole/demo/": "fixture builders listing the workspace they build",
         },
         exempt={"fvconsole/core/shared/removal.py": "the removal door: lists directory fds it opened through "
                                                     "open_noatime"},
         caught=("import os\nnames = os.listdir(p)\n", "import os\nwith os.scandir(p) as it:\n    pass\n",
                 "names = list(p.iterdir())\n"),
         passed=("from fvconsole.core.shared.walk import listing\nwith listing(p) as it:\n    pass\n",)),
)

ROWS = [pytest.param(door, id=door.name) for door in DOORS]


def findings(door: Door) -> tuple[list[str], set[Key], list[str]]:
    """(what goes around the door, the allowlist entries that matched, what the door itself does)."""
    around, used, own = [], set(), []
    for rel, tree in modules():
        for line, what, key in door.scan(rel, tree):
            if rel == door.door or (door.door.endswith("/") and rel.startswith(door.door)):
                own.append(f"{rel}:{line}: {what}")
                continue
            if rel in door.exempt:
                continue
            matched = [entry for entry in door.allowed if _allows(entry, key)] if key is not None else []
            used.update(matched)
            if not matched:
                around.append(f"{rel}:{line}: {what}")
    return around, used, own


@pytest.mark.parametrize("door", ROWS)
def test_no_module_goes_around_its_door(door: Door) -> None:
    """Only the door (and the allowlist, each entry with its reason) does what the row's scan finds."""
    around, used, own = findings(door)
    assert around == [], f"{door.name}: goes around {door.door} ({door.reason}):\n" + "\n".join(around)
    assert set(door.allowed) - used == set(), f"{door.name}: allowlist entries that match nothing: remove them"
    for path in (door.door, *door.exempt, *(k if isinstance(k, str) else k[0] for k in door.allowed)):
        assert (REPO / path).exists(), f"{door.name}: {path} is gone"
    if door.door_seen is True:
        assert own, f"{door.name}: the scan sees nothing in {door.door} itself, so it looks in the wrong place"


@pytest.mark.parametrize("door", ROWS)
def test_each_door_scan_can_fail(door: Door) -> None:
    """Guard the guard: each way around the door, in a module of cli/, is caught; the clean ones are not."""
    assert door.caught, f"{door.name}: no samples"
    for source in door.caught:
        assert list(door.scan("fvconsole/cli/x.py", ast.parse(source))), f"{door.name} misses:\n{source}"
    for source in door.passed:
        assert list(door.scan("fvconsole/cli/x.py", ast.parse(source))) == [], f"{door.name} flags:\n{source}"


@pytest.mark.parametrize("door", [row for row in ROWS if row.values[0].callers])
def test_the_callers_use_their_door(door: Door) -> None:
    trees = dict(modules())
    for *callers, names in door.callers:
        rels, source = (callers[0], callers[1]) if len(callers) == 2 else (callers[0], None)
        if source is None:
            used = {name for rel in rels for _, name in calls(trees[rel])}
        else:
            used = set().union(*(imported(trees[rel], source) for rel in rels))
        assert names <= used, f"{door.name}: {rels} do not use {sorted(names - used)}"


def test_every_door_of_the_design_has_a_row() -> None:
    """docs/DESIGN.md's ``## Doors`` names each door by a placeholder; each has a row here."""
    design = (REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    named = {line.split("door:", 1)[1].split("-->")[0].strip() for line in design.splitlines()
             if line.startswith("<!-- door:")}
    assert named and named <= {door.name for door in DOORS}
