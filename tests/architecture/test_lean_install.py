"""The lean install (issue 23): without torch, safetensors, numpy and pyarrow the tool works.

The base install holds none of the extras' packages, so every headless command and the
console must run without them, and what does need one (the demo, ``verify --deep``,
``--torch-check``) must refuse in one line naming the extra. Here the packages are made
unimportable in a fresh interpreter (``sys.modules[name] = None``: ``import`` raises
ModuleNotFoundError exactly as when the package is absent); CI also installs the built wheel
without extras into a brand-new venv and runs the demo's commands there (`.ci/wheel_smoke.py`).

The door: only ``fvconsole/core/shared/optional.py`` imports an extra's package; every other module
asks it (``require``/``optional``, or ``fvconsole.demo.demo_module``), inside a function
outside ``fvconsole/demo/`` (``tests/architecture/test_doors.py``, the optional-imports row).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from lean_checks import HEAVY, PARQUET_HINT, importable, preview_next_ids, table_note

from fvconsole.core.shared.optional import EXTRAS

#: The top-level import names that only an extra provides: imported through core/shared/optional.py only.
EXTRA_PACKAGES = frozenset(name for names in EXTRAS.values() for name in names)

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = REPO / "fvconsole"
DOOR = PACKAGE / "core" / "shared" / "optional.py"


# ----------------------------------------------------------------------------- the door
# The scan that no module goes around core/shared/optional.py is tests/architecture/test_doors.py's optional-imports row.

def test_the_lean_check_sees_the_extras_packages_installed_here() -> None:
    """Guard wheel_smoke's check: in this venv (the extras installed) it finds all four, even
    where a test made them unimportable, and nothing for a name no package has."""
    assert importable(HEAVY) == list(HEAVY)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "numpy", None)
        assert importable(("numpy",)) == ["numpy"]
    assert importable(("fvconsole_no_such_package",)) == []


def test_the_door_is_the_only_importer_of_an_extras_package_in_the_core_too() -> None:
    """The door's own module really is where the import happens (importlib, not a literal import)."""
    text = DOOR.read_text(encoding="utf-8")
    assert "importlib.import_module(module)" in text
    assert set(HEAVY) <= EXTRA_PACKAGES and set(EXTRAS["demo"]) == set(HEAVY)


# ----------------------------------------------------------------------------- without the extras
_BLOCKED = """
import contextlib, io, json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None  # `import name` now raises ModuleNotFoundError, as when it is absent
from fvconsole.cli import main
results = []
for args in json.loads(sys.argv[2]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
loaded = [m for m in json.loads(sys.argv[1]) if sys.modules.get(m) is not None]
print(json.dumps({"results": results, "loaded": loaded}))
"""


