"""Issue 19.6: the dry run is the same judge as ``--yes``: an output dir that is a mount point.

The defect: an output dir that is a mount point (a tmpfs, a container's bind mount) passed
the dry run ("re-run with --yes"); ``--yes`` then failed at publish with EBUSY (a mount
point cannot be renamed or swapped), exit 3, a failure journalled. Both now refuse it from
the same rule (``core/migration/output_dir.py``), exit 1, before anything is written.
Real mounts: skipped where this process may not mount.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .harness import assert_clean_error, digest_diff, run_inproc, tree_digest
from .workspace import MigrationWorkspace


def _journal_lines() -> int:
    path = Path(os.environ["FVCONSOLE_JOURNAL"])
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.fault("shared output dir", "output dir is a mount point (tmpfs, bind mount of the same filesystem)")
@pytest.mark.parametrize("case", ["tmpfs", "bind mount"])
def test_mount_point_output_dir_refused_by_dry_run_and_yes(
    ws: MigrationWorkspace, tmp_path: Path, capsys: pytest.CaptureFixture[str], mounter, case: str, trials
) -> None:
    out = tmp_path / "state"
    out.mkdir()
    if case == "tmpfs":
        mounter(["-t", "tmpfs", "-o", "size=4m", "tmpfs"], out)
    else:
        source = tmp_path / "elsewhere"  # same filesystem as out's parent: st_dev alone cannot tell
        source.mkdir()
        mounter(["--bind", str(source)], out)
    assert os.path.ismount(out) or case == "bind mount"
    before, journal = tree_digest(tmp_path), _journal_lines()
    for yes in (False, True):
        result = run_inproc(ws.migrate_args(out, yes=yes), capsys)
        line = assert_clean_error(result, names=[str(out)])
        assert "mount point" in line and "cannot be renamed or swapped" in line, line
        assert "--yes" not in result.stdout, result.describe()
        assert digest_diff(before, tree_digest(tmp_path)) == [], f"yes={yes} wrote something"
        assert _journal_lines() == journal, f"yes={yes} journalled a refusal"
        trials.add(f"{'--yes' if yes else 'dry run'} refused, nothing written")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".state")] == [], "a lock or staging dir was left"
