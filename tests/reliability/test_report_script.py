"""scripts/reliability_report.py renders the docs/reliability.md table from the suite's JSON lines."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reliability_report.py"


def _module():
    spec = importlib.util.spec_from_file_location("reliability_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_render_aggregates_and_updates_markdown(tmp_path: Path) -> None:
    report = tmp_path / "r.jsonl"
    records = [
        {"category": "races", "fault": "f2", "test": "t3", "outcome": "passed", "trials": 3, "outcomes": {"ok": 3}},
        {"category": "crash: migrate", "fault": "f1", "test": "t1", "outcome": "passed", "trials": 2,
         "outcomes": {"nothing published": 1, "new set published": 1}},
        {"category": "crash: migrate", "fault": "f1", "test": "t2", "outcome": "failed", "trials": 1,
         "outcomes": {"nothing published": 1}},
    ]
    report.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    module = _module()
    table = module.render(module.load(report))
    lines = table.splitlines()
    assert lines[2].startswith("| crash: migrate | f1 | 2 | 3 | failed, passed |")
    assert "nothing published ×2" in lines[2]
    assert lines[3].startswith("| races | f2 | 1 | 3 | passed | ok ×3 |")
    assert "Total: 3 tests (1 failed, 2 passed), 6 fault trials." in table
    md = tmp_path / "section.md"
    md.write_text(f"intro\n{module.BEGIN}\nold\n{module.END}\noutro\n")
    assert module.main([str(report), "--update", str(md)]) == 0
    text = md.read_text()
    assert "old" not in text and "| races | f2 |" in text and text.startswith("intro\n") and text.endswith("outro\n")


def test_missing_markers_and_bad_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = _module()
    assert module.main([str(tmp_path / "missing.jsonl")]) == 1
    assert capsys.readouterr().err.startswith("error: ")
    report = tmp_path / "r.jsonl"
    report.write_text("")
    md = tmp_path / "m.md"
    md.write_text("no markers")
    with pytest.raises(SystemExit):
        module.main([str(report), "--update", str(md)])


def test_default_target_is_the_reliability_page_and_holds_one_table() -> None:
    """`--update` without a file rewrites docs/reliability.md, so its markers must be there, once."""
    module = _module()
    page = SCRIPT.parents[1] / "docs" / "reliability.md"
    assert page == module.DEFAULT_TARGET
    text = page.read_text(encoding="utf-8")
    assert text.count(module.BEGIN) == 1 and text.count(module.END) == 1
    table = text.split(module.BEGIN, 1)[1].split(module.END, 1)[0]
    assert table.startswith("\n| category | fault injected |") and "\nTotal: " in table
