"""The retention recipe of docs/operations.md, run as documented with this test's values of its variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from docs_examples import doc_example, with_settings
from retention_runs import DAY, make_checkpoint


def test_the_retention_script_runs_as_documented(tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    out.mkdir()
    for step in (500, 1000, 1500, 2000, 2500, 3000):
        make_checkpoint(out, step, age=(3500 - step) / 100 * DAY)
    make_checkpoint(out, 3500, complete=False, age=30)  # the save a killed job left behind
    wrapper = tmp_path / "fvconsole"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m fvconsole "$@"\n')
    wrapper.chmod(0o755)
    log = tmp_path / "retention.log"
    script = with_settings(doc_example("retention"), FVCONSOLE=str(wrapper), OUTPUT_DIR=str(out), LOG=str(log))
    env = {**os.environ, "FVCONSOLE_JOURNAL": str(tmp_path / "journal.jsonl")}
    run = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stderr == "", run
    # The 3 newest complete (3000, 2500, 2000) and every 1000th (1000) stay; 3500 (interrupted) goes.
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-1000", "checkpoint-2000", "checkpoint-2500",
                                                     "checkpoint-3000"]
    assert "pruned 3 checkpoints from" in log.read_text()
