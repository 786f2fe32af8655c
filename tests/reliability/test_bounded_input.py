"""Issue 10 (items 6, 8, 9, 11, 12): every input is read in bounded time and memory, and trusted no further than checked.

Each case drives the real CLI (or the console's core calls) on a real workspace: YAML alias bombs,
FIFOs and ``/dev/zero`` where a file is expected, deeply nested JSON, absurd integers in the
manifest, and Parquet row groups that disagree with the manifest. Cases that would hang or
exhaust memory on a defective build run in a subprocess with a timeout and an address-space
cap, so a regression fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from .harness import CliResult, assert_clean_error, cli_env, run_inproc, tree_digest
from .strategies import fingerprint
from .workspace import MigrationWorkspace

#: Far more than a correct run needs (well under 10 s even on a loaded 2-core CI box).
HANG_TIMEOUT = 60
#: A correct run needs ~1 GB of address space (the torch import); a defective one reads on
#: (``/dev/zero``) or expands an alias bomb until it hits this and dies with MemoryError.
ADDRESS_SPACE_CAP = 3 << 30


@pytest.fixture(scope="module")
def ws(migration_workspace) -> MigrationWorkspace:
    """Its own: these tests change the workspace in place (restored after each)."""
    return migration_workspace(private=True)


@pytest.fixture(scope="module")
def good_set(ws: MigrationWorkspace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified sidecar set (written by the real CLI) to damage copies of."""
    out = tmp_path_factory.mktemp("bounded-set") / "state"
    result = run_bounded(ws.migrate_args(out))
    assert result.returncode == 0, result.describe()
    return out


def _cap_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def run_bounded(argv: Sequence[str], timeout: float = HANG_TIMEOUT) -> CliResult:
    """``python -m fvconsole argv`` with a timeout and an address-space cap; a hang fails the test."""
    argv = tuple(str(a) for a in argv)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "fvconsole", *argv], env=cli_env(), capture_output=True, text=True,
            timeout=timeout, preexec_fn=_cap_address_space,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"fvconsole {' '.join(argv)[:300]} still running after {timeout} s (hung or unbounded)")
    assert time.monotonic() - started < timeout
    return CliResult(argv, proc.returncode, proc.stdout, proc.stderr)


def with_config(ws: MigrationWorkspace, args: list[str], config: Path) -> list[str]:
    args = list(args)
    args[args.index("--config") + 1] = str(config)
    return args


def fresh_copy(good_set: Path, tmp_path: Path) -> Path:
    target = tmp_path / "state"
    shutil.copytree(good_set, target)
    return target


# --------------------------------------------------------------------------- 6: YAML alias bombs


def _nested_alias_lines(levels: int, fan: int, collection: str) -> list[str]:
    """``levels`` anchors, each ``fan`` aliases of the previous: fan**levels values when expanded."""
    if collection == "list":
        lines = [f"l0: &l0 [{', '.join(['x'] * fan)}]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]" for i in range(1, levels)]
    else:
        lines = [f"l0: &l0 {{{', '.join(f'k{j}: x' for j in range(fan))}}}"]
        lines += [f"l{i}: &l{i} {{{', '.join(f'k{j}: *l{i - 1}' for j in range(fan))}}}" for i in range(1, levels)]
    return lines


def _merge_bomb_lines(levels: int, fan: int) -> list[str]:
    """``<<`` merge keys: PyYAML's flatten_mapping copies fan**level key/value pairs."""
    lines = [f"m0: &m0 {{{', '.join(f'k{j}: x' for j in range(fan))}}}"]
    lines += [f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * fan)}]}}" for i in range(1, levels)]
    return lines


def _bomb_config(ws: MigrationWorkspace, path: Path, lines: list[str]) -> Path:
    """The workspace's real config with a bomb appended (the bomb is where a real config keeps anchors)."""
    text = ws.config.read_text() + "bomb:\n" + "".join(f"  {line}\n" for line in lines)
    path.write_text(text)
    assert len(text.encode()) < 64 * 1024  # a small file: the danger is in the expansion
    return path


