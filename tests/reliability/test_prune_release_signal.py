"""Issue 35: a SIGTERM that arrives while `checkpoints prune --yes` releases its lock is not lost.

The defect: the prune released its lock in a deferred section that kept the signal and never
read it, so the prune exited 0 as if no one had asked it to stop. The signal here is real
(``os.kill`` of this process), sent from inside the lock file's release, the moment the
output dir's lock is being given up.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from retention_runs import DAY, make_checkpoint

from fvconsole.core.migration.output_dir import migration_lock
from fvconsole.core.shared import locks


def test_sigterm_while_a_prune_releases_its_lock_is_reported(tmp_path: Path, cli,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for step, days in ((100, 10), (200, 9), (300, 8)):
        make_checkpoint(out, step, age=days * DAY)
    journal = tmp_path / "journal.jsonl"
    real_release = locks.FileLock.release

    def release_with_sigterm(self: locks.FileLock):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the lock is being released
        return real_release(self)

    monkeypatch.setattr(locks.FileLock, "release", release_with_sigterm)
    result = cli(["checkpoints", "prune", str(out), "--keep-last", "1", "--yes", "--journal", str(journal)])

    # Two checkpoints were removed before the signal: it stands, and the signal is reported (exit 3).
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-300"]
    assert not os.path.lexists(migration_lock(str(out)).path), "the lock was left behind"
    assert result.returncode == 3, result.describe()
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: interrupted by SIGTERM; the prune ran: 2 checkpoints removed from {out}"], errors
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["exit_code"] == 3 and lines[0]["items_total"] == 2, lines
