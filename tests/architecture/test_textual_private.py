"""Textual's private API is used by one module of the package only (issue 35, item 6):
``fvconsole/tui/widgets/textual_private.py``, which docs/DESIGN.md names and says why.

Anywhere else in ``fvconsole/`` none of these may appear:

- an import of a private Textual module or name: ``textual._x``, ``textual.<pkg>._x`` (at any
  depth), ``from textual.x import _name``;
- a private attribute reached through a name imported from Textual: ``CommandPalette._x``,
  ``textual.widgets.DataTable._x``;
- a class that overrides a private member a Textual class defines (``def _render_line`` in a
  ``DataTable``, a ``_button`` property in a ``Checkbox``), found on the classes themselves;
- a private member of Textual's reached through an instance: ``self._x`` (or ``super()._x``, a
  class-level ``_x``) in a class with a Textual base that defines ``_x`` (``self._driver`` in an
  ``App``, ``self._writer_thread`` in a driver; assigning one counts: ``self._loop = None`` in a
  driver clobbers the driver's own), and ``obj._x`` on any other object when ``_x`` is a private
  member of some Textual class that the console does not define itself (``app._driver``,
  ``widget._forward_event(...)``, ``thread._queue``). ``getattr(obj, "_x")`` counts the same.

Textual's private members are read from its installed source (:func:`textual_private_members`:
every class's private methods and class attributes, and every ``self._x`` it assigns) and from
the classes themselves (what its metaclass adds). What Textual's metaclass keeps on every widget
class (``_reactives``, ``_css_type_name``...) is not an override. The console's own private
names (``self._busy`` in a view, ``os._exit``) are fine. The scan's own samples below must be
caught, and the clean ones must not.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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


def _class_private_names(node: ast.ClassDef, *, assigned: bool) -> dict[str, int]:
    """The private names a class body defines (methods, class attributes, annotations), and with
    ``assigned`` every ``self._x`` its methods assign too: name -> first line."""
    names: dict[str, int] = {}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            targets = [item.name]
        elif isinstance(item, ast.Assign):
            targets = [n.id for target in item.targets for n in ast.walk(target) if isinstance(n, ast.Name)]
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            targets = [item.target.id]
        else:
            continue
        for name in targets:
            if _private(name):
                names.setdefault(name, item.lineno)
    if assigned:
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(item):
                    if (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _private(n.attr)
                            and isinstance(n.value, ast.Name) and n.value.id == "self"):
                        names.setdefault(n.attr, n.lineno)
    return names


def _classes(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.ClassDef]]:
    """Every class statement at module level or nested in a class, with its qualified name."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield prefix + node.name, node
            yield from _classes(node.body, f"{prefix}{node.name}.")


def every_class(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.ClassDef]]:
    """Every class statement under ``node``, in functions and blocks too (a test defines its app
    inside the test), named by the classes and functions around it: ``test_x.main.Pane``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            yield prefix + child.name, child
            yield from every_class(child, f"{prefix}{child.name}.")
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from every_class(child, f"{prefix}{child.name}.")
        else:
            yield from every_class(child, prefix)


@functools.cache
def textual_private_members() -> Mapping[tuple[str, str], frozenset[str]]:
    """(module, class qualname) -> the private members that class of the installed Textual
    defines: methods, class attributes and every ``self._x`` its methods assign."""
    import textual

    root = Path(textual.__file__).resolve().parent
    members: dict[tuple[str, str], frozenset[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for qualname, node in _classes(tree.body):
            members[(module, qualname)] = frozenset(_class_private_names(node, assigned=True))
    return members


@functools.cache
def all_textual_private_members() -> frozenset[str]:
    return frozenset().union(*textual_private_members().values())


def _family(cls: type) -> Iterator[type]:
    """``cls``'s bases, and those of every subclass (a mixin's ``self`` is its subclasses' too)."""
    yield from cls.__mro__[1:]
    for sub in cls.__subclasses__():
        yield sub
        yield from _family(sub)


def textual_members_of(cls: type) -> frozenset[str]:
    """The private members the Textual classes among ``cls``'s bases define, or among the bases
    of a class that inherits from ``cls`` (a mixin of a widget)."""
    found: set[str] = set()
    for base in set(_family(cls)):
        if base.__module__.split(".")[0] == "textual":
            found |= textual_private_members().get((base.__module__, base.__qualname__), frozenset())
            found |= {name for name in vars(base) if _private(name)}
    return frozenset(found)


