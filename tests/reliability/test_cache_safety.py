"""Issue 10 (cache): mounts inside entries, the real home and system roots, deep trees, huge numbers.

Real mounts (``mount --bind``, tmpfs; skipped where mounting is not permitted), real
1500-deep directory chains, real environment variables through the real CLI.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import resource
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from .harness import (
    assert_clean_error,
    assert_no_traceback,
    run_cli,
    run_cli_no_destruction,
    run_inproc,
    strace_available,
    tree_digest,
)

DAY = 86400.0
DEEP = 1500  # deeper than Python's recursion limit (1000), as the issue reproduced
ENV_MAX_GB = "FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB"
SETTINGS = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture],
                    phases=[Phase.explicit, Phase.generate])


def _entry(root: Path, seed: int, age_days: float = 3.0) -> Path:
    from fvconsole.demo.cache_builders import write_cache_entry

    return Path(write_cache_entry(root, seed=seed, num_shards=2, tensor_bytes=1024,
                                  last_used=time.time() - age_days * DAY))


def _outside(base: Path) -> Path:
    """Precious data outside the cache root, with a subdirectory (what rm -rf would walk)."""
    outside = base / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "precious.txt").write_text("keep me\n")
    (outside / "sub" / "more.bin").write_bytes(os.urandom(2048))
    return outside


# --------------------------------------------------------------------------- 1. mounts


def _mount_case(case: str, tmp_path: Path, mount) -> tuple[Path, str, Path]:
    """Build the case; return (root, key, outside tree that must survive)."""
    root = tmp_path / "cache"
    _entry(root, seed=1)  # an ordinary entry: evicted as usual around the mounted one
    entry = _entry(root, seed=2)
    outside = _outside(tmp_path)
    if case == "bind mount of a directory (same filesystem)":
        (entry / "mnt").mkdir()
        mount(["--bind", str(outside)], entry / "mnt")
    elif case == "tmpfs (another filesystem)":
        (entry / "mnt").mkdir()
        mount(["-t", "tmpfs", "-o", "size=1m", "tmpfs"], entry / "mnt")
        shutil.copytree(outside, entry / "mnt", dirs_exist_ok=True)
        outside = entry / "mnt"  # the tmpfs content is what must survive
    elif case == "bind mount deep inside the entry":
        (entry / "a" / "b" / "mnt").mkdir(parents=True)
        mount(["--bind", str(outside)], entry / "a" / "b" / "mnt")
    elif case == "bind mount of a file over a file":
        mount(["--bind", str(outside / "precious.txt")], entry / "manifest.json")
    elif case == "the entry itself is a mount point":
        mount(["--bind", str(_entry(tmp_path / "elsewhere", seed=2))], entry)
        outside = tmp_path / "elsewhere"
    elif case == "leftover .evicting-* with a bind mount":
        hidden = root / f".evicting-{entry.name}-4194301"  # no such pid: an evictor that died
        entry.rename(hidden)
        os.utime(hidden, (time.time() - DAY, time.time() - DAY))
        (hidden / "mnt").mkdir()
        mount(["--bind", str(outside)], hidden / "mnt")
    return root, entry.name, outside


MOUNT_CASES = ["bind mount of a directory (same filesystem)", "tmpfs (another filesystem)",
               "bind mount deep inside the entry", "bind mount of a file over a file",
               "the entry itself is a mount point", "leftover .evicting-* with a bind mount"]


@pytest.mark.fault("security", "mount point inside a cache entry or leftover (`cache evict --yes --force`)")
@pytest.mark.parametrize("case", MOUNT_CASES)
def test_eviction_never_crosses_a_mount(tmp_path: Path, mounter, capsys, trials, case: str) -> None:
    root, key, outside = _mount_case(case, tmp_path, mounter)
    before = tree_digest(outside)
    ls = run_inproc(["cache", "ls", str(root), "--json"], capsys)
    preview = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--invalid", "--force", "--json"], capsys)
    result = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--invalid", "--force", "--yes", "--json"],
                        capsys)
    assert tree_digest(outside) == before, "eviction deleted files behind a mount point"
    assert result.returncode == 0, result.describe()
    assert ls.returncode == 0 and preview.returncode == 0, ls.describe() + preview.describe()
    listed = json.loads(ls.stdout)
    assert [m for e in listed["entries"] + listed["leftovers"] for m in e.get("mounts", [])], \
        f"cache ls does not report the mount point: {listed}"
    skipped = {s["key"]: s["reason"] for s in json.loads(preview.stdout)["skipped"]}
    assert "mount point" in skipped.get(key, ""), f"the preview does not say so: {skipped}"
    payload = json.loads(result.stdout)
    assert [e["key"] for e in payload["evict"]] != [] and key not in [e["key"] for e in payload["evict"]]
    assert {p.name for p in root.iterdir()} == {key} or {p.name for p in root.iterdir()} == {
        f".evicting-{key}-4194301"}, "the mounted entry was touched (renamed) or the other one kept"
    trials.add("skipped, outside untouched")


@pytest.mark.fault("security", "mount appears inside (or over) an entry after the plan (the re-check refuses it)")
@pytest.mark.parametrize("where", ["inside", "over the entry"])
def test_mount_after_the_plan_is_that_entries_failure(tmp_path: Path, mounter, trials, where: str) -> None:
    from fvconsole.core.cache import EvictionSelectors, execute_eviction, plan_eviction, scan_cache

    root = tmp_path / "cache"
    keys = [_entry(root, seed=s).name for s in (1, 2, 3)]
    outside = _outside(tmp_path)
    plan = plan_eviction(scan_cache(root), EvictionSelectors(keys=tuple(keys)))
    assert len(plan.evict) == 3
    victim = root / keys[1]
    if where == "inside":
        (victim / "mnt").mkdir()
        mounter(["--bind", str(outside)], victim / "mnt")
    else:  # a copy of the entry elsewhere, mounted over it: same manifest, so only the mount differs
        shutil.copytree(victim, outside / victim.name, copy_function=shutil.copy2)
        mounter(["--bind", str(outside / victim.name)], victim)
    before = tree_digest(outside)
    result = execute_eviction(plan)
    assert tree_digest(outside) == before, "eviction deleted files behind a mount point"
    assert sorted(e.key for e in result.evicted) == sorted([keys[0], keys[2]])
    assert len(result.errors) == 1 and keys[1] in result.errors[0] and "mount point" in result.errors[0]
    assert (victim / "manifest.json").is_file(), "nothing of the entry may be removed (not even renamed)"
    trials.add("refused, outside untouched")


@pytest.mark.fault("security", "mount appears while the entry is being removed (remover never descends into it)")
@pytest.mark.parametrize("kind", ["bind", "tmpfs"])
def test_remover_never_descends_into_another_mount(tmp_path: Path, mounter, trials, kind: str) -> None:
    from fvconsole.core.cache.evict import PartialRemoval, remove_tree

    tree = tmp_path / "cache" / ".evicting-0123456789abcdef-1"
    (tree / "a" / "mnt").mkdir(parents=True)
    (tree / "a" / "file.bin").write_bytes(b"x" * 100)
    outside = _outside(tmp_path)
    if kind == "bind":
        mounter(["--bind", str(outside)], tree / "a" / "mnt")
    else:
        mounter(["-t", "tmpfs", "-o", "size=1m", "tmpfs"], tree / "a" / "mnt")
        shutil.copytree(outside, tree / "a" / "mnt", dirs_exist_ok=True)
        outside = tree / "a" / "mnt"
    before = tree_digest(outside)
    with pytest.raises(PartialRemoval) as info:
        remove_tree(str(tree))
    assert tree_digest(outside) == before
    assert "mount point" in info.value.strerror and info.value.filename == "a/mnt"
    assert info.value.freed == 100 and not (tree / "a" / "file.bin").exists()
    trials.add("not descended")


# --------------------------------------------------------------------------- 2. dangerous roots


@pytest.mark.fault("security", "cache evict on the real home directory while $HOME points elsewhere or is unset")
@pytest.mark.parametrize("home_env", ["elsewhere", "unset", "tilde with HOME elsewhere"])
def test_real_home_is_refused_whatever_HOME_says(tmp_path: Path, monkeypatch, capsys, trials, home_env) -> None:
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    if home_env == "unset":
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", str(tmp_path))
    root = "~" + pwd.getpwuid(os.getuid()).pw_name if home_env.startswith("tilde") else real_home
    # A dry run is enough to tell (nothing is deleted either way); --force so that only the
    # home rule can refuse. The --yes run below has strace failing every delete as a net.
    result = run_inproc(["cache", "evict", root, "--max-gb", "0", "--force"], capsys)
    assert_clean_error(result, names=["home"])
    if home_env == "elsewhere" and strace_available() is None:
        env = {"HOME": str(tmp_path)}
        assert_clean_error(run_cli_no_destruction(["cache", "evict", real_home, "--max-gb", "0", "--force",
                                                   "--yes"], env=env), names=["home"])
    trials.add("refused")


SYSTEM_ROOTS = ["/etc", "/usr", "/usr/lib", "/bin", "/var", "/tmp", "/dev", "/proc", "/sys", "/run", "/boot"]


@pytest.mark.fault("security", "cache evict on a system directory (/etc, /usr, /var, /tmp, /dev, ...) with --force")
def test_system_directories_are_refused_even_with_force(capsys, trials) -> None:
    for root in SYSTEM_ROOTS:
        if not os.path.isdir(root):
            continue
        result = run_inproc(["cache", "evict", root, "--max-gb", "0", "--invalid", "--force"], capsys)
        line = assert_clean_error(result, names=[root])
        assert "system directory" in line or "filesystem root" in line, line
        trials.add("refused")


# --------------------------------------------------------------------------- 3. deep trees


def _deep_chain(top: Path, depth: int = DEEP) -> None:
    """``top/d/d/.../d`` with a file at the bottom, built through fds (the path is too long)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("bottom.bin", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as fh:
            fh.write(b"z" * 10)
    finally:
        os.close(fd)


@pytest.fixture
def rm_deep(tmp_path: Path) -> Iterator[None]:
    """Remove what a failing test left with rm(1): pytest's own cleanup recurses and would fail."""
    yield
    subprocess.run(["rm", "-rf", "--one-file-system", str(tmp_path / "cache")], capture_output=True, check=False)


@pytest.fixture
def few_fds() -> Iterator[None]:
    """At most 256 open files while the test runs: a deep tree must not need one fd per level."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, soft), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.fault("hostile input", f"{DEEP}-deep directory chain inside a cache entry or leftover (`cache ls`/`evict`)")
@pytest.mark.parametrize("where", ["entry", "leftover"])
def test_deep_tree_is_evicted_without_recursion(tmp_path: Path, capsys, trials, rm_deep, few_fds,
                                                where: str) -> None:
    root = tmp_path / "cache"
    deep = _entry(root, seed=1)
    plain = _entry(root, seed=2)
    _deep_chain(deep)
    os.utime(deep, (time.time() - DAY, time.time() - DAY))  # not "modified within the grace period"
    if where == "leftover":
        hidden = root / f".evicting-{deep.name}-4194301"
        deep.rename(hidden)
        os.utime(hidden, (time.time() - DAY, time.time() - DAY))
    started = time.monotonic()
    ls = run_inproc(["cache", "ls", str(root), "--json"], capsys)
    assert ls.returncode == 0 and time.monotonic() - started < 5, ls.describe()
    result = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--yes"], capsys)
    assert_no_traceback(result)
    assert result.returncode == 0, result.describe()
    assert sorted(os.listdir(root)) == [], f"left behind: {os.listdir(root)}"
    assert not plain.exists()
    trials.add("evicted")


@pytest.mark.fault("hostile input", "one entry cannot be removed: the others are still evicted (exit 3, per-entry error)")
def test_one_bad_entry_is_that_entrys_failure(tmp_path: Path, capsys, trials, rm_deep, pin_after_check) -> None:
    root = tmp_path / "cache"
    deep, stuck, plain = (_entry(root, seed=s) for s in (1, 2, 3))
    _deep_chain(deep)
    os.utime(deep, (time.time() - DAY, time.time() - DAY))
    # Immutable right after the removability check passed (before it, the entry would be skipped).
    pin_after_check(stuck, "shard0-of-2.safetensors")
    result = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--yes", "--json"], capsys)
    assert_clean_error(result, codes=(3,), names=[stuck.name])
    payload = json.loads(result.stdout)
    assert sorted(e["key"] for e in payload["evict"]) == sorted([deep.name, plain.name])
    assert len(payload["errors"]) == 1 and stuck.name in payload["errors"][0]
    # Its leftover (our own pid: --force) is now skipped before anything of it is touched (D29).
    again = run_inproc(["cache", "evict", str(root), "--max-gb", "0", "--force", "--yes", "--json"], capsys)
    assert again.returncode == 0, again.describe()
    [skip] = json.loads(again.stdout)["skipped"]
    assert skip["key"] == stuck.name and skip["reason"].endswith("/shard0-of-2.safetensors (immutable (chattr +i))")
    trials.add("exit 3, others evicted")


# --------------------------------------------------------------------------- 4. numbers


@pytest.fixture
def small_cache(tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    _entry(root, seed=1)
    return root


@pytest.mark.fault("hostile input", f"${ENV_MAX_GB}=1e308 (`cache ls`, `cache evict --max-gb`)")
@pytest.mark.parametrize("value", ["1e308", "1e30", "9" * 400, "inf", "-1", "nan"])
def test_huge_cap_in_the_environment(small_cache: Path, trials, value: str) -> None:
    env = {ENV_MAX_GB: value}
    ls = run_cli(["cache", "ls", str(small_cache)], env=env)
    assert_no_traceback(ls)
    assert ls.returncode == 0 and "cap unknown" in ls.stdout and ENV_MAX_GB in ls.stdout, ls.describe()
    ls_json = run_cli(["cache", "ls", str(small_cache), "--json"], env=env)
    doc = json.loads(ls_json.stdout)
    assert doc["cap_bytes"] is None and ENV_MAX_GB in doc["cap_error"], ls_json.describe()
    evict = run_cli(["cache", "evict", str(small_cache), "--max-gb"], env=env)
    assert_clean_error(evict, codes=(1,), names=[ENV_MAX_GB])
    trials.add("one-line error")


@pytest.mark.fault("hostile input", "huge or malformed numbers in --max-gb, --older-than, --grace")
@pytest.mark.parametrize("argv, flag", [
    (["--max-gb", "1e308"], "--max-gb"),
    (["--max-gb", "1e19"], "--max-gb"),
    (["--max-gb", "9" * 5000], "--max-gb"),
    (["--older-than", "9" * 400 + "w"], "--older-than"),
    (["--older-than", "99999999999w"], "--older-than"),
    (["--key", "0123456789abcdef", "--grace", "9" * 300 + "d"], "--grace"),
])
def test_huge_numbers_on_the_command_line(small_cache: Path, capsys, trials, argv: list[str], flag: str) -> None:
    before = tree_digest(small_cache)
    result = run_inproc(["cache", "evict", str(small_cache), *argv, "--yes"], capsys)
    line = assert_clean_error(result, codes=(2,), names=[flag])
    assert len(line) < 300, f"the error line echoes the whole value: {line[:100]}..."
    assert tree_digest(small_cache) == before
    trials.add("usage error")


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**400), max_value=10**400).map(str),
    st.from_regex(r"[0-9]{1,400}(\.[0-9]{0,5})?([eE][+-]?[0-9]{1,4})?", fullmatch=True),
    st.text(max_size=30),
)


@pytest.mark.fault("hostile input", "any number as --max-gb / $FASTVIDEO_WEIGHT_SHARD_CACHE_MAX_GB / a duration")
@SETTINGS
@given(number=NUMBERS, unit=st.sampled_from(["s", "m", "h", "d", "w"]))
@example(number="1e308", unit="w")
@example(number="-1e-320", unit="s")
def test_any_number_is_a_result_or_a_one_line_error(small_cache: Path, capsys, monkeypatch, trials,
                                                     number: str, unit: str) -> None:
    # What argv and the environment can carry: no NUL, no lone surrogates.
    number = number.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    before = tree_digest(small_cache)
    # "--flag=value": a value starting with "-" is then never taken for an option by argparse.
    # An entry that exists: an absent --key is refused before --grace is looked at (issue 29 item 15).
    key = sorted(p.name for p in small_cache.iterdir() if re.fullmatch(r"[0-9a-f]{16}", p.name))[0]
    for argv in ([f"--max-gb={number}"], [f"--older-than={number}{unit}"],
                 ["--key", key, f"--grace={number}{unit}"]):
        result = run_inproc(["cache", "evict", str(small_cache), *argv, "--json"], capsys)
        if result.returncode != 0:
            assert_clean_error(result, codes=(2,), names=[argv[-1].split("=")[0]])
    with monkeypatch.context() as patch:
        patch.setenv(ENV_MAX_GB, number)
        for argv in (["ls"], ["evict", "--max-gb"]):
            result = run_inproc(["cache", argv[0], str(small_cache), *argv[1:], "--json"], capsys)
            if result.returncode != 0:
                assert_clean_error(result, codes=(1,), names=[ENV_MAX_GB])
    assert tree_digest(small_cache) == before  # dry runs only
    trials.add("ok")
