"""Reliability suite fixtures, and the recorder that feeds the reliability table of docs/reliability.md.

Each test carries ``@pytest.mark.fault(category, description)`` and may count trials
and outcomes through the ``trials`` fixture. When ``FVCONSOLE_RELIABILITY_REPORT`` names a
file, one JSON line per test (category, fault, outcome, trials, outcome counts) is
appended to it; ``scripts/reliability_report.py`` renders the table from those lines.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .harness import can_drop_privileges
from .workspace import MigrationWorkspace

REPORT_ENV = "FVCONSOLE_RELIABILITY_REPORT"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fault(category, description): reliability fault scenario (rendered in the docs/reliability.md table)"
    )


@dataclass
class Trials:
    """How many times a fault was injected and what each time led to."""

    count: int = 0
    outcomes: collections.Counter = field(default_factory=collections.Counter)

    def add(self, outcome: str = "ok", n: int = 1) -> None:
        self.count += n
        self.outcomes[outcome] += n


@pytest.fixture
def trials() -> Trials:
    return Trials()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    path = os.environ.get(REPORT_ENV)
    marker = item.get_closest_marker("fault")
    if not path or marker is None:
        return
    if report.when == "call" or (report.when == "setup" and report.skipped):
        status = report.outcome
        if hasattr(report, "wasxfail"):
            status = "xfailed" if report.skipped else "xpassed"
        rec = getattr(item, "funcargs", {}).get("trials")
        record = {
            "category": marker.args[0],
            "fault": marker.args[1],
            "test": item.nodeid,
            "outcome": status,
            "trials": rec.count if rec and rec.count else (1 if status == "passed" else 0),
            "outcomes": dict(rec.outcomes) if rec else {},
        }
        if report.skipped and isinstance(report.longrepr, tuple):
            record["reason"] = str(report.longrepr[2])
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")


#: Address-space cap while reliability tests run: a hostile input that makes the code under
#: test allocate without bound must fail as MemoryError in this process, not OOM the machine.
MEMORY_CAP_BYTES = 8 << 30


@pytest.fixture(scope="package", autouse=True)
def memory_cap() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = MEMORY_CAP_BYTES if hard == resource.RLIM_INFINITY else min(MEMORY_CAP_BYTES, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="session")
def good_set_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[MigrationWorkspace], Path]:
    """``good_set_of(ws)``: a sidecar set the real CLI wrote for that workspace (built on first
    use, then shared by every module of this worker): tests damage copies of it, never it."""
    from fvconsole.cli import main

    built: dict[Path, Path] = {}

    def get(ws: MigrationWorkspace) -> Path:
        if ws.root not in built:
            out = tmp_path_factory.mktemp("good-set") / "state"
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert main(ws.migrate_args(out)) == 0
            built[ws.root] = out
        return built[ws.root]

    return get


@pytest.fixture(scope="session")
def unprivileged_ok() -> None:
    """Skip unless a subprocess can be made to obey file modes (we usually run as root)."""
    reason = can_drop_privileges()
    if reason:
        pytest.skip(reason)