def run_without(blocked: tuple[str, ...], *commands: list[str], env: dict[str, str] | None = None) -> list[dict]:
    """Run ``fvconsole`` commands in order in one fresh interpreter where ``blocked`` cannot be imported."""
    proc = subprocess.run([sys.executable, "-c", _BLOCKED, json.dumps(list(blocked)), json.dumps(list(commands))],
                          capture_output=True, text=True, timeout=600, cwd=REPO / "tests",
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["loaded"] == [], f"{out['loaded']} got imported although blocked"
    return out["results"]


def one_error_line(result: dict) -> str:
    lines = result["stderr"].strip().splitlines()
    assert result["code"] == 1 and len(lines) == 1 and lines[0].startswith("error: "), result
    assert "Traceback" not in result["stderr"] + result["stdout"]
    return lines[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    """A real legacy run (DCP checkpoint, Parquet) and a real safetensors cache, built with the extras."""
    from fvconsole.demo.builders import build_run
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path_factory.mktemp("lean")
    built = build_run(root / "run", steps=(2,), kind="legacy", num_gpus=4)
    cache = root / "cache"
    write_cache_entry(cache, num_shards=2, seed=1)
    victim = write_cache_entry(cache, num_shards=2, status="partial", seed=2)
    return {"run": built, "cache": str(cache), "victim": os.path.basename(victim), "root": root}


def _migrate(run: dict, out: str, *extra: str) -> list[str]:
    r = run["run"]
    return ["migrate", "--config", r.config_path, "--checkpoint", r.checkpoints[0], "--output-dir", out,
            "--expected-step", "2", "--expected-world-size", "4", "--consumed-batches-per-rank", "2", *extra]


def _verify(run: dict, out: str, *extra: str) -> list[str]:
    r = run["run"]
    return ["sidecars", "verify", "--config", r.config_path, "--checkpoint", r.checkpoints[0], "--sidecar-dir", out,
            *extra]


def test_every_headless_command_works_without_any_extra(run: dict, tmp_path) -> None:
    r, cache = run["run"], run["cache"]
    out = str(tmp_path / "sidecars")
    journal = str(tmp_path / "journal.jsonl")
    commands = [
        ["--version"],
        ["checkpoints", "ls", r.output_dir],
        ["checkpoints", "show", r.checkpoints[0], "--config", r.config_path],
        ["checkpoints", "show", r.checkpoints[0], "--json"],
        _migrate(run, out),
        _migrate(run, out, "--yes", "--json"),
        _verify(run, out),
        _verify(run, out, "--json"),
        ["cache", "ls", cache],
        ["cache", "ls", cache, "--json"],
        ["cache", "evict", cache, "--key", run["victim"]],
        ["cache", "evict", cache, "--key", run["victim"], "--yes"],
        ["history"],
        ["history", "--json"],
        ["--print-completion", "bash"],
        ["fleet", "cache", "ls", "--help"],
        # after the migration above: a legacy checkpoint resumed with its published set, every rank
        # judged (sidecars, RNG files, the manifest) without torch, numpy or pyarrow
        ["preflight", "--config", r.config_path, "--resume", r.checkpoints[0], "--dataloader-state-dir", out],
    ]
    results = run_without(HEAVY, *commands, env={"FVCONSOLE_JOURNAL": journal})
    for args, result in zip(commands, results, strict=True):
        assert result["code"] == 0, (args[:3], result["stderr"][-1000:])
        assert result["stdout"].strip(), args[:3]
    # They did their work: a verified set of four sidecars, an evicted entry, both journaled.
    assert json.loads(results[7]["stdout"])["ok"] is True
    assert len(os.listdir(out)) == 5
    assert not os.path.exists(os.path.join(cache, run["victim"]))
    actions = [rec["action"] for rec in json.loads(results[13]["stdout"])["records"]]
    assert len(actions) == 2 and any("migrat" in a for a in actions) and any("evict" in a for a in actions)


@pytest.mark.parametrize(("missing", "named"), [("torch", "torch"), ("safetensors", "safetensors"),
                                                ("numpy", "numpy"), ("pyarrow", "pyarrow")])
def test_the_demo_without_its_extra_refuses_in_one_line_and_builds_nothing(tmp_path, missing, named) -> None:
    target = tmp_path / "ws"
    result = run_without((missing,), ["demo", str(target), "--no-tui"])[0]
    assert one_error_line(result) == f"error: the demo needs {named}: pip install 'fvconsole[demo]'"
    assert not target.exists()


def test_the_demo_names_every_missing_package_at_once(tmp_path) -> None:
    """As in a lean install: none of the four, and the refusal names them all, in one line."""
    result = run_without(HEAVY, ["demo", str(tmp_path / "ws"), "--no-tui"])[0]
    assert one_error_line(result) == \
        "error: the demo needs torch, safetensors, numpy, pyarrow: pip install 'fvconsole[demo]'"
    assert not (tmp_path / "ws").exists()


def test_deep_verify_without_pyarrow_names_the_parquet_extra(run: dict, tmp_path) -> None:
    out = str(tmp_path / "sidecars")
    wrote, text, as_json, plain = run_without(("pyarrow",), _migrate(run, out, "--yes"), _verify(run, out, "--deep"),
                                              _verify(run, out, "--deep", "--json"), _verify(run, out))
    assert wrote["code"] == 0 and plain["code"] == 0
    assert one_error_line(text) == ("error: --deep (each rank's next sample id) needs pyarrow: "
                                    "pip install 'fvconsole[parquet]'")
    assert as_json["code"] == 1
    assert json.loads(as_json["stdout"])["error"] == \
        "--deep (each rank's next sample id) needs pyarrow: pip install 'fvconsole[parquet]'"


def test_columns_that_differ_without_pyarrow_are_a_warning_naming_the_parquet_extra(run: dict, tmp_path) -> None:
    """Another projection than the manifest's needs the footers read: without pyarrow the preview says it
    could not tell, and still plans (the columns matching, the lean install reads no footer at all)."""
    out = str(tmp_path / "sidecars")
    other = ("--set", "training.data.preprocessed_data_type=text_only")
    text, as_json = run_without(("pyarrow",), _migrate(run, out, *other), _migrate(run, out, *other, "--json"))
    assert text["code"] == 0 and "Traceback" not in text["stdout"] + text["stderr"]
    # Said once: the warning (stderr), and the columns line points at it.
    sentence = "whether every Parquet file has them was not checked (reading Parquet footers needs pyarrow: " \
               "pip install 'fvconsole[parquet]')"
    assert (text["stdout"] + text["stderr"]).count(sentence) == 1 and sentence in text["stderr"]
    assert "columns:    not checked (see the warning)" in text["stdout"]
    assert json.loads(as_json["stdout"])["plan"]["columns"]["verdict"] == "not-checked"


def test_torch_check_without_torch_names_the_torch_extra_and_writes_nothing(run: dict, tmp_path) -> None:
    out = tmp_path / "sidecars"
    written = str(tmp_path / "written")
    check, verify, dry = run_without(("torch",), _migrate(run, str(out), "--yes", "--torch-check"),
                                     _verify(run, written, "--torch-check"), _migrate(run, str(out), "--torch-check"))
    hint = "checking sidecars with torch.load needs torch: pip install 'fvconsole[torch]'"
    assert one_error_line(check) == f"error: {hint}"
    assert not out.exists() and not any(p.name.startswith(".sidecars") for p in tmp_path.iterdir())
    assert one_error_line(verify) == f"error: {hint}"
    assert dry["code"] == 0  # a dry run loads nothing


# ----------------------------------------------------------------------------- the console without pyarrow
@pytest.mark.tui
async def test_console_shows_the_parquet_extra_in_the_next_id_column(demo_ws, monkeypatch) -> None:
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.migration.view import MigrationView
    from fvconsole.tui.state import ConsoleState

    ws = demo_ws
    for name in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, name, None)
    app = FvConsoleApp(ConsoleState(config_path=ws.config_path, checkpoints_path=ws.output_dir,
                                    cache_root=ws.cache_root))
    async with app.run_test(size=(140, 42)) as pilot:
        cells = await preview_next_ids(app, pilot, "checkpoint-300")
        view = app.query_one(MigrationView)
        ranks = app.query_one("#mig-ranks")
        assert ranks.row_count == 8 == len(cells), "the preview itself needs no pyarrow"
        assert cells == ["-"] * 8, "no id, and no hint repeated in every cell"
        assert table_note(app) == "ⓘ reading next sample ids needs pyarrow: pip install 'fvconsole[parquet]'"
        assert PARQUET_HINT in table_note(app)
        drawn = app.export_screenshot().replace("&#160;", " ")
        assert drawn.count("fvconsole[parquet]") == 1, "one note under the table, drawn whole"
        assert view.next_ids_note == "reading next sample ids needs pyarrow: pip install 'fvconsole[parquet]'"
        assert not app.query_one("#mig-execute").disabled, "the migration can still be written"
