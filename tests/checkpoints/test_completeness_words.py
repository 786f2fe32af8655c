"""``complete: NO (...)`` says which gaps a checkpoint has, worded from their kinds, in the CLI and the console.

Real legacy DCP checkpoints (torch CPU, the fixture builder), each made incomplete in its own way: no
``dcp/.metadata``, a FIFO or a directory in its place, an RNG file missing, no ``dcp/``, two gaps at once.
Before, ``checkpoints show`` said "complete: NO (interrupted save)" for every one of them (a FIFO is no
cut-off save) and the console's detail pane a bare "complete NO". The expected words are written here by hand.
"""

from __future__ import annotations

import os
import shutil

import pytest
from console_apps import make_app, running
from tour import select_row

from fvconsole.demo.builders import build_run

#: step → (how it is damaged, what "complete" says)
CASES = {
    2: ("missing", "NO (interrupted save: dcp/.metadata missing)"),
    4: ("fifo", "NO (dcp/.metadata not a readable regular file)"),
    6: ("directory", "NO (dcp/.metadata not a readable regular file)"),
    8: ("rng", "NO (interrupted save: an rng_state_rank<r>.pt missing)"),
    10: ("fifo+rng", "NO (dcp/.metadata not a readable regular file; interrupted save: an rng_state_rank<r>.pt missing)"),
    12: ("missing+rng", "NO (interrupted save: dcp/.metadata missing, an rng_state_rank<r>.pt missing)"),
    14: ("no-dcp", "NO (no dcp/ directory)"),
    16: ("none", "yes"),
}


def _damage(ckpt: str, how: str) -> None:
    meta = os.path.join(ckpt, "dcp", ".metadata")
    if "rng" in how:
        os.unlink(os.path.join(ckpt, "rng_state_rank1.pt"))
    if how == "no-dcp":
        shutil.rmtree(os.path.join(ckpt, "dcp"))
    elif how.startswith(("missing", "fifo", "directory")):
        os.unlink(meta)
        if how.startswith("fifo"):
            os.mkfifo(meta)
        elif how == "directory":
            os.mkdir(meta)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    built = build_run(tmp_path_factory.mktemp("words") / "run", steps=tuple(CASES), num_gpus=2, sp_size=1)
    for step, (how, _) in CASES.items():
        _damage(built.checkpoint(step), how)
    return built


@pytest.mark.parametrize("step", list(CASES))
def test_checkpoints_show_names_the_gaps(run, cli, step) -> None:
    code, out, err = cli(["checkpoints", "show", run.checkpoint(step)])
    line = next(line for line in out.splitlines() if line.startswith("complete: "))
    assert line.startswith(f"complete: {CASES[step][1]}; kind: "), (line, err)


async def test_the_detail_pane_says_the_same(run) -> None:
    app = make_app(run.config_path, run.output_dir)
    async with running(app, (160, 48)) as pilot:
        for step, (_, says) in CASES.items():
            await select_row(app, pilot, "#ckpt-table", f"checkpoint-{step}")
            detail = " ".join(str(app.query_one("#ckpt-detail").render()).split())
            assert f"complete {says} " in detail, (step, detail)