def console_private_names(source: str) -> set[str]:
    """The private names the classes of ``source`` define themselves (members and ``self._x``)."""
    tree = ast.parse(source)
    return {name for _q, node in _classes(tree.body) for name in _class_private_names(node, assigned=True)}


def _private_attribute(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``(object, name)`` for ``object._name`` and ``getattr/setattr/hasattr(object, "_name", ...)``."""
    if isinstance(node, ast.Attribute) and _private(node.attr):
        return node.value, node.attr
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)):
        return node.args[0], node.args[1].value
    return None


def _is_self(node: ast.expr) -> bool:
    return ((isinstance(node, ast.Name) and node.id in ("self", "cls"))
            or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"))


def _other_modules(tree: ast.Module) -> set[str]:
    """Names bound by importing something not from Textual (``os``: ``os._exit`` is not Textual's)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names
                      if alias.name.split(".")[0] != "textual"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] != "textual":
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def private_member_uses(source: str, namespace: Mapping[str, Any], own: set[str], *,
                        anywhere: bool = False) -> list[str]:
    """Every use in ``source`` of a private member Textual defines (``line: what``), as the
    module doc says. ``namespace`` holds the module's objects (its classes, to find their
    Textual bases; a class is looked up by its qualified name, else by the path to it);
    ``own`` is the private names the console defines itself. With ``anywhere``, the classes
    inside functions are checked too (named as :func:`every_class` names them)."""
    tree = ast.parse(source)
    found: list[str] = []
    in_classes: set[int] = set()
    for qualname, node in (every_class(tree) if anywhere else _classes(tree.body)):
        cls: Any = namespace.get(qualname)
        if cls is None:
            cls = namespace.get(qualname.split(".")[0])
            for part in qualname.split(".")[1:]:
                cls = getattr(cls, part, None)
        textuals = textual_members_of(cls) if inspect.isclass(cls) else frozenset()
        found += [f"{line}: {qualname} defines {name}, a member of its Textual base"
                  for name, line in _class_private_names(node, assigned=False).items() if name in textuals]
        for n in ast.walk(node):
            hit = _private_attribute(n)
            if hit is not None and _is_self(hit[0]):
                in_classes.add(id(n))
                if hit[1] in textuals:
                    found.append(f"{n.lineno}: {qualname}: {ast.unparse(n)}")
    textual_names, others = all_textual_private_members(), _other_modules(tree)
    for n in ast.walk(tree):
        hit = _private_attribute(n)
        if hit is None or id(n) in in_classes or _is_self(hit[0]) or hit[1] not in textual_names or hit[1] in own:
            continue
        root = hit[0]
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in others):
            found.append(f"{n.lineno}: {ast.unparse(n)}")
    return sorted(set(found), key=lambda hit: int(hit.split(":")[0]))


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


#: Private members of Textual reached through instances: each sample must be caught.
CAUGHT_MEMBERS = {
    "an app's driver": "from textual.app import App\nclass A(App):\n    def f(self):\n        return self._driver",
    "any app's driver": "def f(app):\n    return app._driver",
    "an exit flag": "from textual.app import App\nclass A(App):\n    def f(self):\n        return self._exit",
    "forwarding an event": "def f(widget, event):\n    widget._forward_event(event)",
    "a driver's writer": ("from textual.drivers.linux_driver import LinuxDriver\nclass D(LinuxDriver):\n"
                          "    def f(self):\n        return self._writer_thread._queue"),
    "a driver's loop, clobbered": ("from textual.drivers.linux_driver import LinuxDriver\nclass D(LinuxDriver):\n"
                                   "    def __init__(self, app):\n        super().__init__(app)\n"
                                   "        self._loop = None"),
    "a widget's removal flag": "from textual.widget import Widget\nclass V(Widget):\n    _pruning: bool = False",
    "a private method, through super()": ("from textual.widgets import DataTable\nclass T(DataTable):\n"
                                          "    def f(self):\n        return super()._clear_caches()"),
    "through getattr": "def f(app):\n    return getattr(app, '_driver', None)",
    "in a widget's mixin": ("from textual.widget import Widget\nclass Busy:\n    def f(self):\n"
                            "        self._pruning = True\nclass V(Busy, Widget):\n    pass"),
}
#: The console's own private names, and private names of anything but Textual: none is caught.
CLEAN_MEMBERS = (
    "from textual.widget import Widget\nclass V(Widget):\n    def f(self):\n        self._busy = True",
    "import os\ndef f():\n    os._exit(0)",
    "class Plain:\n    def __init__(self):\n        self._driver = 1\n    def f(self, other):\n"
    "        return self._driver, other._driver",
    "from textual.app import App\nclass A(App):\n    def f(self, view):\n        return view._busy, self.return_code",
)


