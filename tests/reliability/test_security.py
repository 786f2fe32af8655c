"""Acceptance 6: malicious pickles, symlinked output dirs, symlinks in the cache, forbidden roots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .harness import (
    assert_clean_error,
    digest_diff,
    run_cli,
    run_cli_no_destruction,
    run_inproc,
    strace_available,
    tree_digest,
    write_malicious_pt,
)
from .workspace import MigrationWorkspace


@pytest.fixture(scope="session")  # a lookup: reliability/conftest.py builds each set once per worker
def good_set(ws: MigrationWorkspace, good_set_of) -> Path:
    return good_set_of(ws)


# --------------------------------------------------------------------------- malicious pickles


@pytest.mark.fault("security", "malicious pickle in a sidecar (.pt) given to `sidecars verify`")
@pytest.mark.parametrize("fmt", ["torch", "pickle"])
@pytest.mark.parametrize("rank", [0, 15])
def test_malicious_sidecar_is_refused_and_never_runs(
    ws: MigrationWorkspace, good_set: Path, tmp_path: Path, capsys, trials, fmt: str, rank: int
) -> None:
    target = tmp_path / "state"
    shutil.copytree(good_set, target)
    marker = tmp_path / "PWNED"
    victim = target / f"dataloader_state_rank{rank}.pt"
    write_malicious_pt(victim, marker, fmt=fmt, rank=rank, world_size=ws.world, step=ws.step)
    before = tree_digest(target)
    result = run_inproc(ws.verify_args(target), capsys)
    assert not marker.exists(), "verify executed the pickle's code"
    assert result.returncode == 1, result.describe()
    assert_clean_error(result, names=[victim.name])
    deep = run_inproc(ws.verify_args(target, "--deep", "--json"), capsys)
    assert deep.returncode == 1 and not marker.exists()
    assert victim.name in deep.stdout
    assert tree_digest(target) == before
    trials.add("refused, code not run")


@pytest.mark.fault("security", "malicious pickle as a checkpoint's rng/dataloader file (`checkpoints ls/show`)")
def test_malicious_files_in_checkpoint_never_run(ws: MigrationWorkspace, tmp_path: Path, capsys, trials) -> None:
    out = tmp_path / "output"
    shutil.copytree(ws.checkpoint.parent, out, symlinks=True)
    ckpt = out / ws.checkpoint.name
    marker = tmp_path / "PWNED"
    write_malicious_pt(ckpt / "rng_state_rank0.pt", marker)
    write_malicious_pt(ckpt / "dataloader_state_rank0.pt", marker, fmt="pickle")
    for argv in (["checkpoints", "ls", str(out), "--json"], ["checkpoints", "show", str(ckpt), "--json"]):
        result = run_inproc(argv, capsys)
        assert "Traceback" not in result.stderr
        assert result.returncode in (0, 1), result.describe()
    assert not marker.exists(), "listing a checkpoint executed a pickle"
    trials.add("code not run")


# --------------------------------------------------------------------------- output dir symlinks


@pytest.mark.fault("security", "migrate --output-dir is a symlink into (or a path inside) the checkpoint")
@pytest.mark.parametrize(
    "shape", ["symlink to checkpoint", "symlink to checkpoint/dcp", "path inside checkpoint", "dotdot into checkpoint",
              "symlink to a dir outside"],
)
def test_output_dir_into_checkpoint_refused(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, shape: str) -> None:
    ckpt_before = tree_digest(ws.checkpoint)
    if shape == "symlink to checkpoint":
        out = tmp_path / "link"
        os.symlink(ws.checkpoint, out)
    elif shape == "symlink to checkpoint/dcp":
        out = tmp_path / "link"
        os.symlink(ws.checkpoint / "dcp", out)
    elif shape == "path inside checkpoint":
        out = ws.checkpoint / "sidecars"
    elif shape == "dotdot into checkpoint":
        out = tmp_path / os.path.relpath(ws.checkpoint, tmp_path) / "state"
        assert ".." in out.parts
    else:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        out = tmp_path / "link"
        os.symlink(elsewhere, out)
    for extra in ((), ("--overwrite",)):
        result = run_inproc(ws.migrate_args(out, *extra), capsys)
        assert_clean_error(result, names=[str(out), "output dir", "output_dir", "--output-dir"])
    assert digest_diff(ckpt_before, tree_digest(ws.checkpoint)) == []
    if shape == "symlink to a dir outside":
        assert list((tmp_path / "elsewhere").iterdir()) == []
    trials.add("refused, checkpoint unchanged")


# --------------------------------------------------------------------------- cache symlinks


def _outside_tree(base: Path) -> Path:
    outside = base / "precious"
    (outside / "sub").mkdir(parents=True)
    (outside / "model.safetensors").write_bytes(b"weights" * 100)
    (outside / "sub" / "notes.txt").write_text("keep me")
    return outside


@pytest.mark.fault("security", "cache entry is a symlink to a directory outside the root")
@pytest.mark.parametrize("selector", [["--max-gb", "0"], ["--older-than", "0s"], ["--invalid"], ["--key", "KEY"]])
def test_entry_symlink_outside_root_never_followed(tmp_path: Path, capsys, trials, selector: list[str]) -> None:
    from fvconsole.demo.cache_builders import make_key, write_cache_entry

    root = tmp_path / "cache"
    write_cache_entry(root, seed=1, num_shards=2)
    outside = _outside_tree(tmp_path)
    key = make_key("symlinked-entry")
    os.symlink(outside, root / key)
    # The outside dir even looks like a cache entry, to tempt a follower.
    write_cache_entry(outside, key=key, num_shards=2)
    before = tree_digest(outside)
    argv = ["cache", "evict", str(root), *[key if s == "KEY" else s for s in selector], "--force", "--yes"]
    result = run_inproc(argv, capsys)
    assert "Traceback" not in result.stderr, result.describe()
    assert result.returncode in (0, 1, 3), result.describe()
    assert digest_diff(before, tree_digest(outside)) == [], "evict deleted files outside the cache root"
    trials.add("outside untouched" + (" (link removed)" if not os.path.lexists(root / key) else " (link kept)"))


@pytest.mark.fault("security", "symlinks inside a cache entry pointing outside the root (file and dir)")
def test_symlinks_inside_entry_never_followed(tmp_path: Path, capsys, trials) -> None:
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path / "cache"
    entry = Path(write_cache_entry(root, seed=2, num_shards=2))
    outside = _outside_tree(tmp_path)
    os.symlink(outside, entry / "escape-dir")
    os.symlink(outside / "model.safetensors", entry / "shard1-of-2.safetensors.tmp")
    os.symlink(outside / "sub", entry / "nested")
    before = tree_digest(outside)
    ls = run_inproc(["cache", "ls", str(root), "--json"], capsys)
    assert ls.returncode == 0, ls.describe()
    result = run_inproc(["cache", "evict", str(root), "--key", entry.name, "--force", "--yes"], capsys)
    assert result.returncode == 0, result.describe()
    assert not os.path.lexists(entry), "entry not evicted"
    assert digest_diff(before, tree_digest(outside)) == [], "evict deleted files outside the cache root"
    trials.add("entry removed, outside untouched")


@pytest.mark.fault("security", "cache root is itself a symlink (evicts through it; the link and sibling dirs untouched)")
def test_root_is_symlink_outside_untouched(tmp_path: Path, capsys, trials) -> None:
    from fvconsole.demo.cache_builders import write_cache_entry

    real_root = tmp_path / "real-cache"
    write_cache_entry(real_root, seed=3, num_shards=2)
    link = tmp_path / "cache-link"
    os.symlink(real_root, link)
    sibling = _outside_tree(tmp_path)
    before = tree_digest(sibling)
    result = run_inproc(["cache", "evict", str(link), "--max-gb", "0", "--yes"], capsys)
    assert result.returncode in (0, 1), result.describe()
    if result.returncode == 1:
        assert_clean_error(result, names=[str(link), "cache-link", "root"])
    assert tree_digest(sibling) == before
    assert link.is_symlink(), "the root symlink itself was removed"
    trials.add("evicted through link" if result.returncode == 0 else "refused")


# --------------------------------------------------------------------------- forbidden roots


@pytest.mark.fault("security", "cache evict on $HOME (real HOME dir, or a symlink to it)")
@pytest.mark.parametrize("via", ["HOME itself", "symlink to HOME", "HOME with trailing slash"])
def test_home_root_refused(tmp_path: Path, trials, via: str) -> None:
    from fvconsole.demo.cache_builders import write_cache_entry

    home = tmp_path / "home" / "user"
    write_cache_entry(home, seed=4, num_shards=2)  # looks like a cache: only the HOME rule can refuse
    (home / ".bashrc").write_text("# precious\n")
    before = tree_digest(home)
    if via == "symlink to HOME":
        root = tmp_path / "link"
        os.symlink(home, root)
        root_arg = str(root)
    else:
        root_arg = str(home) + ("/" if via.endswith("slash") else "")
    for extra in ((), ("--force",)):
        result = run_cli(["cache", "evict", root_arg, "--max-gb", "0", "--yes", *extra], env={"HOME": str(home)})
        assert_clean_error(result, names=["home"])
    assert tree_digest(home) == before
    trials.add("refused")


@pytest.mark.fault("security", "cache evict on / (direct, via symlink, via ..) — deletes blocked by strace as a safety net")
@pytest.mark.parametrize("via", ["/", "symlink to /", "dotdot"])
def test_filesystem_root_refused(tmp_path: Path, trials, via: str) -> None:
    reason = strace_available()
    if reason:
        pytest.skip(f"refusing to point a destructive command at / without the strace safety net: {reason}")
    if via == "/":
        root_arg = "/"
    elif via == "symlink to /":
        os.symlink("/", tmp_path / "slash")
        root_arg = str(tmp_path / "slash")
    else:
        root_arg = str(tmp_path) + "/.." * (len(tmp_path.parts) + 2)
    for extra in ((), ("--force",), ("--yes",), ("--yes", "--force")):
        result = run_cli_no_destruction(["cache", "evict", root_arg, "--max-gb", "0", *extra])
        line = assert_clean_error(result)
        assert "root" in line and "/" in line, line
    trials.add("refused")
