"""The console under test: ``make_app`` (the real ``FvConsoleApp`` on given paths), ``run_console``
(that app started headless at a size, then a test's body), ``running`` (the same as an ``async with``, for a test's own body), ``read_until`` (what the console in a pseudo-terminal drew, up to a needle), ``wait_until`` (a condition awaited
against a deadline, never a fixed number of pauses: a loaded machine only takes longer), ``Notified``
(every notification the console raised, kept as it appears: a toast expires), ``shown_notifications``
(those it still shows; both read what ``App.notify`` posts, Textual's store of them is private) and ``work_copy`` (one test's own copy
of a demo workspace's output dir and cache, which tests may migrate into and evict from while
the session's workspace stays as built)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import shutil
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.message import Message
    from textual.notifications import Notification

    from fvconsole.demo.workspace import DemoWorkspace
    from fvconsole.tui.app import FvConsoleApp

PathArg = str | os.PathLike[str] | None


def make_app(config: PathArg = None, output: PathArg = None, cache: PathArg = None, *,
             read_only: bool = False, journal: PathArg = None) -> FvConsoleApp:
    """The console as ``fvconsole console --config C --checkpoints O --cache-root R`` opens it
    (``make_app(**work)`` for a ``work_copy``); a path left out is one the console was not given."""
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState

    def text(path: PathArg) -> str | None:
        return None if path is None else os.fspath(path)

    app = FvConsoleApp(ConsoleState(config_path=text(config), checkpoints_path=text(output),
                                    cache_root=text(cache), read_only=read_only, journal_path=text(journal)))
    watch_notifications(app)
    return app


def work_copy(demo_ws: DemoWorkspace, base: Path, cache_name: str = "shard-cache") -> dict[str, str]:
    """Copies (symlinks and mtimes kept) of the demo's output dir and cache under ``base``:
    ``{"config", "output", "cache"}``. The copied checkpoints and run.yaml still point at the
    session's dataset and manifest, which no test modifies."""
    paths = {"config": demo_ws.config_path, "output": str(base / "output"), "cache": str(base / cache_name)}
    shutil.copytree(demo_ws.output_dir, paths["output"], symlinks=True)
    shutil.copytree(demo_ws.cache_root, paths["cache"], symlinks=True)
    _still_writing(paths["cache"])
    return paths


def _still_writing(cache: str) -> None:
    """The demo's entry being written is still being written when the test starts: its ``.tmp``
    file is fresh again. The session's demo may be many minutes old on a busy machine, and a
    ``.tmp`` older than the grace period is a crashed write, not one in progress."""
    for entry in os.scandir(cache):
        if entry.is_dir(follow_symlinks=False):
            for name in os.listdir(entry.path):
                if name.endswith(".safetensors.tmp"):
                    os.utime(os.path.join(entry.path, name))


def run_console(work: dict[str, str], size: tuple[int, int], body: Callable[[FvConsoleApp, object], Awaitable[None]],
                timeout: float = 300) -> None:
    """``make_app(**work)`` under ``App.run_test(size=size)``: once its paths loaded
    (``headless.started``), ``await body(app, pilot)``; all of it within ``timeout`` seconds."""
    app = make_app(**work)

    async def main() -> None:
        async with running(app, size) as pilot:
            await body(app, pilot)

    asyncio.run(asyncio.wait_for(main(), timeout))


@contextlib.asynccontextmanager
async def running(app: FvConsoleApp, size: tuple[int, int]) -> AsyncIterator[object]:
    """``app.run_test(size=size)``, entered once the console loaded its paths (``headless.started``): the pilot."""
    from tour import started

    watch_notifications(app)
    async with app.run_test(size=size) as pilot:
        await started(app, pilot)
        yield pilot


async def wait_until(pilot: object, condition: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    """Pause the app's test pilot until ``condition()`` holds; fail naming ``what`` after
    ``timeout`` seconds. For what the app does by itself (a timer, a worker)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s"
        await pilot.pause(0.05)


class NotificationLog:
    """Every notification ``app`` raised, kept as ``App.notify`` posts it to the app (a public
    ``Notify`` message, seen through the app's public ``post_message``): the same
    ``Notification`` the app shows, after the console made it plain text. ``shown()`` is what
    the app still shows: neither expired nor cleared (``clear_notifications``)."""

    def __init__(self, app: FvConsoleApp) -> None:
        from textual.notifications import Notify

        self.raised: list[Notification] = []
        self._cleared = 0
        post, clear = app.post_message, app.clear_notifications

        def kept(message: Message) -> bool:
            posted = post(message)
            if posted and isinstance(message, Notify):
                self.raised.append(message.notification)
            return posted

        def cleared() -> None:
            self._cleared = len(self.raised)
            clear()

        app.post_message = kept  # type: ignore[method-assign]
        app.clear_notifications = cleared  # type: ignore[method-assign]

    def shown(self) -> list[Notification]:
        return [n for n in self.raised[self._cleared:] if not n.has_expired]


_LOGS: weakref.WeakKeyDictionary[FvConsoleApp, NotificationLog] = weakref.WeakKeyDictionary()


def watch_notifications(app: FvConsoleApp) -> NotificationLog:
    """``app``'s notification log, started now unless it was already (``make_app`` and
    ``running`` start it, before the app can raise any)."""
    if app not in _LOGS:
        _LOGS[app] = NotificationLog(app)
    return _LOGS[app]


def shown_notifications(app: FvConsoleApp) -> list[Notification]:
    """The notifications ``app`` shows now (oldest first), as its toasts would list them."""
    assert app in _LOGS, "the app's notifications are not watched: make it with make_app or run it with running"
    return _LOGS[app].shown()


class Notified:
    """Every notification ``app`` raises from now on (and those still shown):
    ``notified = Notified(app)``, then ``notified()`` → their messages, oldest first.

    The app forgets a notification once it expires (5 s unless its ``timeout`` says otherwise),
    so a test that reads ``shown_notifications`` a few settles after the action found an early
    one gone on a loaded machine. Asserting on what was raised, not on what is still shown,
    does not depend on how long the steps in between took.
    """

    def __init__(self, app: FvConsoleApp) -> None:
        self.log = watch_notifications(app)
        self.before = self.log.shown()
        self.start = len(self.log.raised)

    def __call__(self) -> list[str]:
        return [str(n.message) for n in self.before + self.log.raised[self.start:]]


def read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    """What a pseudo-terminal's master ``fd`` delivers until ``needle`` shows (or ``seconds`` pass,
    or the terminal closes): the caller asserts on what was seen."""
    seen = b""
    deadline = time.monotonic() + seconds
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen
