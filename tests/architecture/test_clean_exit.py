"""A green run prints no traceback at its end (issue 29, performance: the clean run).

A real pytest session in a subprocess, one xdist worker: a Hypothesis test (which installs its
gc callback) and a big heap whose full collections are made slow (as on a loaded machine), so
that pytest's five closing garbage collections outlast execnet's 5 s grace before it SIGINTs
the worker. Without ``tests/clean_exit.py`` this printed a
``PytestUnraisableExceptionWarning`` (a ``KeyboardInterrupt`` in Hypothesis's gc callback).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

SESSION = '''
import gc
import time

from hypothesis import given, strategies as st

KEEP = []


def slow_over_a_big_heap(phase, info):
    # a loaded machine's full collection of a big heap, made certain: 1.5 s each while the
    # oldest generation holds the heap (pytest's closing five then outlast execnet's 5 s)
    if phase == "start" and info["generation"] == 2 and len(gc.get_objects(2)) > 500_000:
        time.sleep(1.5)


@given(st.integers())
def test_hypothesis_installs_its_gc_callback(x):
    assert x == x


def test_a_big_heap():
    KEEP.extend([i] for i in range(1_000_000))
    gc.collect()  # into the oldest generation
    gc.callbacks.append(slow_over_a_big_heap)
'''


@pytest.mark.slow
def test_a_worker_ends_without_an_unraisable_keyboard_interrupt(tmp_path: Path) -> None:
    (tmp_path / "test_session.py").write_text(SESSION, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", "-p", "clean_exit",
                          "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_session.py")],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=280)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
    output = run.stdout + run.stderr
    assert "Unraisable" not in output and "KeyboardInterrupt" not in output, output
