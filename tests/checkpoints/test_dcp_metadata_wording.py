"""One wording for a ``dcp/.metadata`` that is missing, truncated or not a DCP pickle, through every caller.

A real legacy DCP checkpoint (torch CPU, the fixture builder), its ``.metadata`` then removed, cut
in half, replaced by a pickle of something else, by a FIFO or by a directory. ``checkpoints show`` (keys and ``--tensors``),
``checkpoints ls``, ``migrate`` and ``preflight`` each say the same line, naming the file; the
expected lines are written here by hand, never read from the reader. Before the one reader, show's
keys said "cannot read DCP metadata (No such file or directory)" where its ``--tensors`` said
"(missing)" and preflight "missing (an interrupted save: ...)"; a FIFO or a directory there was
listed as missing, and ``migrate`` did not refuse it (its presence check only asked whether the
path exists) but warned "incomplete (interrupted save?): " with no reason.
"""

from __future__ import annotations

import json
import os
import pickle

import pytest
from migration_runs import build_legacy, one_json

from fvconsole.core.checkpoints import read_dcp_metadata
from fvconsole.core.shared.errors import FvError


def _damage(meta: str, how: str) -> str:
    """Damage ``meta`` and return the line every caller must say about it."""
    if how == "missing":
        os.unlink(meta)
        return f"{meta}: missing (interrupted save)"
    if how == "truncated":
        with open(meta, "rb") as fh:
            data = fh.read()
        with open(meta, "wb") as fh:
            fh.write(data[: len(data) // 2])
        # The VM's own reason follows: where the cut lands decides which ("truncated or corrupt ...",
        # "ends before its STOP opcode").
        return f"{meta}: unreadable DCP metadata: the pickle is malformed ("
    if how == "not-dcp":  # a well-formed pickle of what a DCP Metadata holds, but a plain dict
        with open(meta, "wb") as fh:
            pickle.dump({"state_dict_metadata": {"model.w": 1}, "storage_data": {}}, fh)
        return f"{meta}: unreadable DCP metadata: top-level object is dict, not a DCP Metadata"
    os.unlink(meta)
    if how == "fifo":
        os.mkfifo(meta)
        return f"{meta}: DCP metadata must be a regular file, but it is a FIFO"
    if how == "directory":
        os.mkdir(meta)
        return f"{meta}: DCP metadata must be a regular file, but it is a directory"
    raise AssertionError(how)


#: Not there as a regular file: FastVideo's dcp.load cannot open it, so the checkpoint is incomplete
#: and a migration refuses it (a damaged file that is there is only warned of: its kind is unknown).
ABSENT = ("missing", "fifo", "directory")


@pytest.fixture(params=["missing", "truncated", "not-dcp", "fifo", "directory"])
def damaged(request, tmp_path):
    legacy = build_legacy(str(tmp_path))
    meta = os.path.join(os.path.realpath(legacy.checkpoint), "dcp", ".metadata")
    return legacy, meta, _damage(meta, request.param), request.param


def _says(text: str, line: str) -> bool:
    """``text`` is ``line`` (a truncated pickle's line goes on with the VM's own reason)."""
    return text == line or (line.endswith("(") and text.startswith(line) and text.endswith(")"))


def test_the_reader_says_the_line(damaged) -> None:
    legacy, _, line, _ = damaged
    with pytest.raises(FvError) as info:
        read_dcp_metadata(legacy.checkpoint)
    assert _says(str(info.value), line), str(info.value)


def test_checkpoints_show_says_it_once_for_keys_and_tensors(damaged, cli) -> None:
    legacy, _, line, _ = damaged
    code, out, _ = cli(["checkpoints", "show", legacy.checkpoint, "--tensors", "--json"])
    doc = json.loads(out)
    assert _says(doc["dcp"]["error"], line) and doc["tensors_error"] == doc["dcp"]["error"], doc
    code, out, _ = cli(["checkpoints", "show", legacy.checkpoint, "--tensors"])
    unreadable = [s.strip() for s in out.splitlines() if s.strip().startswith("unreadable: ")]
    assert len(unreadable) == 2 and all(_says(s.removeprefix("unreadable: "), line) for s in unreadable), out


def test_checkpoints_ls_says_it(damaged, cli) -> None:
    legacy, _, line, _ = damaged
    code, out, _ = cli(["checkpoints", "ls", legacy.run.output_dir, "--json"])
    (info,) = json.loads(out)["checkpoints"]
    assert info["complete"] is (damaged[3] not in ABSENT) and info["kind"] == "unknown"
    assert [p for p in info["problems"] if _says(p, line)], info["problems"]


def test_migrate_says_it(damaged, cli) -> None:
    legacy, meta, line, how = damaged
    code, out, _ = cli(legacy.migrate_argv("--json"))
    data = one_json(out)
    refusal = f"checkpoint.dcp: {line}; FastVideo cannot resume from this checkpoint"
    if how in ABSENT:  # FastVideo cannot load it at all: refused, and the incomplete warning says why
        assert code == 1
        assert any(r["field"] == "checkpoint.dcp" and r["message"] == refusal for r in data["refusals"]), data
        # "interrupted save" only for a missing file: a FIFO or a directory there is no cut-off save's (gaps.py)
        gap = (f"(interrupted save): {meta}: missing" if how == "missing" else
               f"(dcp/.metadata not a readable regular file): {line}")
        incomplete = f"checkpoint {legacy.checkpoint} is incomplete {gap}"
        assert incomplete in data["warnings"], data["warnings"]
    else:  # the legacy key cannot be confirmed: warned, naming the file (reliability-defects.md)
        assert [w for w in data["warnings"] if _says(w, line)], data["warnings"]
    assert not os.path.lexists(legacy.out)


@pytest.mark.parametrize("how", ["fifo", "directory"])
def test_migrate_refuses_what_is_not_a_regular_file_in_text_and_with_yes(how, tmp_path, cli) -> None:
    """The text report refuses with the reader's line, and ``--yes`` writes nothing (it refused before)."""
    legacy = build_legacy(str(tmp_path))
    line = _damage(os.path.join(os.path.realpath(legacy.checkpoint), "dcp", ".metadata"), how)
    refusal = f"checkpoint.dcp: {line}; FastVideo cannot resume from this checkpoint"
    for extra in ((), ("--yes",)):
        code, out, err = cli(legacy.migrate_argv(*extra))
        assert code == 1, (out, err)
        assert f"  - {refusal}" in out.splitlines() and f"error: {refusal}" in err.splitlines(), (out, err)
        assert "no dcp/.metadata to read" not in out + err, (out, err)
        assert not os.path.lexists(legacy.out)


def test_preflight_says_it(damaged, cli) -> None:
    legacy, _, line, _ = damaged
    code, out, _ = cli(["preflight", "--config", legacy.run.config_path, "--resume", legacy.checkpoint, "--json"])
    doc = json.loads(out)
    dcp = [c for c in doc["checks"] if c["check"] == "dcp" and c["status"] == "fail"]
    assert code == 1 and dcp and _says(dcp[0]["detail"], line), doc["checks"]
