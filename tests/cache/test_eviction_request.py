"""One eviction as a command line asks for it: ``EvictionRequest`` (issue 28), through the cache façade.

The command line's values become the typed request at the boundary (``cli/cache.py:
evict_request``; issue 35 item 4: the core reads no argparse name), usage errors before any disk access; its
dry run is a preview (the plan and the eviction running now), its ``--yes`` the locked
eviction. Expected values are written by hand from the entries each test makes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sized_cache import key_of, sized_entry

from fvconsole.cli import build_parser
from fvconsole.cli.cache import evict_request
from fvconsole.core.cache import EvictionRequest, EvictionSelectors, FreeTarget, LockedEviction
from fvconsole.core.cache.roots import evictor_lock
from fvconsole.core.journal import appender
from fvconsole.core.shared import run_locked
from fvconsole.core.shared.errors import FvError, UsageError

DAY = 86400.0


def request_of(*argv: str) -> EvictionRequest:
    """``cache evict ARGV`` as the typed request the command builds."""
    return evict_request(build_parser(["cache"]).parse_args(["cache", "evict", *argv]))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for i, name in enumerate("abc"):
        sized_entry(tmp_path / "wcache", name, 1, (3 - i) * DAY)  # a: 3 days old, b: 2, c: 1
    return tmp_path / "wcache"


def test_a_command_lines_values_become_one_request(root: Path) -> None:
    request = request_of(str(root), "--older-than", "36h", "--keep", key_of("a"), "--min-free-gb", "0.5",
                         "--grace", "1m", "--force")
    assert request == EvictionRequest(str(root), EvictionSelectors(older_than=129600.0, keep=(key_of("a"),),
                                                                   free_target=FreeTarget(min_free_gb=0.5)),
                                      grace=60.0, force=True)


@pytest.mark.parametrize(("argv", "needle"), [
    (("--grace", "x"), "--grace"),  # the protection's error comes before "nothing selected"
    ((), "nothing selected"),
    (("--invalid", "--key", "ABC"), "--key"),
    (("--verify", "--key", "0" * 16), "--verify: only with --invalid"),
])
def test_a_bad_value_is_a_usage_error_naming_its_flag(root: Path, argv: tuple, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        request_of(str(root), *argv)


def test_no_root_anywhere_is_a_usage_error(monkeypatch) -> None:
    monkeypatch.delenv("FASTVIDEO_WEIGHT_SHARD_CACHE", raising=False)
    with pytest.raises(UsageError, match="no cache root"):
        request_of("--invalid")


def test_the_preview_is_the_plan_and_the_eviction_running_now(root: Path) -> None:
    request = request_of(str(root), "--older-than", "36h")
    quiet = request.preview()
    assert [p.key for p in quiet.plan.evict] == [key_of("a"), key_of("b")]
    assert quiet.running is None and quiet.envelope()["running_eviction"] is None
    with evictor_lock(str(root), command="fvconsole cache evict --yes (cron)"):
        busy = request.preview()
    assert busy.running is not None and busy.running.pid == os.getpid()
    assert busy.envelope()["running_eviction"]["command"] == "fvconsole cache evict --yes (cron)"
    assert busy.envelope()["executed"] is False and quiet.warnings == ()


def test_a_free_space_target_out_of_reach_is_the_previews_warning(root: Path) -> None:
    preview = request_of(str(root), "--min-free-percent", "100").preview()
    [warning] = preview.warnings
    assert warning.startswith(f"{root}: target ") and "(--min-free-percent 100) cannot be reached" in warning


def test_a_key_that_names_no_entry_refuses_the_whole_eviction(root: Path) -> None:
    request = request_of(str(root), "--key", key_of("a"), "--key", "f" * 16)
    with pytest.raises(FvError, match=f"^{'f' * 16}: not an entry of {root} \\(--key\\); nothing evicted$"):
        request.preview()
    with pytest.raises(FvError, match="nothing evicted"):
        run_locked(request.operation(command="test"))
    assert sorted(p.name for p in root.iterdir()) == sorted(key_of(n) for n in "abc")


def test_execute_evicts_what_the_preview_showed_under_the_lock(root: Path, tmp_path: Path) -> None:
    request = request_of(str(root), "--older-than", "36h")
    done = LockedEviction.of(run_locked(request.operation(command="fvconsole cache evict --older-than 36h --yes"),
                                        journal=appender(str(tmp_path / "journal.jsonl"))))
    assert [e.key for e in done.result.evicted] == [key_of("a"), key_of("b")]
    assert [p.name for p in root.iterdir()] == [key_of("c")]
    assert done.lock.held and done.journal is not None and done.journal.written
    assert done.missed_target == () and done.exit_code == 0
