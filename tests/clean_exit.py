"""A pytest plugin (``pytest_plugins`` in conftest.py): an xdist worker leaves without being interrupted.

Why: when every worker has reported its session finished, xdist's controller terminates them,
and execnet gives each worker 5 s to end before it sends it SIGINT. pytest's own cleanup then
runs five full garbage collections over the worker's heap (hundreds of tests' worth on a loaded
machine: more than 5 s), and the SIGINT landed in the one piece of Python code running during a
collection, Hypothesis's gc callback: a ``PytestUnraisableExceptionWarning`` with a
``KeyboardInterrupt`` traceback at the end of a green run. Collected once and frozen before the
worker reports (no deadline yet), the heap is left out of those later collections, which then
cost nothing.
"""

from __future__ import annotations

import gc

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker, before it reports "finished": collect, then freeze what is left."""
    if hasattr(session.config, "workerinput"):
        gc.collect()
        gc.freeze()
