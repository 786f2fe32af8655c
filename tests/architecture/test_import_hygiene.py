"""The import direction holds; the core never imports a UI toolkit; startup imports nothing heavy.

The direction is declared once, as import-linter contracts in pyproject.toml (CI runs
``lint-imports``). :func:`broken_contracts` checks the same contracts from the source's
syntax trees, so ``pytest`` fails on a wrong import too, where import-linter is not installed.
"""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import fvconsole.core

REPO = Path(__file__).resolve().parents[2]

HEAVY = ("torch", "textual", "pyarrow", "rich")


def _core_modules() -> list[str]:
    return [
        m.name for m in pkgutil.walk_packages(fvconsole.core.__path__, prefix="fvconsole.core.")
    ]


def _imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    import json

    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_core_imports_no_ui_or_heavy_library() -> None:
    modules = _core_modules()
    assert "fvconsole.core.formats.streaming" in modules
    imports = "\n".join(f"import {m}" for m in modules)
    loaded = _imported_after(imports)
    for heavy in HEAVY:
        assert heavy not in loaded, f"importing fvconsole.core pulls in {heavy}"


def test_help_does_not_import_heavy_libraries() -> None:
    loaded = _imported_after(
        "import contextlib, io\n"
        "from fvconsole.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])"
    )
    for heavy in ("torch", "textual", "pyarrow"):
        assert heavy not in loaded, f"`fvconsole --help` imports {heavy}"


# --------------------------------------------------------------------------- import direction


def module_imports(root: Path, package: str = "fvconsole") -> dict[str, set[str]]:
    """Every module under ``root/package`` → the modules it imports anywhere in its body.

    Imports inside functions and ``TYPE_CHECKING`` blocks count (import-linter counts them
    too). ``from a import b`` means module ``a.b`` where that is a module, else ``a``.
    """
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    modules = set(files)
    out: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    found.add(child if child in modules else base)
        out[name] = found
    return out


def _under(module: str, packages: Iterable[str]) -> str | None:
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def broken_contracts(imports: Mapping[str, set[str]], contracts: Iterable[Mapping]) -> list[str]:
    """import-linter's "forbidden" contracts: no chain of imports from a source to a forbidden module."""
    broken = []
    for contract in contracts:
        assert contract["type"] == "forbidden", contract
        sources, forbidden = contract["source_modules"], contract["forbidden_modules"]
        for start in sorted(m for m in imports if _under(m, sources)):
            seen, stack, parent = {start}, [start], {start: ""}
            while stack:
                current = stack.pop()
                for target in sorted(imports.get(current, ())):
                    hit = _under(target, forbidden)
                    if hit:
                        chain = [target, current]
                        while parent[chain[-1]]:
                            chain.append(parent[chain[-1]])
                        broken.append(f"{contract['name']}: {' -> '.join(reversed(chain))}")
                    elif target in imports and target not in seen:
                        seen.add(target)
                        parent[target] = current
                        stack.append(target)
    return broken


def _contracts() -> list[dict]:
    tomllib = pytest.importorskip("tomllib")
    with open(REPO / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["tool"]["importlinter"]["contracts"]


def test_import_direction_contracts_hold() -> None:
    contracts = _contracts()
    names = {c["name"] for c in contracts}
    assert {"the core imports no front end, no demo code and no UI toolkit", "the console does not import the CLI"} <= names
    assert broken_contracts(module_imports(REPO), contracts) == []


def test_the_check_finds_direct_and_indirect_violations(tmp_path: Path) -> None:
    """The checker itself: a wrong import directly, through another module, inside a function."""
    pkg = tmp_path / "fvconsole"
    for rel, text in {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "def f():\n    from fvconsole.core import b\n",
        "core/b.py": "from ..cli import main\n",
        "core/c.py": "import rich.text\n",
        "cli/__init__.py": "main = 1\n",
        "tui/__init__.py": "",
        "tui/view.py": "from fvconsole.core import a\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    broken = broken_contracts(module_imports(tmp_path), _contracts())
    assert "the core imports no front end, no demo code and no UI toolkit: fvconsole.core.b -> fvconsole.cli" in broken
    assert ("the core imports no front end, no demo code and no UI toolkit: "
            "fvconsole.core.a -> fvconsole.core.b -> fvconsole.cli") in broken
    assert "the core imports no front end, no demo code and no UI toolkit: fvconsole.core.c -> rich.text" in broken
    assert ("the console does not import the CLI: fvconsole.tui.view -> fvconsole.core.a -> fvconsole.core.b "
            "-> fvconsole.cli") in broken


def lint_imports() -> str | None:
    """The ``lint-imports`` of the interpreter running the tests: its environment's scripts dir, whether or not
    that venv is activated (``.venv/bin/python -m pytest`` leaves it off PATH), else one on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "lint-imports"
    return str(beside) if beside.is_file() else shutil.which("lint-imports")


IMPORT_LINTER = importlib.util.find_spec("importlinter") is not None


def test_lint_imports_is_found_whether_or_not_the_venv_is_on_path(monkeypatch) -> None:
    """It skipped wherever the venv was not activated: the check asked PATH, not the interpreter's venv."""
    if not IMPORT_LINTER:
        pytest.skip("import-linter is not installed in this interpreter (pip install -e '.[test]')")
    monkeypatch.setenv("PATH", "/nonexistent")
    found = lint_imports()
    assert found is not None and Path(found).parent == Path(sysconfig.get_path("scripts"))


@pytest.mark.skipif(not IMPORT_LINTER, reason="import-linter is not installed in this interpreter (pip install -e '.[test]')")
def test_lint_imports_agrees() -> None:
    """import-linter itself (what CI runs) keeps every contract."""
    command = lint_imports()
    assert command is not None, "import-linter is installed but its lint-imports script is in no scripts dir"
    result = subprocess.run([command, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
