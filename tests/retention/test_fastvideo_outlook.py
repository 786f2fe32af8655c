"""Issue 31 item 4: what FastVideo's own cleanup (after the next save) and its ``latest`` resume will do,
checked against the oracle in ``tests/fastvideo_reference.py`` (written from FastVideo's rule, not from
fvconsole) on random output dirs, and the warnings on hand-made ones."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from fastvideo_reference import cleanup_after_next_save, resume_latest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migration_runs import one_json
from retention_runs import DAY, make_checkpoint

from fvconsole.core.checkpoints import discover_checkpoints
from fvconsole.core.retention import fastvideo_outlook

#: What may sit at a checkpoint-like name: a complete save, an interrupted one with or without dcp/,
#: a symlink to a complete save elsewhere, a dangling symlink, a plain file.
KINDS = ("complete", "interrupted", "no-dcp", "symlink", "dangling", "file")
NAMES = st.one_of(st.integers(0, 60).map(lambda n: f"checkpoint-{n}"),
                  st.integers(0, 60).map(lambda n: f"checkpoint-{n:03d}"),
                  st.sampled_from(["checkpoint-final", "checkpoint-", "checkpoint-1x", "ckpt-5", "dataloader-state"]))
LIMITS = st.one_of(st.none(), st.integers(-2, 8), st.sampled_from(["3", "0", " 2 "]), st.booleans())


def build(root: Path, layout: dict[str, str]) -> Path:
    out = root / "out"
    out.mkdir()
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    for name, kind in layout.items():
        path = out / name
        if kind == "complete" or kind == "interrupted":
            (path / "dcp").mkdir(parents=True)
            if kind == "complete":
                (path / "dcp" / ".metadata").write_bytes(b"m")
        elif kind == "no-dcp":
            path.mkdir()
        elif kind == "symlink":
            (elsewhere / name / "dcp").mkdir(parents=True)
            path.symlink_to(elsewhere / name)
        elif kind == "dangling":
            path.symlink_to(elsewhere / "nothing-here")
        else:
            path.write_bytes(b"not a dir")
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.dictionaries(NAMES, st.sampled_from(KINDS), max_size=10), limit=LIMITS)
def test_cleanup_and_latest_match_the_oracle_on_random_output_dirs(layout: dict[str, str], limit: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = build(Path(tmp), layout)
        infos = discover_checkpoints(out, read_dcp=False)

        class Config:  # a loaded run config: only its get() is read
            @staticmethod
            def get(path: str, default: object = None) -> object:
                assert path == "training.checkpoint.checkpoints_total_limit"
                return limit

        outlook = fastvideo_outlook(str(out), infos, Config())
        keep_last, removed = cleanup_after_next_save(out, limit)
        assert outlook.cleanup_limit == keep_last
        assert sorted(outlook.cleanup_deletes) == sorted(s for s in removed if s != float("inf"))
        assert outlook.latest == resume_latest(out)


def test_symlinked_and_interrupted_saves_take_slots_and_the_warnings(tmp_path: Path, cli) -> None:
    out = tmp_path / "out"
    out.mkdir()
    make_checkpoint(out, 100, age=9 * DAY, limit=3)
    make_checkpoint(tmp_path, 150, age=8 * DAY)
    (out / "checkpoint-150").symlink_to(tmp_path / "checkpoint-150")
    make_checkpoint(out, 200, age=7 * DAY, limit=3)
    make_checkpoint(out, 300, complete=False, age=DAY, limit=3)
    make_checkpoint(out, 400, complete=False, age=60, limit="3")
    code, stdout, err = cli(["checkpoints", "ls", str(out), "--json"])
    assert code == 0, err
    data = one_json(stdout)
    # 100, 150 (symlink), 200, 300, 400 and the next save: the newest 3 are 300, 400 and the next save;
    # 150 is selected too but stays (rmtree refuses a symlink): it and the next save are complete.
    assert data["fastvideo"] == {"cleanup_limit": 3, "cleanup_deletes": [100, 200], "latest": 400, "latest_resume_step": 400}
    warnings = "\n".join(data["warnings"])
    assert "keeps 2 complete checkpoints of its limit 3" in warnings
    assert "deletes checkpoint-200, the newest complete checkpoint" in warnings
    code, stdout, err = cli(["checkpoints", "ls", str(out)])
    assert ("fastvideo: checkpoints_total_limit 3 (from the embedded config of checkpoint-400): right after the next "
            "save its cleanup deletes checkpoint-100, checkpoint-200 (symlinked, kept: checkpoint-150)") in stdout
    assert "fastvideo: resume_from_checkpoint latest resumes from checkpoint-400" in stdout
    # --config wins over the embedded one; 0 (FastVideo's default) means no cleanup.
    run = tmp_path / "run.yaml"
    run.write_text(json.dumps({"training": {"checkpoint": {"checkpoints_total_limit": 0}}}))
    code, stdout, err = cli(["checkpoints", "ls", str(out), "--config", str(run), "--json"])
    assert one_json(stdout)["fastvideo"] == {"cleanup_limit": 0, "cleanup_deletes": [], "latest": 400, "latest_resume_step": 400}
    # Pruning the interrupted saves first removes the trap: the next cleanup keeps both complete ones.
    code, _, err = cli(["checkpoints", "prune", str(out), "--incomplete", "--grace", "0", "--yes", "--no-journal"])
    assert code == 0, err
    data = one_json(cli(["checkpoints", "ls", str(out), "--json"]).stdout)
    assert data["fastvideo"] == {"cleanup_limit": 3, "cleanup_deletes": [100], "latest": 200, "latest_resume_step": 200}


def test_an_unreadable_limit_is_a_warning(tmp_path: Path, cli) -> None:
    out = tmp_path / "out"
    out.mkdir()
    make_checkpoint(out, 100, limit="three")
    data = one_json(cli(["checkpoints", "ls", str(out), "--json"]).stdout)
    assert data["fastvideo"]["cleanup_limit"] is None
    assert any(w.startswith("FastVideo will refuse to start: ") for w in data["warnings"])


def test_the_fewer_complete_warning_says_one_checkpoint_and_two(tmp_path: Path, cli) -> None:
    """Issue 28 item 3: the count of complete checkpoints with its noun, "1 complete checkpoint"."""
    one = tmp_path / "one"
    one.mkdir()
    make_checkpoint(one, 100, age=2 * DAY, limit=2)
    make_checkpoint(one, 200, complete=False, age=DAY, limit=2)
    code, stdout, err = cli(["checkpoints", "ls", str(one), "--json"])
    assert code == 0, err
    assert ("FastVideo's cleanup after the next save keeps 1 complete checkpoint of its limit 2: interrupted saves "
            "take its slots (`checkpoints prune --incomplete` removes them)") in one_json(stdout)["warnings"]
    two = tmp_path / "two"
    two.mkdir()
    for step in (100, 200):
        make_checkpoint(two, step, age=3 * DAY, limit=3)
    make_checkpoint(two, 300, complete=False, age=DAY, limit=3)
    code, stdout, err = cli(["checkpoints", "ls", str(two)])
    assert code == 0, err
    assert "FastVideo's cleanup after the next save keeps 2 complete checkpoints of its limit 3: " in stdout + err
