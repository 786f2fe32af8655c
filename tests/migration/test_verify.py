"""verify_sidecars / `fvconsole sidecars verify` against real written sets (migration-exec)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from migration_runs import WORLD, build_legacy, one_json, plan_for

import fvconsole.core.formats.sidecar_files as files
from fvconsole.core.formats import torch_zip
from fvconsole.core.migration import locked, verify


@pytest.fixture()
def migrated(tmp_path):
    legacy = build_legacy(str(tmp_path))
    plan = plan_for(legacy)
    locked.execute_migration(plan)
    return legacy, plan


def _verify(legacy, deep: bool = False):
    return verify.verify_sidecars(legacy.run.config_path, legacy.checkpoint, legacy.out, deep=deep)


def test_verify_ok_and_deep_next_sample_ids(migrated) -> None:
    legacy, plan = migrated
    result = _verify(legacy, deep=True)
    assert result.ok, result.problems
    assert result.problems == ()
    assert [r["rank"] for r in result.ranks] == list(range(WORLD))
    by_rank = {c.rank: c for c in plan.ranks}
    for row in result.ranks:
        cursor = by_rank[row["rank"]]
        assert row["ok"] is True
        assert row["row_offset"] == cursor.row_offset
        # The fixture's id column is "sample-%06d" of the global sample index.
        assert row["next_sample_id"] == f"sample-{cursor.next_sample_index:06d}"
    assert len({r["next_sample_id"] for r in result.ranks}) == WORLD // 2  # one per SP group


def test_verify_cli_json_shape(migrated, cli) -> None:
    legacy, _ = migrated
    code, out, err = cli(legacy.verify_argv("--json", "--deep"))
    assert code == 0, err
    data = one_json(out)
    assert data["ok"] is True and data["problems"] == []
    assert len(data["ranks"]) == WORLD
    assert {"rank", "ok", "problems", "row_group_position", "row_offset", "yielded_samples",
            "next_sample_index", "next_sample_id"} <= set(data["ranks"][0])
    code, out, _ = cli(legacy.verify_argv())
    assert code == 0 and "OK: 8 sidecars" in out


def test_verify_detects_flipped_byte(migrated, cli) -> None:
    legacy, _ = migrated
    path = os.path.join(legacy.out, "dataloader_state_rank5.pt")
    data = bytearray(Path(path).read_bytes())
    data[-30] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    result = _verify(legacy)
    assert not result.ok
    assert any("rank 5" in p and "sha256" in p for p in result.problems)
    assert [r["rank"] for r in result.ranks if not r["ok"]] == [5]
    code, _, err = cli(legacy.verify_argv())
    assert code == 1 and err.startswith("error: verification failed")


def test_verify_detects_field_mismatch(migrated) -> None:
    legacy, plan = migrated
    path = os.path.join(legacy.out, "dataloader_state_rank3.pt")
    payload = plan.sidecar_payload(3)
    payload["state"]["row_offset"] += 1
    torch.save(payload, path)
    problems = _verify(legacy).problems
    assert any("state.row_offset" in p for p in problems), problems
    assert any("dataloader_state_rank3.pt: sha256" in p for p in problems), problems


def test_verify_detects_missing_extra_and_foreign_files(migrated) -> None:
    legacy, plan = migrated
    os.unlink(os.path.join(legacy.out, f"dataloader_state_rank{WORLD - 1}.pt"))
    torch.save(plan.sidecar_payload(0), os.path.join(legacy.out, f"dataloader_state_rank{WORLD}.pt"))
    Path(legacy.out, "notes.txt").write_text("x")
    Path(legacy.out, ".dataloader_state_rank1.pt.ab12.tmp").write_text("x")
    os.mkdir(os.path.join(os.path.dirname(legacy.out), ".sidecars.fvconsole-staging-1-ab"))
    result = _verify(legacy)
    problems = "\n".join(result.problems)
    assert any("staging leftover" in w for w in result.warnings)
    assert f"dataloader_state_rank{WORLD - 1}.pt: missing" in problems
    assert f"dataloader_state_rank{WORLD}.pt: extra sidecar" in problems
    assert "notes.txt: foreign file" in problems
    assert ".dataloader_state_rank1.pt.ab12.tmp: leftover temp file" in problems


def test_verify_detects_missing_and_wrong_receipt(migrated, cli) -> None:
    legacy, _ = migrated
    receipt_path = os.path.join(legacy.out, "migration_receipt.json")
    receipt = json.loads(Path(receipt_path).read_text())
    receipt["step"] = 999
    Path(receipt_path).write_text(json.dumps(receipt))
    assert any("field 'step' is 999" in p for p in _verify(legacy).problems)
    os.unlink(receipt_path)
    result = _verify(legacy)
    assert not result.ok and "migration_receipt.json: missing" in result.problems
    code, out, _ = cli(legacy.verify_argv("--json"))
    data = one_json(out)
    assert code == 1 and data["ok"] is False and "migration_receipt.json: missing" in data["problems"]


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_not_executed(migrated, tmp_path) -> None:
    legacy, _ = migrated
    marker = tmp_path / "pwned"
    torch.save({"version": 1, "payload": _Evil(str(marker))}, os.path.join(legacy.out, "dataloader_state_rank2.pt"))
    result = _verify(legacy)
    assert not marker.exists()
    # The torch-free reader names the function the pickle wanted to call and refuses it.
    assert any("rank 2" in p and "refused" in p and ".system" in p for p in result.problems), result.problems
    assert not marker.exists()


def test_torch_check_reads_every_sidecar_with_torch_too(migrated, cli) -> None:
    legacy, _ = migrated
    code, out, err = cli(legacy.verify_argv("--torch-check"))
    assert code == 0 and "OK: 8 sidecars" in out, err
    # The comparison itself: torch's reading of real bytes against a payload that differs.
    data = Path(legacy.out, "dataloader_state_rank3.pt").read_bytes()
    payload = torch_zip.loads(files.read_sidecar_bytes(os.path.join(legacy.out, "dataloader_state_rank3.pt")))
    assert verify._torch_check(data, payload) == []
    assert verify._torch_check(data, {**payload, "step": payload["step"] + 1}) == [
        "torch.load(weights_only=True) reads a different payload than the torch-free reader"]
    assert verify._torch_check(b"PK\x03\x04 not a zip", payload)[0].startswith("refused by torch.load")


def test_migrate_torch_check_writes_a_set_torch_reads(tmp_path, cli) -> None:
    legacy = build_legacy(str(tmp_path))
    code, out, err = cli(legacy.migrate_argv("--yes", "--torch-check"))
    assert code == 0, err
    for rank in range(WORLD):
        loaded = torch.load(os.path.join(legacy.out, f"dataloader_state_rank{rank}.pt"), weights_only=True)
        assert loaded["rank"] == rank


def test_a_file_given_as_sidecar_dir_is_not_a_directory(migrated, cli, tmp_path) -> None:
    legacy, _ = migrated
    a_file = tmp_path / "sidecars.txt"
    a_file.write_text("not a dir")
    code, _, err = cli(legacy.verify_argv(sidecar_dir=str(a_file)))
    assert code == 1
    assert f"{a_file}: sidecar dir is not a directory" in err
    code, _, err = cli(legacy.verify_argv(sidecar_dir=str(tmp_path / "absent")))
    assert code == 1 and "absent: sidecar dir does not exist" in err
