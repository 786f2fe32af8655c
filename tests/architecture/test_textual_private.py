"""Textual's private API is used by one module of the package only (issue 35, item 6):
``fvconsole/tui/widgets/textual_private.py``, which docs/DESIGN.md names and says why.

Anywhere else in ``fvconsole/`` none of these may appear:

- an import of a private Textual module or name: ``textual._x``, ``textual.<pkg>._x`` (at any
  depth), ``from textual.x import _name``;
- a private attribute reached through a name imported from Textual: ``CommandPalette._x``,
  ``textual.widgets.DataTable._x``;
- a class that overrides a private member a Textual class defines (``def _render_line`` in a
  ``DataTable``, a ``_button`` property in a ``Checkbox``), found on the classes themselves.

What Textual's metaclass keeps on every widget class (``_reactives``, ``_css_type_name``...) is
not an override. The scan's own samples below must be caught, and the clean ones must not.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fvconsole"
#: The one module allowed (written by hand, not read from the code).
ALLOWED = PACKAGE / "tui" / "widgets" / "textual_private.py"
#: Kept by Textual's metaclass and message pump on every class: bookkeeping, not overrides.
BOOKKEEPING = frozenset({
    "_decorated_handlers", "_reactives", "_inherit_css", "_inherit_bindings", "_inherit_component_classes",
    "_css_type_name", "_merged_bindings", "_css_type_names", "_computes", "_abc_impl",
})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_textual_names(source: str) -> list[str]:
    """Every import of a private Textual module or name, and every private attribute reached
    through a name imported from Textual, in ``source`` (as ``line: what``)."""
    tree = ast.parse(source)
    found: list[str] = []
    textual_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "textual":
                    continue
                if any(_private(part) for part in parts):
                    found.append(f"{node.lineno}: import {alias.name}")
                textual_names.add(alias.asname or parts[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "textual":
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                textual_names.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in textual_names:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def private_overrides(cls: type) -> list[str]:
    """The private members a Textual class defines that ``cls`` itself defines again."""
    found = []
    for name in vars(cls):
        if not _private(name) or name in BOOKKEEPING:
            continue
        for base in cls.__mro__[1:]:
            if base.__module__.split(".")[0] == "textual" and name in vars(base):
                found.append(f"{cls.__name__}.{name} overrides {base.__module__}.{base.__name__}.{name}")
                break
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != ALLOWED)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


CAUGHT = {
    "a private module": "from textual._segment_tools import line_crop",
    "a private module, imported": "import textual._segment_tools",
    "a package's private module": "from textual.widgets._data_table import RowRenderables",
    "a private module from its package": "from textual.widgets import _data_table",
    "a private name": "from textual import _segment_tools as tools",
    "a class's private attribute": "from textual.command import CommandPalette\ngroup = CommandPalette._GATHER_COMMANDS_GROUP",
    "through a module": "import textual.widgets\nf = textual.widgets.DataTable._clear_caches",
    "through an alias": "from textual import widgets as w\nf = w.DataTable._render_line",
}
CLEAN = (
    "from textual.widgets import DataTable\nf = DataTable.render_line\ng = DataTable.__init__",
    "from textual.strip import Strip\nclass A:\n    def f(self):\n        return self._cache",
    "import os\nos._exit(0)",
)


@pytest.mark.parametrize("source", CAUGHT.values(), ids=CAUGHT.keys())
def test_the_scan_catches(source: str) -> None:
    assert private_textual_names(source)


@pytest.mark.parametrize("source", CLEAN)
def test_the_scan_leaves(source: str) -> None:
    assert private_textual_names(source) == []


def test_an_override_of_a_private_member_is_caught() -> None:
    from textual.widgets import Checkbox, DataTable

    class Drawn(DataTable):
        def _render_line(self, *args: object) -> None: ...

        def render_line(self, y: int) -> None: ...

    class Ticked(Checkbox):
        @property
        def _button(self) -> None: ...

    assert private_overrides(Drawn) == [
        "Drawn._render_line overrides textual.widgets._data_table.DataTable._render_line"]
    assert len(private_overrides(Ticked)) == 1
    assert private_overrides(type("Plain", (DataTable,), {"own": 1})) == []


def test_no_module_but_one_reaches_into_textuals_private_api() -> None:
    assert ALLOWED.is_file()
    found = []
    for path in _modules():
        rel = path.relative_to(PACKAGE.parent)
        found += [f"{rel}:{hit}" for hit in private_textual_names(path.read_text(encoding="utf-8"))]
        if path.relative_to(PACKAGE).parts[0] != "tui":
            continue  # only the console imports Textual (the import-linter contracts in pyproject.toml)
        module = importlib.import_module(_module_name(path))
        for _name, cls in vars(module).items():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                found += [f"{rel}: {hit}" for hit in private_overrides(cls)]
    assert not found, "Textual's private API outside tui/widgets/textual_private.py:\n" + "\n".join(found)


def test_the_allowed_module_is_where_the_private_api_is_used() -> None:
    """The allowance is not dead: the module it names does use the private API (else drop it)."""
    assert private_textual_names(ALLOWED.read_text(encoding="utf-8"))
