"""Acceptance 4: permission faults, and a cache root that vanishes mid-scan.

We run as root, which ignores file modes, so each command runs in a subprocess with
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped (see ``harness.drop_dac_capabilities``):
it then obeys modes like any owner would. Tests skip with the reason where that is
impossible. Invariants: one clean ``error:`` line naming the file, the right exit code,
no traceback, nothing written, and scans report everything else they could read.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import assert_clean_error, assert_no_traceback, digest_diff, run_cli, run_inproc, tree_digest
from .workspace import MigrationWorkspace, cheap_entries


@pytest.fixture(scope="module")
def ws(migration_workspace) -> MigrationWorkspace:
    """Its own: these tests change the workspace in place (restored after each)."""
    return migration_workspace(private=True)


@contextlib.contextmanager
def mode(path: Path, bits: int) -> Iterator[None]:
    """chmod for the duration of a block (restored so fixtures stay reusable and removable)."""
    old = os.stat(path).st_mode & 0o7777
    os.chmod(path, bits)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):  # an eviction may have removed it
            os.chmod(path, old)


# --------------------------------------------------------------------------- migrate


@pytest.mark.fault("permissions", "migrate into a read-only output location")
@pytest.mark.parametrize("where", ["read-only parent", "read-only existing set (--overwrite)"])
def test_read_only_output(ws: MigrationWorkspace, tmp_path: Path, unprivileged_ok, trials, where: str) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    out = parent / "state"
    if where.startswith("read-only existing"):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from fvconsole.cli import main

            assert main(ws.migrate_args(out)) == 0
        locked, extra = parent, ("--overwrite",)
    else:
        locked, extra = parent, ()
    before = tree_digest(parent)
    ckpt_before = tree_digest(ws.checkpoint)
    with mode(locked, 0o555):
        result = run_cli(ws.migrate_args(out, *extra), unprivileged=True)
    line = assert_clean_error(result, codes=(1,), names=[str(parent), str(out)])
    assert "ermission" in line or "read-only" in line or "writ" in line, line
    assert digest_diff(before, tree_digest(parent)) == [], "a refused migration changed the output location"
    assert digest_diff(ckpt_before, tree_digest(ws.checkpoint)) == []
    trials.add("refused, exit 1")


@pytest.mark.fault("permissions", "unreadable input: metadata.json, run config, manifest")
@pytest.mark.parametrize("victim", ["metadata.json", "config", "manifest"])
def test_unreadable_inputs(ws: MigrationWorkspace, tmp_path: Path, unprivileged_ok, trials, victim: str) -> None:
    path = {"config": ws.config, "manifest": ws.manifest}.get(victim, ws.checkpoint / victim)
    out = tmp_path / "state"
    before = tree_digest(ws.root)
    with mode(path, 0o000):
        result = run_cli(ws.migrate_args(out), unprivileged=True)
    assert_clean_error(result, codes=(1,), names=[path.name])
    assert not out.exists()
    assert digest_diff(before, tree_digest(ws.root)) == []
    trials.add("refused, exit 1")


@pytest.mark.fault("permissions", "unreadable dcp/.metadata: refused, or migrated with a warning naming it")
def test_unreadable_dcp_metadata(ws: MigrationWorkspace, tmp_path: Path, unprivileged_ok, trials) -> None:
    """The legacy DCP key cannot be confirmed; migration-core chose to warn (see reliability-defects.md)."""
    path = ws.checkpoint / "dcp" / ".metadata"
    out = tmp_path / "state"
    before = tree_digest(ws.checkpoint)
    with mode(path, 0o000):
        result = run_cli(ws.migrate_args(out), unprivileged=True)
    assert_no_traceback(result)
    if result.returncode == 0:
        assert ".metadata" in result.stderr and "warning:" in result.stderr, result.describe()
        trials.add("migrated with a warning")
    else:
        assert_clean_error(result, codes=(1,), names=[".metadata"])
        assert not out.exists()
        trials.add("refused, exit 1")
    assert digest_diff(before, tree_digest(ws.checkpoint)) == []


@pytest.mark.fault("permissions", "unreadable checkpoint metadata while listing checkpoints (rest still listed)")
def test_checkpoints_ls_reports_unreadable_and_lists_rest(ws: MigrationWorkspace, tmp_path: Path, unprivileged_ok, trials) -> None:
    out = tmp_path / "output"
    shutil.copytree(ws.checkpoint.parent, out)
    second = out / "checkpoint-4"
    shutil.copytree(out / ws.checkpoint.name, second)
    meta = json.loads((second / "metadata.json").read_text())
    meta["step"] = 4
    (second / "metadata.json").write_text(json.dumps(meta))
    with mode(out / ws.checkpoint.name / "metadata.json", 0o000):
        result = run_cli(["checkpoints", "ls", str(out), "--json"], unprivileged=True)
    assert_no_traceback(result)
    assert result.returncode == 0, result.describe()
    payload = json.loads(result.stdout)
    rows = payload["checkpoints"] if isinstance(payload, dict) else payload
    by_step = {row["step"]: row for row in rows}
    assert set(by_step) == {2, 4}, "a checkpoint with unreadable metadata vanished from the listing"
    assert "metadata.json" in json.dumps(by_step[2]), "the unreadable metadata is not reported"
    assert by_step[4].get("problems") in (None, [], ()), by_step[4]
    trials.add("listed, problem reported")


@pytest.mark.fault("permissions", "unreadable sidecar given to `sidecars verify`")
def test_unreadable_sidecar(ws: MigrationWorkspace, tmp_path: Path, unprivileged_ok, trials) -> None:
    out = tmp_path / "state"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from fvconsole.cli import main

        assert main(ws.migrate_args(out)) == 0
    victim = out / "dataloader_state_rank5.pt"
    with mode(victim, 0o000):
        result = run_cli(ws.verify_args(out), unprivileged=True)
    assert_clean_error(result, codes=(1,), names=[victim.name])
    trials.add("refused, exit 1")


# --------------------------------------------------------------------------- cache


@pytest.fixture
def cache_root(tmp_path: Path) -> Path:
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path / "cache"
    for seed in range(4):
        write_cache_entry(root, seed=seed, num_shards=2, tensor_bytes=1024)
    return root


@pytest.mark.fault("permissions", "unreadable cache entry: `cache ls` lists the rest, `cache evict` evicts the rest (exit 3)")
@pytest.mark.parametrize("what", ["entry dir 000", "manifest 000", "shard 000"])
def test_unreadable_cache_entry(cache_root: Path, unprivileged_ok, trials, what: str) -> None:
    entries = sorted(p for p in cache_root.iterdir())
    victim_entry = entries[0]
    victim = {
        "entry dir 000": victim_entry,
        "manifest 000": victim_entry / "manifest.json",
        "shard 000": victim_entry / "shard0-of-2.safetensors",
    }[what]
    with mode(victim, 0o000):
        ls = run_cli(["cache", "ls", str(cache_root), "--json"], unprivileged=True)
        assert_no_traceback(ls)
        assert ls.returncode == 0, ls.describe()
        payload = json.loads(ls.stdout)
        keys = {e["key"] for e in payload["entries"]}
        assert {p.name for p in entries[1:]} <= keys, "readable entries missing from the listing"
        reported = json.dumps(payload)
        assert victim_entry.name in reported
        text = run_cli(["cache", "ls", str(cache_root)], unprivileged=True)
        assert text.returncode == 0 and "Traceback" not in text.stderr
        evict = run_cli(["cache", "evict", str(cache_root), "--max-gb", "0", "--yes", "--force"], unprivileged=True)
    assert_no_traceback(evict)
    for p in entries[1:]:
        assert not p.exists(), f"readable entry {p.name} not evicted"
    if what == "entry dir 000":
        assert evict.returncode in (0, 3), evict.describe()
        if evict.returncode == 3:
            lines = [ln for ln in evict.stderr.splitlines() if ln.startswith("error:")]
            assert len(lines) == 1 and victim_entry.name in lines[0], evict.describe()
        trials.add(f"rest evicted, exit {evict.returncode}")
    else:
        assert evict.returncode == 0, evict.describe()
        trials.add("all evicted, exit 0")


@pytest.mark.fault("permissions", "cache root unreadable / not a directory / missing")
@pytest.mark.parametrize("shape", ["root 000", "root is a file", "root missing"])
def test_bad_cache_root(cache_root: Path, tmp_path: Path, unprivileged_ok, trials, shape: str) -> None:
    root = cache_root
    ctx: contextlib.AbstractContextManager = contextlib.nullcontext()
    if shape == "root 000":
        ctx = mode(cache_root, 0o000)
    elif shape == "root is a file":
        root = tmp_path / "file-root"
        root.write_text("not a dir")
    else:
        root = tmp_path / "nope"
    with ctx:
        for argv in (["cache", "ls", str(root)], ["cache", "evict", str(root), "--max-gb", "0", "--yes"]):
            result = run_cli(argv, unprivileged=True)
            assert_clean_error(result, codes=(1,), names=[str(root)])
    trials.add("refused, exit 1")


@contextlib.contextmanager
def flapping(root: Path, away: Path) -> Iterator[None]:
    """While the block runs, a thread keeps renaming ``root`` away and back."""
    stop = threading.Event()

    def flapper() -> None:
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                os.rename(root, away)
            with contextlib.suppress(FileNotFoundError):
                os.rename(away, root)

    thread = threading.Thread(target=flapper, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if away.exists():
            os.rename(away, root)


@pytest.mark.fault("permissions", "cache root vanishes (renamed away) while `cache ls` scans 2,000 entries")
def test_root_vanishes_mid_scan(tmp_path: Path, capsys, trials) -> None:
    """A thread renames the root away and back while scans run: every scan either lists
    or fails with one clean error naming the root — whichever moment the root vanished at."""
    root = tmp_path / "cache"
    cheap_entries(root, 2000)
    away = tmp_path / "cache-away"
    with flapping(root, away):
        for _ in range(25):
            result = run_inproc(["cache", "ls", str(root), "--json"], capsys)
            assert_no_traceback(result)
            if result.returncode == 0:
                payload = json.loads(result.stdout)
                assert len(payload["entries"]) <= 2000
                complete = len(payload["entries"]) == 2000 and not payload["errors"]
                trials.add("listed" if complete else "partial listing, errors reported")
            else:
                assert_clean_error(result, codes=(1,), names=[str(root)])
                trials.add("root gone: exit 1")
    assert trials.count == 25


@pytest.mark.fault("permissions", "cache root vanishes (renamed away) while `cache evict --yes` runs")
def test_root_vanishes_mid_eviction(tmp_path: Path, capsys, trials) -> None:
    """Whatever moment the root disappears at: no traceback, no half-deleted entry under its
    key, nothing outside touched, and the next eviction cleans any leftover."""
    away = tmp_path / "cache-away"
    bystander = tmp_path / "bystander"
    cheap_entries(bystander, 3, prefix="bystander")
    bystander_digest = tree_digest(bystander)
    for round_ in range(6):
        root = tmp_path / "cache"
        shutil.rmtree(root, ignore_errors=True)
        keys = cheap_entries(root, 300, prefix=f"v{round_}")
        original = {k: tree_digest(root / k) for k in keys}
        with flapping(root, away):
            result = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--yes", "--json"], capsys)
        assert_no_traceback(result)
        assert result.returncode in (0, 1, 3), result.describe()
        if result.returncode:
            assert_clean_error(result, codes=(1, 3), names=[str(root)])
        for child in root.iterdir():
            if child.name in original:
                assert tree_digest(child) == original[child.name], f"{child.name} half-deleted under its key"
            else:
                assert child.name.startswith(".evicting-"), child.name
        assert tree_digest(bystander) == bystander_digest
        again = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--yes"], capsys)
        assert again.returncode == 0, again.describe()
        assert list(root.iterdir()) == []
        trials.add(f"exit {result.returncode}, next eviction finished the job")
