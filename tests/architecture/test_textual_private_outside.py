"""Textual's private API outside the package (issue 35, item 6): the tests, the benchmarks and
the scripts use it in one module only, ``tests/textual_test_private.py``, whose helpers say why
no public route exists (``tests/tui/test_textual_internals.py`` checks what it relies on).

The scan is :mod:`test_textual_private`'s, on each file's source without importing it (a test
module's import runs its own imports): an import of a private Textual module or name, a
private attribute reached through a name imported from Textual, and a private member Textual
defines (read from its source) reached through an instance, assigned or defined again
(``app._driver``, ``app._notifications``, ``getattr(app, "_exit")``, ``self._exit`` in an
``App`` defined inside a test). A class's bases are the file's classes, Textual's and the
console's, found through the file's imports of ``textual`` and ``fvconsole``.

Unlike the package's scan, no private name is exempt as the console's own: the console also
names members ``_file``, ``_app`` or ``_title``, and exempting those would let
``driver._file`` and ``pilot._app`` through. A test reads such a member of the console's
through a public route of the console's.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest
from test_textual_private import every_class, private_member_uses, private_textual_names

ROOT = Path(__file__).resolve().parents[2]
#: Where the scan looks, and the one module allowed there (written by hand, not read from the code).
FOLDERS = ("tests", "benchmarks", "scripts")
ALLOWED = Path("tests") / "textual_test_private.py"


def _imports(tree: ast.Module) -> dict[str, Any]:
    """What the file's imports of ``textual`` and ``fvconsole`` bind, wherever they stand."""
    namespace: dict[str, Any] = {}
    for node in ast.walk(tree):
        try:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in ("textual", "fvconsole"):
                        module = importlib.import_module(alias.name)
                        namespace[alias.asname or alias.name.split(".")[0]] = (
                            module if alias.asname else importlib.import_module(alias.name.split(".")[0]))
            elif (isinstance(node, ast.ImportFrom) and not node.level
                  and (node.module or "").split(".")[0] in ("textual", "fvconsole")):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    value = getattr(module, alias.name, None)
                    if value is None:
                        value = importlib.import_module(f"{node.module}.{alias.name}")
                    namespace[alias.asname or alias.name] = value
        except ImportError:
            continue
    return namespace


def _resolve(expr: ast.expr, names: dict[str, Any]) -> Any:
    """The object a base expression names (``App``, ``App[None]``, ``textual.app.App``), or None."""
    if isinstance(expr, ast.Subscript):
        return _resolve(expr.value, names)
    if isinstance(expr, ast.Name):
        return names.get(expr.id)
    if isinstance(expr, ast.Attribute):
        return getattr(_resolve(expr.value, names), expr.attr, None)
    return None


def stand_ins(tree: ast.Module) -> dict[str, type]:
    """A class with the real bases for each class of the file, by the name :func:`every_class`
    gives it (a base that is not a class the scan can find is left out)."""
    names = _imports(tree)
    found: dict[str, type] = {}
    for qualname, node in every_class(tree):
        bases = tuple(base for base in (_resolve(b, names) for b in node.bases) if isinstance(base, type))
        try:
            cls = type(node.name, bases or (object,), {})
        except TypeError:  # bases that cannot be combined without the class's own body
            cls = type(node.name, (object,), {})
        found[qualname] = names[node.name] = cls
    return found


def private_uses(source: str) -> list[str]:
    """Every use of Textual's private API in a test's, benchmark's or script's ``source``."""
    return sorted(set(private_textual_names(source)
                      + private_member_uses(source, stand_ins(ast.parse(source)), set(), anywhere=True)),
                  key=lambda hit: int(hit.split(":")[0]))


def scan(root: Path) -> list[str]:
    """``path:line: what`` for each use under ``root``'s tests/, benchmarks/ and scripts/,
    ``tests/textual_test_private.py`` left out."""
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root)
            if rel != ALLOWED:
                found += [f"{rel}:{hit}" for hit in private_uses(path.read_text(encoding="utf-8"))]
    return found


#: What tests once did (each must be caught): the burst's driver, the exit flag, the queue,
#: the notifications, a private import, a private member of an app defined inside a test,
#: one of a console class's Textual bases, through getattr, and an override in a test's widget.
CAUGHT = {
    "a driver": "def send(app, event):\n    app._driver.send_message(event)",
    "an exit flag": "async def drain(app):\n    while not app._exit:\n        pass",
    "a message queue": "def idle(app):\n    return app._message_queue.empty()",
    "notifications": "def shown(app):\n    return [n.message for n in app._notifications]",
    "a private import": "from textual.keys import _character_to_key",
    "an app in a test": ("def test_x():\n    from textual.app import App\n\n    class One(App[None]):\n"
                         "        def f(self):\n            return self._exit\n"),
    "a console class's base": ("from fvconsole.tui.widgets.tables import FastTable\n\nclass T(FastTable):\n"
                               "    def f(self):\n        return self._pruning\n"),
    "through getattr": "def f(app):\n    return getattr(app, '_notifications')",
    "an override in a test": ("def test_y():\n    from textual.widget import Widget\n\n    class W(Widget):\n"
                              "        def _forward_event(self, event):\n            pass\n"),
}
#: The public routes that replaced them, and private names that are not Textual's: none is caught.
CLEAN = (
    "def f(app, event):\n    app.post_message(event)\n    return app.return_code, app.message_queue_size",
    "def f(app):\n    return app.clipboard, app.screen.screen_layout_refresh_signal",
    "def f(view):\n    return view._entries",
    "class Clock:\n    def __init__(self, app):\n        self._display = None\n        self._app = app",
    ("def test_z():\n    from textual.app import App\n\n    class One(App[None]):\n"
     "        def f(self):\n            self._seen = []\n"),
    "import os\nos._exit(0)",
)


@pytest.mark.parametrize("source", CAUGHT.values(), ids=CAUGHT.keys())
def test_the_scan_catches(source: str) -> None:
    assert private_uses(source)


@pytest.mark.parametrize("source", CLEAN)
def test_the_scan_leaves(source: str) -> None:
    assert private_uses(source) == []


def test_a_use_outside_the_allowed_module_fails_the_scan(tmp_path: Path) -> None:
    """The scan can fail: a synthetic tree with a use in a test, a benchmark and a script, and
    the same uses in the allowed module, which are not reported."""
    sources = {
        "tests/tui/test_sample.py": "async def f(app):\n    await app._driver.stop()\n",
        "benchmarks/cases_sample.py": "import os\n\nfrom textual.keys import _character_to_key\n",
        "scripts/sample.py": "def f(app):\n    return app._notifications\n",
        str(ALLOWED): "from textual.keys import _character_to_key\n\n\ndef f(app):\n    return app._display\n",
    }
    for rel, source in sources.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(source, encoding="utf-8")
    assert scan(tmp_path) == [
        "tests/tui/test_sample.py:2: app._driver",
        "benchmarks/cases_sample.py:3: from textual.keys import _character_to_key",
        "scripts/sample.py:2: app._notifications",
    ]


def test_no_test_benchmark_or_script_reaches_into_textuals_private_api() -> None:
    found = scan(ROOT)
    assert not found, "Textual's private API outside tests/textual_test_private.py:\n" + "\n".join(found)


def test_the_allowed_test_module_is_where_the_private_api_is_used() -> None:
    """The allowance is not dead: the module it names does use the private API (else drop it)."""
    assert private_uses((ROOT / ALLOWED).read_text(encoding="utf-8"))
