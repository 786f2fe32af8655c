"""Issue 36 item 4: view 1 shows the preflight verdict for the checkpoint the loaded config resumes from
(each check with its status, in 80x24), and on w the selected checkpoint's full report; a no-go names
its first problem and the command that fixes it. The real console under run_test, on real runs built
as FastVideo writes them; the expected words are written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_apps import make_app, running, wait_until
from tour import press, select_row, settle

from fvconsole.demo.builders import build_run, rng_state

SMALL = (80, 24)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _text(app, selector: str) -> str:
    return str(app.query_one(selector).render())


async def test_view_1_shows_the_configs_resume_verdict_and_the_selected_checkpoints_report(tmp_path: Path) -> None:
    run = build_run(tmp_path / "run", steps=(2, 4), kind="rank-local", num_gpus=4,
                    **{"training.checkpoint.resume_from_checkpoint": "latest"})
    import torch

    for rank in range(4):  # checkpoint-2 loses its RNG snapshots' gen_cuda: a no-go when chosen
        torch.save(rng_state(rank, 2, keys=("torch_rng", "python_rng", "numpy_rng", "cuda_rng")),
                   Path(run.checkpoint(2)) / f"rng_state_rank{rank}.pt")
    app = make_app(config=run.config_path, output=run.output_dir)
    async with running(app, SMALL) as pilot:
        await settle(app, pilot)
        await wait_until(pilot, lambda: "GO" in _text(app, "#ckpt-preflight"), "the verdict")
        panel = _text(app, "#ckpt-preflight")
        lines = panel.splitlines()
        assert lines[0] == "preflight (checkpoint-4): GO: resume checkpoint-4 (step 4) on 4 ranks"
        assert lines[1].startswith("ok resolve · ok dcp · ok config · ok dataloader · ok rng · ok dataset")
        region = app.query_one("#ckpt-preflight").region
        assert region.right <= SMALL[0] and region.bottom <= SMALL[1]
        await select_row(app, pilot, "#ckpt-table", "checkpoint-2")
        await settle(app, pilot)
        await press(app, pilot, "w")
        await settle(app, pilot)
        await wait_until(pilot, lambda: "NO-GO" in _text(app, "#ckpt-detail"),
                         f"the selected checkpoint's report: {_text(app, '#ckpt-detail')[:300]}", timeout=60)
        detail = _text(app, "#ckpt-detail")
        assert "Preflight of checkpoint-2 (step 2) on 4 ranks, sp size 1" in detail
        assert "fail rng        ranks 0-3: " in detail and "'gen_cuda'" in detail
        assert detail.splitlines()[-1].startswith("NO-GO: 1 blocking problem; first: rng: ranks 0-3: ")
