#!/usr/bin/env python3
"""The lean install at work: run by the python of a venv holding only the built wheel, no extras.

    LEAN_PYTHON .ci/wheel_smoke.py DEMO_OUTPUT

DEMO_OUTPUT is what `fvconsole demo DIR --no-tui` printed in the full venv (the workspace it
built there: real DCP checkpoints, Parquet, safetensors). This venv must not hold torch,
safetensors, numpy or pyarrow, yet every printed command must work here exactly as there:
`checkpoints ls/show`, the `migrate` dry run and `--yes`, `sidecars verify`, `cache ls`, the
`cache evict` dry run, then `history`, and the console under a pseudo-terminal (first screen,
`q`; a migration preview in it, headless, shows "-" as each next id and one note under the
table naming the extra, "pip install 'fvconsole[parquet]'"). `--version` must print the installed version; the demo and `verify --deep` must refuse
in one line naming the extra to install. Standard library only, and `tests/lean_checks.py`
(what the lean install must hold and show, shared with `tests/architecture/test_lean_install.py`; standard
library and fvconsole only): it checks the venv, so it must not need anything of its own.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path[:0] = [HERE, TESTS]
from demo_smoke import EXPECTED_EXIT, FLEET_STEPS, STEPS, printed_commands, step_kinds  # noqa: E402 - the same parsing and steps as the full venv's
from lean_checks import HEAVY, PARQUET_HINT, importable  # noqa: E402 - stdlib and fvconsole only, as tests use it


def _fail(message: str) -> int:
    print(f"wheel_smoke: {message}")
    return 1


def check_installed() -> list[str]:
    """Problems with what this venv holds: a heavy package, or fvconsole not from the wheel."""
    problems = [f"{name} is installed in the lean venv ({sys.prefix})" for name in importable(HEAVY)]
    spec = importlib.util.find_spec("fvconsole")
    origin = os.path.realpath(spec.origin) if spec and spec.origin else ""
    if not origin.startswith(os.path.realpath(sys.prefix) + os.sep):
        problems.append(f"fvconsole is imported from {origin or '?'}, not from the venv's site-packages")
    direct = json.loads(importlib.metadata.distribution("fvconsole").read_text("direct_url.json") or "{}")
    if direct.get("dir_info", {}).get("editable") or not direct.get("url", "").endswith(".whl"):
        problems.append(f"fvconsole is not installed from the built wheel: {direct}")
    return problems


#: The console, driven headless (Textual's run_test) in this venv: preview checkpoint-300's
#: migration and report the "next id" cells, which need pyarrow (the `parquet` extra), then the note under the table.
_NEXT_IDS = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from lean_checks import console_next_ids
print(json.dumps(asyncio.run(console_next_ids(*sys.argv[2:5]))))
"""


def console_next_ids(console: str, env: dict[str, str]) -> list[str] | str:
    """The "next id" cells of the console's migration preview, or what went wrong."""
    argv = shlex.split(console, comments=True)
    paths = [argv[argv.index(flag) + 1] for flag in ("--config", "--checkpoints", "--cache-root")]
    proc = subprocess.run([sys.executable, "-c", _NEXT_IDS, TESTS, *paths], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        return proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=300)


def main() -> int:
    started = time.monotonic()
    with open(sys.argv[1], encoding="utf-8") as fh:
        output = fh.read()
    problems = check_installed()
    for problem in problems:
        print(f"wheel_smoke: {problem}")
    # The venv's own entry point first on PATH: the printed `fvconsole ...` commands run the wheel.
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    env.setdefault("FVCONSOLE_JOURNAL", os.path.join(tempfile.mkdtemp(prefix="fvconsole-lean-"), "journal.jsonl"))
    failed = len(problems)

    version = run("fvconsole --version", env)
    wanted = f"fvconsole {importlib.metadata.version('fvconsole')}"
    ok = version.returncode == 0 and version.stdout.strip() == wanted
    print(f"wheel_smoke: --version: {version.stdout.strip()!r} (installed: {wanted!r}): {'ok' if ok else 'FAILED'}")
    failed += not ok

    commands = printed_commands(output)
    argvs = [shlex.split(c, comments=True) for c in commands]
    kinds = step_kinds(argvs)
    if kinds != [name for name, _ in STEPS]:
        return _fail(f"the demo printed these steps: {kinds}; expected {[n for n, _ in STEPS]}")
    verify = next(c for c, k in zip(commands, kinds, strict=True) if k == "sidecars verify")
    console = commands[kinds.index("console")]
    # Before `migrate --yes` writes the set (a preview of an existing set without overwrite refuses).
    cells = console_next_ids(console, env)
    ok = isinstance(cells, list) and len(cells) == 9 and set(cells[:8]) == {"-"} and PARQUET_HINT in cells[8]
    print(f"wheel_smoke: console migration preview, next id column: {cells!r:.2000}: "
          f"{'ok' if ok else 'FAILED'}")
    failed += not ok
    for command, kind in zip(commands, kinds, strict=True):
        if kind.startswith("console") or kind in FLEET_STEPS:
            continue  # the console last, after history; the stand-in fleet is the full install's (demo_smoke.py)
        proc = run(command, env)
        expected = EXPECTED_EXIT.get(kind, 0)
        if proc.returncode != expected:
            print(proc.stdout[-3000:] + proc.stderr[-3000:])
        print(f"wheel_smoke: {kind}: exit {proc.returncode}" + (f" (expected {expected})" if expected else ""))
        failed += proc.returncode != expected

    history = run("fvconsole history", env)
    ok = history.returncode == 0 and "migrate" in history.stdout
    if not ok:
        print(history.stdout[-3000:] + history.stderr[-3000:])
    print(f"wheel_smoke: history (the migration journaled): exit {history.returncode}: {'ok' if ok else 'FAILED'}")
    failed += not ok

    # What needs an extra refuses in one line naming it, and writes nothing.
    target = os.path.join(tempfile.mkdtemp(prefix="fvconsole-lean-"), "demo")
    refusals = [
        ("demo", f"fvconsole demo {shlex.quote(target)} --no-tui", "pip install 'fvconsole[demo]'"),
        ("sidecars verify --deep", verify + " --deep", "pip install 'fvconsole[parquet]'"),
    ]
    for kind, command, hint in refusals:
        proc = run(command, env)
        lines = proc.stderr.strip().splitlines()
        ok = proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") and hint in lines[0]
        ok = ok and "Traceback" not in proc.stdout + proc.stderr
        print(f"wheel_smoke: {kind} without its extra: exit {proc.returncode}, {lines!r}: {'ok' if ok else 'FAILED'}")
        failed += not ok
    if os.path.exists(target):
        failed += _fail(f"the refused demo made {target}")

    cmd = [sys.executable, os.path.join(HERE, "pty_console.py"), "--expect", "checkpoints,", "--expect", "Quit",
           "--timeout", "120", "--", "bash", "-c", console]
    code = subprocess.run(cmd, env=env).returncode
    print(f"wheel_smoke: console: exit {code}")
    failed += code != 0

    print(f"wheel_smoke: {'FAILED' if failed else 'ok'}: {failed} problem(s), the lean venv holds none of "
          f"{', '.join(HEAVY)}: {not problems}, in {time.monotonic() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
