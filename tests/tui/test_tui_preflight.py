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


class Gate:
    """Holds a worker's real core call until opened: the order in which two workers finish, made certain."""

    def __init__(self, real, holds=lambda *args: True) -> None:
        import threading

        self.real, self.holds, self.opened, self.waiting = real, holds, threading.Event(), threading.Event()

    def __call__(self, *args, **kwargs):
        result = self.real(*args, **kwargs)  # what the files said when the worker started, returned when opened
        if self.holds(*args):
            self.waiting.set()
            assert self.opened.wait(60), "the gate was never opened"
        return result


async def test_w_right_after_a_cursor_move_is_not_overwritten_by_that_moves_detail(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """The last action wins: w pressed while the detail of the row just reached is still being read shows the
    preflight report, and the detail read that finishes afterwards is kept (for later) but not shown over it."""
    from fvconsole.tui.checkpoints import view

    run = build_run(tmp_path / "run", steps=(2, 4), kind="rank-local", num_gpus=4)
    app = make_app(config=run.config_path, output=run.output_dir)
    async with running(app, SMALL) as pilot:
        await settle(app, pilot)
        gate = Gate(view.checkpoint_detail)
        monkeypatch.setattr(view, "checkpoint_detail", gate)
        await select_row(app, pilot, "#ckpt-table", "checkpoint-4")
        await pilot.press("down", "w")  # checkpoint-2's detail is read, and held
        await wait_until(pilot, lambda: "Preflight of checkpoint-2" in _text(app, "#ckpt-detail"),
                         f"the report: {_text(app, '#ckpt-detail')[:200]}", timeout=60)
        assert gate.waiting.is_set()
        gate.opened.set()
        await settle(app, pilot)
        assert "Preflight of checkpoint-2 (step 2) on 4 ranks" in _text(app, "#ckpt-detail")
        await pilot.press("up", "down")  # the detail read was kept: the summary is back at once, in full
        detail = _text(app, "#ckpt-detail")
        assert detail.startswith("checkpoint-2\n") and "loading detail" not in detail


async def test_a_cursor_move_right_after_w_is_not_overwritten_by_that_ws_report(tmp_path: Path, monkeypatch) -> None:
    """The other order: w, then a move before the report is ready; the late report is not shown over the row
    the cursor is on, nor in the panel of the config's own verdict."""
    from fvconsole.tui.checkpoints import preflight

    run = build_run(tmp_path / "run", steps=(2, 4), kind="rank-local", num_gpus=4)
    app = make_app(config=run.config_path, output=run.output_dir)
    async with running(app, SMALL) as pilot:
        await settle(app, pilot)
        await select_row(app, pilot, "#ckpt-table", "checkpoint-4")
        panel = _text(app, "#ckpt-preflight")
        gate = Gate(preflight.run_preflight, holds=lambda request: request.resume is not None)
        monkeypatch.setattr(preflight, "run_preflight", gate)
        await pilot.press("w", "down")
        await wait_until(pilot, lambda: gate.waiting.is_set() and _text(app, "#ckpt-detail").startswith(
            "checkpoint-2\n") and "loading detail" not in _text(app, "#ckpt-detail"), "checkpoint-2's detail")
        gate.opened.set()
        await settle(app, pilot)
        detail = _text(app, "#ckpt-detail")
        assert detail.startswith("checkpoint-2\n") and "Preflight of" not in detail, detail[:200]
        assert _text(app, "#ckpt-preflight") == panel


async def test_a_failed_w_says_so_in_the_detail_pane_not_over_the_configs_verdict(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    from fvconsole.core.shared import FvError
    from fvconsole.tui.checkpoints import preflight

    run = build_run(tmp_path / "run", steps=(2, 4), kind="rank-local", num_gpus=4)
    app = make_app(config=run.config_path, output=run.output_dir)
    async with running(app, SMALL) as pilot:
        await settle(app, pilot)
        panel = _text(app, "#ckpt-preflight")

        def refuse(request):
            raise FvError(f"{request.config_path}: cannot read run config (gone)")

        monkeypatch.setattr(preflight, "run_preflight", refuse)
        await press(app, pilot, "w")
        assert _text(app, "#ckpt-preflight") == panel
        assert _text(app, "#ckpt-detail").startswith(f"preflight: {run.config_path}: cannot read run config (gone)")


async def test_the_panel_shows_the_latest_listings_verdict_not_a_slower_earlier_one(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    from fvconsole.tui.checkpoints import preflight

    run = build_run(tmp_path / "run", steps=(2, 4), kind="rank-local", num_gpus=4,
                    **{"training.checkpoint.resume_from_checkpoint": "latest"})
    app = make_app(config=run.config_path, output=run.output_dir)
    async with running(app, SMALL) as pilot:
        await settle(app, pilot)
        assert _text(app, "#ckpt-preflight").startswith("preflight (checkpoint-4): GO")
        calls: list[object] = []
        gate = Gate(preflight.run_preflight, holds=lambda request: not calls.append(request) and len(calls) == 1)
        monkeypatch.setattr(preflight, "run_preflight", gate)
        await pilot.press("r")  # judged from the file as it is now: checkpoint-4, and held
        await wait_until(pilot, gate.waiting.is_set, "the first judgement")
        text = Path(run.config_path).read_text()
        assert "resume_from_checkpoint: latest" in text
        Path(run.config_path).write_text(text.replace("resume_from_checkpoint: latest",
                                                      f"resume_from_checkpoint: {run.checkpoint(2)}"))
        await pilot.press("r")
        await wait_until(pilot, lambda: _text(app, "#ckpt-preflight").startswith("preflight (checkpoint-2)"),
                         f"the second verdict: {_text(app, '#ckpt-preflight')[:100]}")
        gate.opened.set()
        await settle(app, pilot)
        assert _text(app, "#ckpt-preflight").startswith("preflight (checkpoint-2)")
