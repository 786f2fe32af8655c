"""`checkpoints ls`: the output dir's free space and how many more saves of the latest size fit.

Expected values: the checkpoint's size by an ``os.walk`` of its files here, the free space
by ``os.statvfs`` here (within a margin: other processes write to the same filesystem).
"""

from __future__ import annotations

import json
import os

import pytest

from fvconsole.demo.builders import run_config, write_checkpoint

MARGIN = 256 * 2**20


def _files_bytes(path: str) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(path) for f in files)


@pytest.fixture()
def out(tmp_path):
    config = run_config(data_path=str(tmp_path / "d"), manifest_path=str(tmp_path / "m.json"),
                        output_dir=str(tmp_path / "out"), num_gpus=2)
    write_checkpoint(tmp_path / "out", 100, config)
    newest_complete = write_checkpoint(tmp_path / "out", 200, config, kind="none")
    write_checkpoint(tmp_path / "out", 300, config, complete=False)  # interrupted: smaller, not the unit
    return tmp_path / "out", newest_complete


def test_ls_json_disk_budget(out, cli) -> None:
    root, unit = out
    code, text, err = cli(["checkpoints", "ls", str(root), "--json"])
    assert code == 0, err
    disk = json.loads(text)["disk"]
    st = os.statvfs(root)
    assert disk["path"] == str(root) and disk["total_bytes"] == st.f_blocks * st.f_frsize
    assert abs(disk["free_bytes"] - st.f_bavail * st.f_frsize) < MARGIN
    assert disk["latest"] == unit and disk["latest_bytes"] == _files_bytes(unit)
    assert disk["saves_fit"] == disk["free_bytes"] // _files_bytes(unit)


def test_ls_text_says_how_many_saves_fit(out, cli) -> None:
    root, unit = out
    code, text, err = cli(["checkpoints", "ls", str(root)])
    assert code == 0, err
    (line,) = [line for line in text.splitlines() if line.startswith("disk: ")]
    st = os.statvfs(root)
    assert line.split("; ")[1].startswith("room for ")
    fit = int(line.split("; ")[1].split()[2])
    assert abs(fit - st.f_bavail * st.f_frsize // _files_bytes(unit)) <= MARGIN // _files_bytes(unit) + 1
    assert f"{fit} more saves of" in line and "(the size of checkpoint-200)" in line


def test_a_single_checkpoint_dir_measures_its_output_dir(out, cli) -> None:
    root, unit = out
    code, text, _ = cli(["checkpoints", "ls", unit, "--json"])
    disk = json.loads(text)["disk"]
    assert code == 0 and disk["path"] == str(root) and disk["latest"] == unit


def test_no_complete_save_has_no_budget(tmp_path, cli) -> None:
    config = run_config(data_path=str(tmp_path / "d"), manifest_path=str(tmp_path / "m.json"),
                        output_dir=str(tmp_path / "out"), num_gpus=2)
    write_checkpoint(tmp_path / "out", 300, config, complete=False)
    code, text, _ = cli(["checkpoints", "ls", str(tmp_path / "out"), "--json"])
    disk = json.loads(text)["disk"]
    assert code == 0 and disk["latest"] is None and disk["saves_fit"] is None and disk["free_bytes"] > 0


def test_the_budget_says_one_more_save_and_two() -> None:
    """Issue 28 item 3: the count of saves with its noun, never "save(s)"."""
    from dataclasses import replace

    from fvconsole.cli.checkpoints import budget_line
    from fvconsole.core.checkpoints.budget import DiskBudget

    one = DiskBudget("/runs/out", 3 << 30, 10 << 30, "/runs/out/checkpoint-200", 2 << 30, 1)
    assert budget_line(one) == ("disk: 3.0 GiB free of 10.0 GiB; room for 1 more save of 2.0 GiB "
                                "(the size of checkpoint-200)")
    two = replace(one, free_bytes=5 << 30, saves_fit=2)
    assert budget_line(two) == ("disk: 5.0 GiB free of 10.0 GiB; room for 2 more saves of 2.0 GiB "
                                "(the size of checkpoint-200)")
