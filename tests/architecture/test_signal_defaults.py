"""The suite passes when its runner ignores SIGHUP (``nohup``) or SIGINT (a script's ``... &``).

An ignored signal is inherited by every process the suite starts, and fvconsole leaves a
signal that someone else already handles alone, so a test that sends SIGHUP or SIGINT to a
child must give the child that signal's default first (``tests/signal_defaults.py``). The
first test holds every test module that signals a child it started to that helper; the
second runs real signal tests under ``nohup`` and under ``bash -c '... &'``.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
#: The names that reset a child's dispositions (tests/signal_defaults.py).
HELPERS = {"DEFAULTS", "defaults", "python_defaults"}
#: Ways a test module signals a child it started.
SENDS = ("send_signal", "inject=", "PausedRun", "interrupted_run")
#: Modules that signal a process but need no reset, and why.
ALLOWED = {
    "slurm_cluster.py": "stops the Slurm daemons it started with SIGTERM, which neither nohup nor & ignores",
    "reliability/test_shared_output_dir.py": "defines PausedRun; its runs reset in harness.run_forked",
    "reliability/harness.py": "run_forked resets (python_defaults) in the fork itself",
    "architecture/test_signal_defaults.py": "this test names the ways",
    "reliability/test_durability.py": "strace injects errors (ENOSYS, EIO), no signal",
    "reliability/test_evict_ops.py": "strace injects SIGSTOP, which cannot be ignored",
    "retention/test_prune_execute.py": "sends SIGKILL, which cannot be ignored",
}


def _signalling_modules() -> dict[str, set[str]]:
    """Test module (relative path) -> the helper names it uses, for every module that signals a child."""
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text()
        if not any(send in text for send in SENDS):
            continue
        names = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) for a in n.names}
        found[str(path.relative_to(TESTS))] = names & HELPERS
    return found


def test_every_module_that_signals_a_child_resets_its_dispositions() -> None:
    modules = _signalling_modules()
    assert "cache/test_cache_watch.py" in modules and "reliability/test_signals.py" in modules  # the scan finds them
    missing = sorted(m for m, helpers in modules.items() if not helpers and m not in ALLOWED)
    assert missing == [], f"signal a child without tests/signal_defaults.py: {missing}"


#: Real signal tests: SIGHUP and SIGINT to a `cache ls --watch`, SIGHUP to a `migrate --yes` fork.
SIGNAL_TESTS = ["tests/cache/test_cache_watch.py::test_sigterm_and_sighup_end_watching_like_every_command",
                "tests/cache/test_cache_watch.py::test_terminal_watch_redraws_and_ctrl_c_exits_0"]


@pytest.mark.serial  # a pytest of its own, with a terminal watch inside
@pytest.mark.parametrize("how", ["nohup", "script &"])
def test_signal_tests_pass_under_nohup_and_in_the_background(how: str, tmp_path: Path) -> None:
    if shutil.which("nohup") is None or shutil.which("bash") is None:
        pytest.skip("needs nohup and bash to start the suite as a user would")
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *SIGNAL_TESTS]
    line = shlex.join(pytest_argv)
    log = tmp_path / "log"
    if how == "nohup":
        script = f"nohup {line} > {shlex.quote(str(log))} 2>&1; echo $? >> {shlex.quote(str(log))}"
    else:  # a non-interactive shell starts a background job with SIGINT and SIGQUIT ignored
        script = f"{line} > {shlex.quote(str(log))} 2>&1 & wait $!; echo $? >> {shlex.quote(str(log))}"
    root = TESTS.parent
    subprocess.run(["bash", "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                   stdin=subprocess.DEVNULL, timeout=600, check=False)
    text = log.read_text()
    assert text.rstrip().splitlines()[-1] == "0", text[-3000:]
