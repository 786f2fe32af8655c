"""stdout that fails (full, closed, reader gone): the exit code still says what was written.

After a write (sidecars published, entries evicted) a failing output is exit 3 with what was
done on stderr, never exit 1 ("refused, nothing written"); before it, nothing is written.
No traceback and no "Exception ignored" noise at interpreter exit, on any path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import CliResult, cli_env
from .workspace import MigrationWorkspace, cheap_entries

RECEIPT = "migration_receipt.json"


@pytest.fixture(scope="session")  # a lookup in the session's cache: no reason to keep the file in one worker
def ws(migration_workspace) -> MigrationWorkspace:
    return migration_workspace(world=8)


def run_with_stdout(argv: list[str], stdout: str) -> CliResult:
    """``python -m fvconsole argv`` with stdout "full" (/dev/full), "closed" (>&-) or "gone" (a pipe
    whose reader already left)."""
    argv = [str(a) for a in argv]
    preexec = None
    if stdout == "full":
        target = open("/dev/full", "w")  # noqa: SIM115 - closed below
    elif stdout == "closed":
        target = subprocess.DEVNULL
        preexec = lambda: os.close(1)  # noqa: E731 - runs in the child: the CLI starts without fd 1
    elif stdout == "gone":
        read_end, write_end = os.pipe()
        os.close(read_end)
        target = write_end
    else:
        raise ValueError(stdout)
    try:
        proc = subprocess.run([sys.executable, "-m", "fvconsole", *argv], stdout=target, stderr=subprocess.PIPE,
                              env=cli_env(), text=True, timeout=240, preexec_fn=preexec)
    finally:
        if stdout == "full":
            target.close()
        elif stdout == "gone":
            os.close(target)
    return CliResult(tuple(argv), proc.returncode, "", proc.stderr)


def only_line(result: CliResult) -> str:
    """The one stderr line (progress lines aside); no traceback, no exit-time noise."""
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.describe()
    lines = [x for x in result.stderr.splitlines() if x.strip() and not x.startswith("progress:")]
    assert len(lines) == 1, result.describe()
    return lines[0]


def published(out: Path) -> bool:
    return (out / RECEIPT).is_file() and len(list(out.glob("dataloader_state_rank*.pt"))) == 8


@pytest.mark.fault("output", "migrate --yes --json: stdout full, closed or its reader gone after the write")
@pytest.mark.parametrize("stdout", ["full", "closed", "gone"])
def test_migrate_output_failure_after_the_write_is_exit_3(ws, tmp_path, stdout, trials) -> None:
    out = tmp_path / "side"
    result = run_with_stdout(ws.migrate_args(out, "--json"), stdout)
    trials.add(stdout)
    assert result.returncode == 3, result.describe()
    assert published(out)
    reason = {"full": "No space left on device", "closed": "Bad file descriptor", "gone": "Broken pipe"}[stdout]
    assert only_line(result) == (f"error: could not write the output ({reason}: <stdout>); "
                                 f"the migration completed: 8 sidecars and the receipt in {out}")


@pytest.mark.fault("output", "migrate --yes (text): stdout full after the write")
def test_migrate_text_output_to_a_full_disk(ws, tmp_path) -> None:
    out = tmp_path / "side"
    result = run_with_stdout(ws.migrate_args(out), "full")
    line = only_line(result)
    # The report may fill stdout's buffer before the write (then nothing is written) or only at
    # the end; either way the exit code and the line must say which one happened.
    if published(out):
        assert result.returncode == 3 and line.endswith(f"the migration completed: 8 sidecars and the receipt in {out}")
    else:
        assert result.returncode == 1 and line.endswith("; nothing was written") and not out.exists()


@pytest.mark.fault("output", "migrate --yes: stdout closed before anything is printed")
def test_migrate_with_stdout_closed_writes_nothing_it_cannot_report(ws, tmp_path) -> None:
    out = tmp_path / "side"
    result = run_with_stdout(ws.migrate_args(out), "closed")
    assert result.returncode == 1, result.describe()
    assert only_line(result) == "error: could not write the output (Bad file descriptor: <stdout>); nothing was written"
    assert not out.exists()


@pytest.mark.fault("output", "cache evict --yes --json: stdout full or reader gone after the eviction")
@pytest.mark.parametrize("stdout", ["full", "gone"])
def test_evict_output_failure_after_the_eviction_is_exit_3(tmp_path, stdout) -> None:
    root = tmp_path / "cache"
    keys = cheap_entries(root, 3)
    result = run_with_stdout(["cache", "evict", root, "--key", keys[0], "--key", keys[1], "--yes", "--json"], stdout)
    assert result.returncode == 3, result.describe()
    assert sorted(p.name for p in root.iterdir()) == [keys[2]]
    assert only_line(result).endswith(f"; the eviction ran: 2 entries evicted from {root}")


@pytest.mark.fault("output", "refusal under --json with the reader gone (`migrate ... --json | true`)")
def test_broken_pipe_on_an_error_path_keeps_the_refusal(ws, tmp_path) -> None:
    out = tmp_path / "side"
    first = run_with_stdout(ws.migrate_args(out, "--json"), "gone")
    assert first.returncode == 3 and published(out)
    # Again: the set exists, so this is a refusal, whose JSON cannot be delivered either.
    again = run_with_stdout(ws.migrate_args(out, "--json"), "gone")
    assert again.returncode == 1, again.describe()
    line = only_line(again)
    assert line.startswith("error: output_dir: ") and "--overwrite" in line


@pytest.mark.fault("output", "read-only commands with a failing stdout")
def test_read_only_commands(ws, tmp_path) -> None:
    root = tmp_path / "cache"
    cheap_entries(root, 2)
    full = run_with_stdout(["cache", "ls", root, "--json"], "full")
    assert full.returncode == 1
    assert only_line(full) == "error: could not write the output (No space left on device: <stdout>)"
    # A reader that left (`| head`) is not an error for a listing: quiet, exit 0, no noise.
    gone = run_with_stdout(["checkpoints", "ls", ws.checkpoint.parent], "gone")
    assert gone.returncode == 0 and gone.stderr == "", gone.describe()
    helped = run_with_stdout(["--help"], "full")
    assert helped.returncode == 1 and "Exception ignored" not in helped.stderr, helped.describe()


@pytest.mark.fault("output", "usage error under --json with stdout full")
def test_usage_error_with_a_full_stdout(tmp_path) -> None:
    result = run_with_stdout(["cache", "ls", tmp_path, "--json", "--jsno"], "full")
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["error: unrecognized arguments: --jsno (did you mean --json?)",
                                          "try: fvconsole cache ls --help"]