BOMBS = {
    "nested list aliases (10**9 values)": lambda: _nested_alias_lines(9, 10, "list"),
    "nested mapping aliases (10**9 values)": lambda: _nested_alias_lines(9, 10, "map"),
    "merge keys (<<: [*m, *m, ...], 10**8 pairs)": lambda: _merge_bomb_lines(8, 10),
}


@pytest.mark.fault("denial of service", "run config YAML alias bomb (nested aliases, merge keys): refused in bounded time")
@pytest.mark.parametrize("name", list(BOMBS))
def test_yaml_alias_bomb_is_refused_quickly(ws: MigrationWorkspace, tmp_path: Path, trials, name: str) -> None:
    config = _bomb_config(ws, tmp_path / "bomb.yaml", BOMBS[name]())
    before = tree_digest(ws.root)
    result = run_bounded(with_config(ws, ws.migrate_args(tmp_path / "out"), config))
    line = assert_clean_error(result, names=[str(config)])
    assert "alias" in line, line
    assert not (tmp_path / "out").exists()
    assert tree_digest(ws.root) == before
    trials.add("refused, exit 1")


@pytest.mark.fault("denial of service", "alias bomb in a --set override value: refused in bounded time")
def test_yaml_alias_bomb_in_an_override_is_refused(ws: MigrationWorkspace, tmp_path: Path, trials) -> None:
    levels = ["&a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    override = f"tracker.bomb=[{', '.join(levels)}]"
    result = run_bounded(ws.migrate_args(tmp_path / "out", "--set", override))
    line = assert_clean_error(result, names=["tracker.bomb"])
    assert "alias" in line, line
    trials.add("refused, exit 1")


def test_plain_anchors_and_merge_keys_still_load(ws: MigrationWorkspace, tmp_path: Path, capsys) -> None:
    """The bound must not refuse ordinary YAML reuse: a config written with anchors migrates as before."""
    doc = yaml.safe_load(ws.config.read_text())
    data = doc["training"]["data"]
    text = ws.config.read_text().replace("training:\n", "defaults: &defaults\n  log_every: 10\n  keep: [1, 2, 3]\ntraining:\n", 1)
    text += "extra:\n  a:\n    <<: *defaults\n    log_every: 20\n  b: *defaults\n  c: [*defaults, *defaults]\n"
    config = tmp_path / "anchored.yaml"
    config.write_text(text)
    loaded = yaml.safe_load(text)
    assert loaded["training"]["data"] == data and loaded["extra"]["a"]["log_every"] == 20
    result = run_inproc(with_config(ws, ws.migrate_args(tmp_path / "out", yes=False), config), capsys)
    assert result.returncode == 0, result.describe()


# --------------------------------------------------------------------------- 8: FIFOs never hang


@contextmanager
def fifo_in_place_of(path: Path) -> Iterator[Path]:
    """Temporarily replace ``path`` with a FIFO (the original is restored)."""
    aside = path.with_name(path.name + ".aside")
    os.rename(path, aside)
    os.mkfifo(path)
    try:
        yield path
    finally:
        os.unlink(path)
        os.rename(aside, path)


@pytest.mark.fault("denial of service", "FIFO as migration_receipt.json or as a rank sidecar (`sidecars verify`)")
@pytest.mark.parametrize("victim", ["migration_receipt.json", "dataloader_state_rank3.pt"])
def test_fifo_in_the_sidecar_dir_does_not_hang_verify(ws, good_set: Path, tmp_path: Path, trials, victim: str) -> None:
    target = fresh_copy(good_set, tmp_path)
    (target / victim).unlink()
    os.mkfifo(target / victim)
    result = run_bounded(ws.verify_args(target))
    line = assert_clean_error(result, names=[victim])
    assert "FIFO" in line, line
    trials.add("refused, exit 1")


def _parquet_files(ws: MigrationWorkspace) -> list[Path]:
    return sorted(ws.dataset.rglob("*.parquet"))


@pytest.mark.fault("denial of service", "FIFO as a dataset Parquet file (`sidecars verify --deep`)")
def test_fifo_parquet_does_not_hang_deep_verify(ws, good_set: Path, tmp_path: Path, trials) -> None:
    victim = _parquet_files(ws)[0]
    with fifo_in_place_of(victim):
        result = run_bounded(ws.verify_args(good_set, "--deep"))
    line = assert_clean_error(result, names=[victim.name])
    assert "FIFO" in line, line
    trials.add("refused, exit 1")


def _release_fifos(fifos: Sequence[Path]) -> None:
    """Unblock a reader stuck in open() on a FIFO (open the write end, close it: EOF)."""
    for fifo in fifos:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        os.close(fd)


def call_guarded(fn: Callable[[], Any], fifos: Sequence[Path], timeout: float = HANG_TIMEOUT) -> Any:
    """``fn()`` in a thread; if it blocks on one of ``fifos``, release it and fail the test."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        _release_fifos(fifos)
        thread.join(10)
        pytest.fail(f"blocked for {timeout} s opening a FIFO")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _plan(ws: MigrationWorkspace) -> Any:
    from fvconsole.core.migration.verify import recompute_plan

    plan, problems, _ = recompute_plan(str(ws.config), str(ws.checkpoint))
    assert plan is not None, problems
    return plan


@pytest.mark.fault("denial of service", "FIFO as a dataset Parquet file (console next-sample-id column)")
def test_fifo_parquet_does_not_hang_the_console_next_ids(ws: MigrationWorkspace, trials) -> None:
    from fvconsole.core.migration.sample_ids import next_sample_ids

    plan = _plan(ws)
    fifos = _parquet_files(ws)
    with fifo_in_place_of(fifos[0]), fifo_in_place_of(fifos[1]), fifo_in_place_of(fifos[2]), fifo_in_place_of(fifos[3]):
        result = call_guarded(lambda: next_sample_ids(plan), fifos)
    assert any("FIFO" in p for p in result.problems), result
    assert all(value is None for value in result.ids.values()), result.ids
    trials.add("ids not shown, note says why")


# --------------------------------------------------------------------------- 9: unbounded reads


@pytest.mark.fault("denial of service", "migration_receipt.json symlinked to /dev/zero (`sidecars verify`)")
def test_receipt_on_dev_zero_is_refused(ws, good_set: Path, tmp_path: Path, trials) -> None:
    target = fresh_copy(good_set, tmp_path)
    (target / "migration_receipt.json").unlink()
    (target / "migration_receipt.json").symlink_to("/dev/zero")
    result = run_bounded(ws.verify_args(target))
    line = assert_clean_error(result, names=["migration_receipt.json"])
    assert "character device" in line, line
    trials.add("refused, exit 1")


@pytest.mark.fault("denial of service", "deeply nested migration_receipt.json (`sidecars verify`): one-line error, no RecursionError")
def test_deeply_nested_receipt_is_a_one_line_error(ws, good_set: Path, tmp_path: Path, capsys, trials) -> None:
    target = fresh_copy(good_set, tmp_path)
    (target / "migration_receipt.json").write_text("[" * 100_000 + "]" * 100_000)
    result = run_inproc(ws.verify_args(target), capsys)
    line = assert_clean_error(result, names=["migration_receipt.json"])
    assert "nested" in line, line
    trials.add("refused, exit 1")


@pytest.mark.fault("denial of service", "deeply nested value in metadata.json's config (mismatch report): one-line error")
@pytest.mark.parametrize("command", ["migrate", "checkpoints show"])
def test_deeply_nested_metadata_config_is_a_one_line_error(ws, tmp_path: Path, capsys, trials, command: str) -> None:
    """Deep enough for Python's json to parse, too deep for the recursive config comparison."""
    path = ws.checkpoint / "metadata.json"
    original = path.read_bytes()
    doc = json.loads(original)
    nested: Any = 42
    for _ in range(700):
        nested = [nested]
    doc["config"]["training"]["data"]["seed"] = nested
    if command == "migrate":
        argv = ws.migrate_args(tmp_path / "out")
    else:
        argv = ["checkpoints", "show", str(ws.checkpoint), "--config", str(ws.config)]
    try:
        path.write_text(json.dumps(doc))
        result = run_inproc(argv, capsys)
    finally:
        path.write_bytes(original)
    line = assert_clean_error(result, names=["metadata.json"])
    assert "nested" in line, line
    assert not (tmp_path / "out").exists()
    trials.add("refused, exit 1")


# --------------------------------------------------------------------------- 11: absurd manifest integers

ABSURD = (
    ("rows", 0, 10**400),
    ("rows", 31, 2**64),
    ("sample_start", 3, 10**400),
    ("file_size", 0, 10**400),
    ("file_mtime_ns", 5, -(10**400)),
    ("row_group", 1, 2**63),
    ("total_rows", None, 10**400),
    ("version", None, 10**400),
)


@pytest.mark.fault("bad values", "manifest integers beyond 64 bits (rows=10**400, huge sample_start/file_size/row_group/total_rows)")
@pytest.mark.parametrize("field,index,value", ABSURD, ids=[f"{f}[{i}]" for f, i, _ in ABSURD])
def test_absurd_manifest_integers_are_one_line_errors(ws, tmp_path: Path, capsys, trials, field, index, value) -> None:
    original = ws.manifest.read_bytes()
    doc = json.loads(original)
    if index is None:
        doc[field] = value
    else:
        doc["row_groups"][index][field] = value
    doc["fingerprint"] = fingerprint(doc["row_groups"])  # a consistent manifest, only the value is absurd
    try:
        ws.manifest.write_text(json.dumps(doc))
        result = run_inproc(ws.migrate_args(tmp_path / "out"), capsys)
    finally:
        ws.manifest.write_bytes(original)
    line = assert_clean_error(result, names=[ws.manifest.name])
    assert field in line, line
    assert len(line) < 400, f"error line carries the absurd value verbatim ({len(line)} chars)"
    assert not (tmp_path / "out").exists()
    trials.add("refused, exit 1")


# --------------------------------------------------------------------------- 12: deep verify trusts the manifest


@contextmanager
def regrouped_dataset(ws: MigrationWorkspace, sizes: Sequence[int]) -> Iterator[list[Path]]:
    """Rewrite every Parquet file with the same rows (same ids, same order) in row groups of ``sizes``.

    The manifest still lists the original row groups: every sample after the first changed
    group is at another (row group, offset) than the manifest says.
    """
    import pyarrow.parquet as pq

    files = _parquet_files(ws)
    saved = {path: path.read_bytes() for path in files}
    try:
        for path in files:
            table = pq.read_table(path)
            assert table.num_rows == sum(sizes)
            with pq.ParquetWriter(path, table.schema) as writer:
                start = 0
                for size in sizes:
                    writer.write_table(table.slice(start, size), row_group_size=size)
                    start += size
        yield files
    finally:
        for path, data in saved.items():
            path.write_bytes(data)


SHIFTED = (11, 10, 10, 10, 10, 10, 10, 9)  # same count and total as the manifest's 8 x 10


@pytest.mark.fault("integrity", "`sidecars verify --deep` when Parquet row groups are longer/shorter than the manifest says")
def test_deep_verify_checks_row_groups_against_the_manifest(ws, good_set: Path, capsys, trials) -> None:
    before = run_inproc(ws.verify_args(good_set, "--deep", "--json"), capsys)
    assert before.returncode == 0, before.describe()
    with regrouped_dataset(ws, SHIFTED) as files:
        result = run_inproc(ws.verify_args(good_set, "--deep"), capsys)
    line = assert_clean_error(result, names=[f.name for f in files])
    assert "row group" in line and "manifest" in line, line
    trials.add("refused, exit 1")


@pytest.mark.fault("integrity", "console next-sample-id column when Parquet row groups disagree with the manifest")
def test_console_next_ids_check_row_groups_against_the_manifest(ws: MigrationWorkspace, trials) -> None:
    from fvconsole.core.migration.sample_ids import next_sample_ids

    plan = _plan(ws)
    good = next_sample_ids(plan)
    # Expected ids come from the builder's naming rule, not from the code under test.
    for cursor in plan.ranks:
        if cursor.next_row_group is not None and cursor.next_row_group >= 0:
            assert good.ids[cursor.rank] == f"sample-{cursor.next_sample_index:06d}"
    with regrouped_dataset(ws, SHIFTED):
        shifted = next_sample_ids(plan)
    assert any("row group" in p for p in shifted.problems), shifted
    assert all(value is None for value in shifted.ids.values()), "ids shown from row groups the manifest does not describe"
    trials.add("ids not shown, note says why")
