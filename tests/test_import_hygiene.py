"""The core never imports a UI toolkit; startup paths never import heavy libraries."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import fvconsole.core

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
    assert "fvconsole.core.streaming" in modules
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
