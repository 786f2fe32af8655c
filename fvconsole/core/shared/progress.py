"""The progress callback type shared by long-running core operations."""

from __future__ import annotations

from collections.abc import Callable

#: ``progress(done, total, message)``; called from worker threads, must be cheap and thread-safe.
Progress = Callable[[int, int, str], None]


def no_progress(done: int, total: int, message: str) -> None:
    """Default callback: ignore progress."""
