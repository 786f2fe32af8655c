"""One error contract for commands that run and fail (exit 1 or 3), and for usage errors a
command finds after parsing (exit 2).

Every failing command prints its `error:` line on stderr; under --json its one JSON object
carries ``"error"``. A usage error found by a command (no root, no selector, a bad value) is
worded like argparse's own: `error:` then `try: fvconsole <sub> --help`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from migration_runs import build_legacy, plan_for

from fvconsole.cli import main
from fvconsole.core.migration import locked
from fvconsole.demo.cache_builders import make_key, write_cache_entry


def _run(argv: list[str], capsys) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, [line for line in captured.err.splitlines() if line.strip()]


# --------------------------------------------------------------------------- usage errors after parsing


@pytest.mark.parametrize(
    ("argv", "prog"),
    [
        (["cache", "ls"], "fvconsole cache ls"),
        (["cache", "ls", "--json"], "fvconsole cache ls"),
        (["cache", "evict", "{root}"], "fvconsole cache evict"),
        (["cache", "evict", "{root}", "--max-gb", "-1"], "fvconsole cache evict"),
        (["cache", "evict", "{root}", "--key", "XYZ", "--json"], "fvconsole cache evict"),
        (["cache", "evict", "{root}", "--older-than", "7"], "fvconsole cache evict"),
        (["cache", "ls", "{root}", "--count", "2"], "fvconsole cache ls"),
        (["history", "--since", "yesterday"], "fvconsole history"),
        (["fleet", "cache", "ls", "--cache-root", "/x"], "fvconsole fleet cache ls"),
    ],
    ids=["ls-no-root", "ls-no-root-json", "evict-no-selector", "max-gb-negative", "bad-key", "older-than-7",
         "count-without-watch", "since", "fleet-no-nodes"],
)
def test_usage_errors_found_after_parsing_say_try_help(argv, prog, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun: the fleet's usage error comes first anyway
    argv = [a.replace("{root}", str(tmp_path)) for a in argv]
    code, out, err = _run(argv, capsys)
    assert code == 2
    assert len(err) == 2, err
    assert err[0].startswith("error: ") and err[1] == f"try: {prog} --help"
    if "--json" in argv:
        doc = json.loads(out)
        assert isinstance(doc.pop("code"), str)  # a stable code for scripts (issue 38 item 15)
        assert doc == {"error": err[0][len("error: "):]}
    else:
        assert out == ""


def test_a_usage_error_in_a_real_process_says_try_help(tmp_path) -> None:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "FASTVIDEO_WEIGHT_SHARD_CACHE"}
    proc = subprocess.run([sys.executable, "-m", "fvconsole", "cache", "ls"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: no cache root: give ROOT or set FASTVIDEO_WEIGHT_SHARD_CACHE",
                                        "try: fvconsole cache ls --help"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["demo", "--json"], "unrecognized arguments: --json"),  # not "(did you mean --version?)"
        (["cache", "ls", "/x", "--versoin"], "unrecognized arguments: --versoin"),  # --version is the top's
        (["--jurnal=j", "history"], "unrecognized arguments: --jurnal=j (did you mean --journal?)"),
        (["history", "--jurnal", "j"], "unrecognized arguments: --jurnal j (did you mean --journal?)"),
        (["cache", "ls", "/x", "--jsno"], "unrecognized arguments: --jsno (did you mean --json?)"),
    ],
)
def test_suggestions_are_close_and_valid_where_they_stand(argv, expected, capsys) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == f"error: {expected}"


# --------------------------------------------------------------------------- failures: exit 1 and 3


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    legacy = build_legacy(str(tmp_path_factory.mktemp("legacy")))
    locked.execute_migration(plan_for(legacy))
    return legacy


def _flipped_sidecars(tmp: Path, migrated) -> list[str]:
    import shutil

    out = tmp / "sidecars"
    shutil.copytree(migrated.out, out)
    path = out / "dataloader_state_rank3.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return migrated.verify_argv("--json", sidecar_dir=str(out))


def _broken_metadata(tmp: Path, migrated) -> list[str]:
    import shutil

    ckpt = tmp / "checkpoint-5"
    shutil.copytree(migrated.checkpoint, ckpt, symlinks=True)
    (ckpt / "metadata.json").write_text("{not json")
    return ["checkpoints", "show", str(ckpt), "--json"]


def _fleet_caches(tmp: Path) -> str:
    for node in ("a1", "a2"):
        write_cache_entry(tmp / node / "c", make_key("fail"), num_shards=1, status="incomplete", tensor_bytes=64)
    return str(tmp / "{node}" / "c")


def _journal_dir(tmp: Path, _migrated) -> list[str]:
    (tmp / "journal.jsonl").mkdir()
    return ["history", "--journal", str(tmp / "journal.jsonl"), "--json"]


FAILURES: dict[str, tuple[Callable[[Path, object], list[str]], int]] = {
    "sidecars verify": (_flipped_sidecars, 1),
    "checkpoints show": (_broken_metadata, 1),
    "checkpoints ls": (lambda tmp, _m: ["checkpoints", "ls", str(tmp / "missing"), "--json"], 1),
    "migrate": (lambda tmp, m: m.migrate_argv("--json", out=str(tmp / "out"), step=6), 1),
    "cache ls": (lambda tmp, _m: ["cache", "ls", str(tmp / "missing"), "--json"], 1),
    "cache ls --watch": (lambda tmp, _m: ["cache", "ls", str(tmp / "missing"), "--json", "--watch", "0.01",
                                          "--count", "1"], 1),
    "cache evict": (lambda tmp, _m: ["cache", "evict", str(tmp / "missing"), "--max-gb", "1", "--json"], 1),
    "history": (_journal_dir, 1),
    "fleet cache ls": (lambda tmp, _m: ["fleet", "cache", "ls", "--nodes", "a[1-2],nosuch1", "--cache-root",
                                        _fleet_caches(tmp), "--json"], 3),
    "fleet cache ls all failed": (lambda tmp, _m: ["fleet", "cache", "ls", "--nodes", "nosuch[1-2]",
                                                   "--cache-root", _fleet_caches(tmp), "--json"], 1),
    "fleet cache evict": (lambda tmp, _m: ["fleet", "cache", "evict", "--nodes", "a[1-2],nosuch1", "--invalid",
                                           "--cache-root", _fleet_caches(tmp), "--json"], 3),
}


@pytest.mark.parametrize("name", list(FAILURES))
def test_every_failing_command_has_an_error_line_and_a_json_error(name, migrated, tmp_path, srun_on_path,
                                                                   capsys) -> None:
    make, expected = FAILURES[name]
    code, out, err = _run(make(tmp_path, migrated), capsys)
    assert code == expected, (out, err)
    objects = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(objects) == 1, out  # exactly one JSON object, and it says what failed
    error = objects[0].get("error")
    assert isinstance(error, str) and error.strip(), objects[0]
    error_lines = [line for line in err if line.startswith("error: ")]
    assert len(error_lines) == 1, err
    assert "Traceback" not in "\n".join(err)


def test_failed_verify_keeps_its_report_in_the_json(migrated, tmp_path, capsys) -> None:
    code, out, err = _run(_flipped_sidecars(tmp_path, migrated), capsys)
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["problems"]
    assert len(doc["problems"]) == 2 and doc["error"].startswith("verification failed (2 problems); first: ")
    assert err == [f"error: {doc['error']}"]