def _run(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<sample>", "exec"), namespace)  # noqa: S102 - the samples above, written here
    return namespace


@pytest.mark.parametrize("source", CAUGHT_MEMBERS.values(), ids=CAUGHT_MEMBERS.keys())
def test_the_member_scan_catches(source: str) -> None:
    assert private_member_uses(source, _run(source), console_private_names(source))


@pytest.mark.parametrize("source", CLEAN_MEMBERS)
def test_the_member_scan_leaves(source: str) -> None:
    assert private_member_uses(source, _run(source), console_private_names(source)) == []


def test_textuals_private_members_are_read_from_its_source() -> None:
    """The inventory sees members assigned in ``__init__`` as well as methods (what the scan's
    samples need, named here from Textual 8's source)."""
    from textual.app import App
    from textual.drivers.linux_driver import LinuxDriver
    from textual.widget import Widget

    assert {"_driver", "_exit", "_closing"} <= textual_members_of(type("A", (App,), {}))
    assert {"_file", "_writer_thread", "_loop", "_app"} <= textual_members_of(type("D", (LinuxDriver,), {}))
    assert {"_pruning", "_forward_event"} <= textual_members_of(type("V", (Widget,), {}))
    assert "_busy" not in all_textual_private_members()


@pytest.mark.parametrize("source", CAUGHT.values(), ids=CAUGHT.keys())
def test_the_scan_catches(source: str) -> None:
    assert private_textual_names(source)


@pytest.mark.parametrize("source", CLEAN)
def test_the_scan_leaves(source: str) -> None:
    assert private_textual_names(source) == []


#: Two classes overriding private members of Textual's, as text: the tests' own source must not
#: hold one (tests/architecture/test_textual_private_outside.py scans it).
OVERRIDES = """
from textual.widgets import Checkbox, DataTable

class Drawn(DataTable):
    def _render_line(self, *args: object) -> None: ...

    def render_line(self, y: int) -> None: ...

class Ticked(Checkbox):
    @property
    def _button(self) -> None: ...
"""


def test_an_override_of_a_private_member_is_caught() -> None:
    from textual.widgets import DataTable

    classes = _run(OVERRIDES)
    Drawn, Ticked = classes["Drawn"], classes["Ticked"]  # noqa: N806 - the classes, by their names
    assert private_overrides(Drawn) == [
        "Drawn._render_line overrides textual.widgets._data_table.DataTable._render_line"]
    assert len(private_overrides(Ticked)) == 1
    assert private_overrides(type("Plain", (DataTable,), {"own": 1})) == []


def test_no_module_but_one_reaches_into_textuals_private_api() -> None:
    assert ALLOWED.is_file()
    sources = {path: path.read_text(encoding="utf-8") for path in _modules()}
    own = set().union(*(console_private_names(source) for source in sources.values()))
    found = []
    for path, source in sources.items():
        rel = path.relative_to(PACKAGE.parent)
        found += [f"{rel}:{hit}" for hit in private_textual_names(source)]
        if path.relative_to(PACKAGE).parts[0] != "tui":
            continue  # only the console imports Textual (the import-linter contracts in pyproject.toml)
        module = importlib.import_module(_module_name(path))
        found += [f"{rel}:{hit}" for hit in private_member_uses(source, vars(module), own)]
        for _name, cls in vars(module).items():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                found += [f"{rel}: {hit}" for hit in private_overrides(cls)]
    assert not found, "Textual's private API outside tui/widgets/textual_private.py:\n" + "\n".join(found)


def test_the_allowed_module_is_where_the_private_api_is_used() -> None:
    """The allowance is not dead: the module it names does use the private API (else drop it)."""
    source = ALLOWED.read_text(encoding="utf-8")
    module = importlib.import_module(_module_name(ALLOWED))
    assert private_textual_names(source) or private_member_uses(source, vars(module), set())
