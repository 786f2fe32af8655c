"""The suite's timeline (tests/suite_timeline.py): each test's line, and the summary's sums."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from suite_timeline import ENV, record, summary


def run(gen, work=None) -> None:
    """Drive ``record`` as pytest drives a hookwrapper: up to its yield, the test, then the rest."""
    next(gen)
    if work:
        work()
    for _ in gen:
        raise AssertionError("record yields once")


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    run(record("tests/test_x.py::test_a", "tests/test_x.py::test_a"))
    assert list(tmp_path.iterdir()) == []


def test_a_line_per_test_with_its_wall_and_the_cpu_of_the_children_it_reaped(tmp_path, monkeypatch) -> None:
    out = tmp_path / "timeline.jsonl"
    monkeypatch.setenv(ENV, str(out))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    spin = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    run(record("tests/test_x.py::test_a@serial", "serial"),
        lambda: (time.sleep(0.2), subprocess.run([sys.executable, "-c", spin], check=True)))
    run(record("tests/test_x.py::test_b", "tests/test_x.py::test_b"))
    first, second = (json.loads(line) for line in out.read_text().splitlines())
    assert first["id"] == "tests/test_x.py::test_a@serial" and first["group"] == "serial"
    assert first["worker"] == "gw7" and second["worker"] == "gw7"
    assert first["end"] - first["start"] >= 0.5  # slept 0.2 s, then a child spun 0.3 s of CPU
    assert first["cpu"] >= 0.3  # the child's CPU counts: it was reaped inside the test
    assert second["start"] >= first["end"]


def line(test: str, group: str, worker: str, start: float, end: float, cpu: float) -> dict:
    return {"id": test, "group": group, "worker": worker, "start": start, "end": end, "cpu": cpu}


def test_summary_sums_per_worker_and_group() -> None:
    lines = [
        line("a@serial", "serial", "gw0", 100.0, 110.0, 2.0),  # waited 8 s
        line("b@serial", "serial", "gw0", 112.0, 115.0, 3.0),  # gw0 idle 2 s between a and b
        line("c", "c", "gw1", 100.0, 104.0, 4.0),
        line("d@f.py", "f.py", "gw1", 104.0, 106.0, 1.5),
    ]
    text = summary(lines)
    assert "4 tests, span 15.0 s" in text and "CPU in tests 10.5 s" in text
    assert "gw0: 2 tests,   0.0- 15.0 s, busy 13.0 s, CPU 5.0 s, idle between tests 2.0 s" in text
    assert "gw1: 2 tests,   0.0-  6.0 s, busy 6.0 s, CPU 5.5 s, idle between tests 0.0 s" in text
    groups = text.split("groups (CPU s, wall s, tests):\n")[1].split("\nwaited most")[0].splitlines()
    assert [g.split() for g in groups] == [["5.0", "13.0", "2", "serial"], ["4.0", "4.0", "1", "(single", "tests)"],
                                           ["1.5", "2.0", "1", "f.py"]]
    waited = text.split("waited most (wall - CPU s, wall s):\n")[1].splitlines()[0]
    assert waited.split() == ["8.0", "10.0", "a@serial"]


def test_the_command_line_prints_the_summary_of_a_file(tmp_path: Path) -> None:
    out = tmp_path / "timeline.jsonl"
    out.write_text(json.dumps(line("a", "a", "gw0", 0.0, 2.0, 1.0)) + "\n\n")
    script = Path(__file__).resolve().parents[1] / "suite_timeline.py"
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("1 tests, span 2.0 s")
