"""The console under test: ``make_app`` (the real ``FvConsoleApp`` on given paths) and ``work_copy``
(one test's own copy of a demo workspace's output dir and cache, which tests may migrate into
and evict from while the session's workspace stays as built)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

    return FvConsoleApp(ConsoleState(config_path=text(config), checkpoints_path=text(output),
                                     cache_root=text(cache), read_only=read_only, journal_path=text(journal)))


def work_copy(demo_ws: DemoWorkspace, base: Path, cache_name: str = "shard-cache") -> dict[str, str]:
    """Copies (symlinks and mtimes kept) of the demo's output dir and cache under ``base``:
    ``{"config", "output", "cache"}``. The copied checkpoints and run.yaml still point at the
    session's dataset and manifest, which no test modifies."""
    paths = {"config": demo_ws.config_path, "output": str(base / "output"), "cache": str(base / cache_name)}
    shutil.copytree(demo_ws.output_dir, paths["output"], symlinks=True)
    shutil.copytree(demo_ws.cache_root, paths["cache"], symlinks=True)
    return paths
