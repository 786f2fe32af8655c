"""Everything fvconsole imports is declared: what a new user's `pip install` brings is enough.

A green suite in a venv that happens to hold an undeclared package (numpy, imported by
safetensors.torch, which does not declare it) hides a broken install. These tests check
the declarations themselves, so they fail even in such a venv; CI also runs them in a
brand-new one (`.ci/run`).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pathlib
import re
import subprocess
import sys

import pytest

tomllib = pytest.importorskip("tomllib")
packaging_requirements = pytest.importorskip("packaging.requirements")

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = REPO / "fvconsole"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], set[str]]:
    """(dependencies, dependencies of any extra) from pyproject.toml, normalised names."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    req = packaging_requirements.Requirement
    deps = {_norm(req(r).name) for r in project["dependencies"]}
    extras = {_norm(req(r).name) for rs in project.get("optional-dependencies", {}).values() for r in rs}
    return deps, extras


def door_import(node: ast.AST) -> bool:
    """A call ``require("pkg", ...)`` / ``demo_module("pkg")`` / ``optional("pkg")`` with a literal name."""
    return (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("require", "demo_module", "optional"))


def _closure(names: set[str]) -> set[str]:
    """``names`` and everything their installed metadata requires (no extras), transitively."""
    req = packaging_requirements.Requirement
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            r = req(text)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(_norm(r.name))
    return seen


def _distributions(top_level: str) -> set[str]:
    return {_norm(d) for d in importlib.metadata.packages_distributions().get(top_level, [])}


def test_every_direct_import_is_declared() -> None:
    """Each third-party package the source imports is a dependency (or an extra, for optional ones)."""
    deps, extras = _declared()
    imported: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif door_import(node):  # an extra's package, imported through core/shared/optional.py
                names = [node.args[0].value]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "fvconsole":
                    imported.setdefault(top, str(path.relative_to(REPO)))
    assert imported, "the walk found no third-party imports at all"
    # A package that is not installed here (an optional extra) is matched by its import name.
    undeclared = {top: where for top, where in imported.items()
                  if not (_distributions(top) or {_norm(top)}) & (deps | extras)}
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


