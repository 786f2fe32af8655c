"""What a lean install (the wheel without extras) must hold and show, checked once for two callers:
``tests/architecture/test_lean_install.py`` (the extras made unimportable in this venv) and
``.ci/wheel_smoke.py`` (a brand-new venv holding only the built wheel).

The standard library and ``fvconsole`` only: wheel_smoke imports this module in the lean venv,
where neither pytest nor the test package's other helpers exist.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Any

#: What the extras add and the base install must not bring (distribution == import name here).
HEAVY = ("torch", "safetensors", "numpy", "pyarrow")

#: What the note under the console's rank table says where reading the next ids needs the ``parquet`` extra.
PARQUET_HINT = "pip install 'fvconsole[parquet]'"


def importable(names: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of ``names`` this interpreter has: installed (a distribution) or found on the path
    (``sys.modules[name] = None`` hides only the import, not the installed package). A lean
    install answers ``[]``."""
    found = []
    for name in names:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            dist = None
        try:
            spec = importlib.util.find_spec(name)
        except ValueError:  # in sys.modules as None
            spec = None
        if dist is not None or spec is not None:
            found.append(name)
    return found


async def preview_next_ids(app: Any, pilot: Any, checkpoint: str = "checkpoint-300") -> list[str]:
    """In a started console: open the migration of the checkpoint whose path ends in
    ``checkpoint``, preview it (ctrl+r) and return each rank's "next id" cell."""
    from tour import press, started

    await started(app, pilot)
    table = app.query_one("#ckpt-table")
    table.move_cursor(row=table.get_row_index(next(k.value for k in table.rows if k.value.endswith(checkpoint))))
    await press(app, pilot, "m")
    await press(app, pilot, "ctrl+r")
    ranks = app.query_one("#mig-ranks")
    return [str(ranks.get_row_at(i)[-1]) for i in range(ranks.row_count)]


def table_note(app: Any) -> str:
    """The note under the migration view's rank table ("" when it shows none)."""
    note = app.query_one("#mig-ids-note")
    return str(note.render()).strip() if note.display else ""


async def console_next_ids(config: str, output: str, cache: str) -> list[str]:
    """The real console on these paths, headless: its migration preview's "next id" cells, then
    the note under the table."""
    from fvconsole.tui.app import FvConsoleApp
    from fvconsole.tui.state import ConsoleState

    app = FvConsoleApp(ConsoleState(config_path=config, checkpoints_path=output, cache_root=cache))
    async with app.run_test(size=(140, 42)) as pilot:
        return [*await preview_next_ids(app, pilot), table_note(app)]
