"""Issue 37 item 1 (the scan's half): one normalised path, the real directory, names a prune's scan,
its checkpoints and leftovers, and its journal line, however the command line reached the output dir
(a symlink ALIAS to OUT, ``~/out``). The lock's half: ``test_prune_lock_path.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from migration_runs import one_json
from retention_runs import DAY, make_checkpoint

from fvconsole.core.shared.host import current_identity


def _run(tmp_path: Path) -> Path:
    out = tmp_path / "runs" / "out"
    out.mkdir(parents=True)
    for i, step in enumerate((100, 200, 300)):
        make_checkpoint(out, step, age=(10 - i) * DAY)
    return out


def test_a_prune_through_a_symlink_names_the_real_directory_everywhere(tmp_path: Path, cli) -> None:
    out = _run(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(out)
    code, stdout, err = cli(["checkpoints", "prune", str(alias), "--keep-last", "2", "--json"])
    assert code == 0, err
    plan = one_json(stdout)
    assert plan["output_dir"] == str(out) and [d["path"] for d in plan["delete"]] == [str(out / "checkpoint-100")]
    journal = tmp_path / "journal.jsonl"
    code, stdout, err = cli(["checkpoints", "prune", str(alias), "--keep-last", "2", "--yes", "--json",
                             "--journal", str(journal)])
    assert code == 0, err
    done = one_json(stdout)
    assert done["output_dir"] == str(out) and [r["path"] for r in done["removed"]] == [str(out / "checkpoint-100")]
    [line] = journal.read_text().splitlines()
    assert json.loads(line)["target"] == str(out)


def test_a_live_prunes_leftover_is_left_alone_by_a_prune_through_a_symlink(tmp_path: Path, cli) -> None:
    out = _run(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(out)
    me = current_identity()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]) as live:
        try:
            hidden = out / f".fvconsole-pruning-{'1' * 16}-{me.label}-{me.key}-{live.pid}"
            (out / "checkpoint-100").rename(hidden)
            code, stdout, err = cli(["checkpoints", "prune", str(alias), "--yes", "--json", "--no-journal"])
            assert code == 0, err
            done = one_json(stdout)
            assert done["removed"] == [] and hidden.is_dir()
            assert any(w.startswith(f"{hidden}: ") for w in done["warnings"]), done["warnings"]
        finally:
            live.kill()


def test_a_tilde_path_is_scanned_as_the_real_directory(tmp_path: Path, cli, monkeypatch) -> None:
    out = _run(tmp_path)
    monkeypatch.setenv("HOME", str(out.parent))
    code, stdout, err = cli(["checkpoints", "prune", "~/out", "--keep-last", "2", "--json"])
    assert code == 0, err
    assert one_json(stdout)["output_dir"] == str(out)