_WORKLOAD = r"""
import importlib, json, os, pkgutil, sys, tempfile
before = set(sys.modules)
import fvconsole
failures = {}
for info in pkgutil.walk_packages(fvconsole.__path__, "fvconsole."):
    if info.name == "fvconsole.__main__":  # runs the CLI when imported
        continue
    try:
        importlib.import_module(info.name)
    except BaseException as exc:
        failures[info.name] = f"{type(exc).__name__}: {exc}"
# What a user does first: the demo (torch DCP, safetensors, Parquet), a migration, a deep verify.
from fvconsole.cli import main
d = tempfile.mkdtemp()
codes = [main(["demo", d + "/ws", "--no-tui"])]
ws = d + "/ws"
mig = ["--config", ws + "/run.yaml", "--checkpoint", ws + "/output/checkpoint-300"]
codes.append(main(["migrate", *mig, "--output-dir", d + "/side", "--expected-step", "300",
                   "--expected-world-size", "8", "--consumed-batches-per-rank", "600", "--yes"]))
codes.append(main(["sidecars", "verify", *mig, "--sidecar-dir", d + "/side", "--deep"]))
codes.append(main(["cache", "ls", ws + "/shard-cache"]))
try:
    main(["--print-completion", "bash"])
except SystemExit as exc:
    codes.append(exc.code)
loaded = sorted({m.split(".")[0] for m in set(sys.modules) - before})
with open(sys.argv[1], "w") as fh:
    json.dump({"failures": failures, "codes": codes, "modules": loaded}, fh)
"""


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Import every module, then run the demo's headless path, in a fresh interpreter."""
    out = tmp_path_factory.mktemp("imports") / "result.json"
    proc = subprocess.run([sys.executable, "-c", _WORKLOAD, str(out)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path_factory.getbasetemp())
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_module_of_the_package_imports(workload) -> None:
    assert workload["failures"] == {}
    names = set(workload["modules"])
    assert {"fvconsole", "textual", "torch", "pyarrow"} <= names  # the walk reached tui, core and demo


def test_the_demo_path_works_with_declared_packages_only(workload) -> None:
    """Every package loaded while the demo path runs comes from the declared dependency tree."""
    assert workload["codes"] == [0, 0, 0, 0, 0]
    deps, _ = _declared()
    # The demo and the deep verify need the `demo` and `parquet` extras; the `fast` extra
    # (orjson) is optional acceleration: imported when installed, never needed (CI's fresh venv
    # runs the demo path without it).
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    used = [r for name in ("demo", "parquet", "fast") for r in extras[name]]
    allowed = _closure(deps) | _closure({_norm(packaging_requirements.Requirement(r).name) for r in used})
    undeclared = {}
    for top in workload["modules"]:
        if top in sys.stdlib_module_names or top == "fvconsole" or top.startswith("_"):
            continue
        dists = _distributions(top)
        if dists and not dists & allowed:
            undeclared[top] = sorted(dists)
    assert undeclared == {}, f"loaded at run time but not in the declared dependency tree: {undeclared}"


# ----------------------------------------------------------------------------- the lean install (issue 23)
#: What `pip install fvconsole` (no extras) brings, and what each extra adds: the contract of the
#: README's "Set up" section, written here by hand (not read from pyproject.toml).
BASE = {"pyyaml", "textual", "rich", "shtab"}
HEAVY = {"torch", "safetensors", "numpy", "pyarrow"}
EXTRAS = {
    "demo": HEAVY,
    "parquet": {"pyarrow"},
    "torch": {"torch"},
    "fast": {"orjson"},
    "test": HEAVY | {"pytest", "pytest-timeout", "pytest-xdist", "pytest-textual-snapshot", "hypothesis", "ruff", "import-linter",
                     "vulture", "prometheus-client", "packaging", "radon"},
}


def _by_extra(requires: list[str], provided: list[str]) -> dict[str, set[str]]:
    """Requirement strings of a distribution's metadata -> {"" (base) or extra: {names}}."""
    req = packaging_requirements.Requirement
    out: dict[str, set[str]] = {name: set() for name in ["", *provided]}
    for text in requires:
        r = req(text)
        groups = [""] if r.marker is None else [e for e in provided if r.marker.evaluate({"extra": e})]
        assert groups, f"requirement {text!r} belongs to no extra"
        for group in groups:
            out[group].add(_norm(r.name))
    return out


@pytest.fixture(scope="module")
def built_metadata(tmp_path_factory: pytest.TempPathFactory) -> importlib.metadata.Distribution:
    """The metadata setuptools writes for this checkout's pyproject.toml (what a built wheel says)."""
    import shutil

    src = tmp_path_factory.mktemp("meta-src")
    out = tmp_path_factory.mktemp("meta-out")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(PACKAGE, src / "fvconsole", ignore=shutil.ignore_patterns("__pycache__"))
    code = "import sys; from setuptools import build_meta; print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return importlib.metadata.Distribution.at(out / proc.stdout.strip().splitlines()[-1])


def _check_metadata(dist: importlib.metadata.Distribution) -> None:
    provided = dist.metadata.get_all("Provides-Extra") or []
    groups = _by_extra(dist.requires or [], provided)
    assert groups.pop("") == BASE, "the base install is exactly what the tool imports on its own"
    assert groups == EXTRAS
    assert not HEAVY & BASE


def test_wheel_metadata_declares_the_base_and_each_extra_exactly(built_metadata) -> None:
    _check_metadata(built_metadata)


def _installed_from_this_checkout() -> importlib.metadata.Distribution | None:
    for dist in importlib.metadata.distributions(name="fvconsole"):
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
        if url.startswith("file://") and pathlib.Path(url[len("file://"):]).resolve() == REPO:
            return dist
    return None


def test_installed_metadata_declares_the_base_and_each_extra_exactly(built_metadata) -> None:
    """``importlib.metadata.requires("fvconsole")`` of a pip install of this checkout (CI's venv)."""
    dist = _installed_from_this_checkout()
    if dist is None:
        pytest.skip("this checkout is not pip-installed here; its built metadata is checked instead")
    editable = json.loads(dist.read_text("direct_url.json")).get("dir_info", {}).get("editable")
    if editable and sorted(dist.requires or []) != sorted(built_metadata.requires or []):
        pytest.skip("the editable install's metadata predates pyproject.toml: re-run `pip install -e .`")
    _check_metadata(dist)
    # What importlib.metadata.requires() reads (the first fvconsole on sys.path) says the same.
    assert sorted(importlib.metadata.requires("fvconsole") or []) == sorted(dist.requires or [])


def test_the_optional_import_door_knows_the_same_extras(built_metadata) -> None:
    from fvconsole.core.shared.optional import EXTRAS as DOOR

    groups = _by_extra(built_metadata.requires or [], built_metadata.metadata.get_all("Provides-Extra") or [])
    assert {extra: set(names) for extra, names in DOOR.items()} == {e: groups[e] for e in DOOR}


def test_version_is_the_installed_one(capsys) -> None:
    import fvconsole
    from fvconsole.cli import main

    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"] == fvconsole.__version__
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    try:
        wanted = importlib.metadata.version("fvconsole")
    except importlib.metadata.PackageNotFoundError:
        wanted = fvconsole.__version__
    assert capsys.readouterr().out == f"fvconsole {wanted}\n"
