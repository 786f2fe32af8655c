"""preflight's resolve warning and a migration's warning word an incomplete checkpoint's gaps by kind.

Real checkpoints (``fvconsole.demo.builders``: a real DCP save, real RNG files), each made incomplete
one way: ``dcp/.metadata`` missing, a FIFO or a directory in its place, RNG files missing. Before,
both called every one an interrupted save (preflight "latest picks checkpoint-4, an interrupted save
(...)", the migration "is incomplete (interrupted save?): ..."), a FIFO or a directory at
``dcp/.metadata`` included, which no cut-off save leaves. The expected lines are written here by hand
in ``core/checkpoints/gaps.py``'s words: "interrupted save" only for a missing ``.metadata`` or RNG file.
"""

from __future__ import annotations

import json
import os

import pytest
from migration_runs import WORLD, build_legacy, one_json

from fvconsole.demo.builders import build_run, write_checkpoint

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NOT_REGULAR = "dcp/.metadata not a readable regular file"


def _damage(ckpt: str, how: str) -> str:
    """Make ``ckpt`` incomplete ``how`` (``+`` joins two ways); the gaps' lines, as the listing words them."""
    meta = os.path.join(os.path.realpath(ckpt), "dcp", ".metadata")
    lines = []
    for way in how.split("+"):
        if way == "rng":
            last = max(n for n in os.listdir(ckpt) if n.startswith("rng_state_rank"))
            os.unlink(os.path.join(ckpt, last))
            lines.append((way, f"1 of {WORLD} rng_state_rank<r>.pt files missing"))
            continue
        os.unlink(meta)
        if way == "missing":
            lines.append((way, f"{meta}: missing"))
        elif way == "fifo":
            os.mkfifo(meta)
            lines.append((way, f"{meta}: DCP metadata must be a regular file, but it is a FIFO"))
        elif way == "directory":
            os.mkdir(meta)
            lines.append((way, f"{meta}: DCP metadata must be a regular file, but it is a directory"))
        else:
            raise AssertionError(way)
    # The listing names the .metadata gap before the RNG one.
    return "; ".join(line for _, line in sorted(lines, key=lambda item: item[0] == "rng"))


#: How → what the warning calls it (written by hand).
CALLED = {
    "missing": "interrupted save",
    "fifo": NOT_REGULAR,
    "directory": NOT_REGULAR,
    "rng": "interrupted save",
    "fifo+rng": f"{NOT_REGULAR}; interrupted save",
}


@pytest.mark.parametrize("how", list(CALLED))
def test_a_migration_warns_of_the_gaps_by_their_kind(how, tmp_path, cli) -> None:
    legacy = build_legacy(str(tmp_path))
    lines = _damage(legacy.checkpoint, how)
    code, out, _ = cli(legacy.migrate_argv("--json"))
    warnings = one_json(out)["warnings"]
    assert f"checkpoint {legacy.checkpoint} is incomplete ({CALLED[how]}): {lines}" in warnings, warnings
    if "rng" not in how and how != "missing":
        assert not [w for w in warnings if "interrupted save" in w], warnings
    assert not os.path.lexists(legacy.out)


def _resolve(cli, run) -> dict:
    _, out, err = cli(["preflight", "--config", run.config_path, "--resume", "latest", "--json"])
    assert err == "", err
    return next(c for c in json.loads(out)["checks"] if c["check"] == "resolve")


@pytest.mark.parametrize("how", ["missing", "fifo", "directory", "rng"])
def test_preflight_names_what_latest_picks_by_its_gaps(how, tmp_path, cli) -> None:
    run = build_run(tmp_path / "run", steps=(2,), kind="rank-local", num_gpus=WORLD)
    lines = _damage(write_checkpoint(run.output_dir, 4, run.config, kind="rank-local"), how)
    what = "an interrupted save" if CALLED[how] == "interrupted save" else f"incomplete: {CALLED[how]}"
    resolve = _resolve(cli, run)
    assert resolve["status"] == "warn", resolve
    assert resolve["detail"] == f"latest picks checkpoint-4, {what} ({lines}), while checkpoint-2 is complete", \
        resolve
    assert ("interrupted save" in resolve["detail"]) is (how in ("missing", "rng")), resolve
