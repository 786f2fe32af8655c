"""The migration view's elastic-resume panel: the world-size change and the three modes side by side.

Shown whenever a preview carries a reshard (a refusal that asks for a mode included), so the
operator chooses the mode in the form from the accounting; the chosen one is marked ``*``.
Self-contained: the view binds its ``reshard`` to the preview's and nothing else.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.reactive import var

from fvconsole.core.migration import Reshard
from fvconsole.tui.plain import PlainText
from fvconsole.tui.widgets.statics import PlainStatic

#: Column widths (the console's 80 columns: 13 + 14 + 5 x 8 + separators = 73).
WIDTHS = (13, 14, 8, 8, 8, 8, 8)
HEADERS = ("mode", "starts", "consumed", "to read", "repeated", "unread", "before")


def reshard_text(reshard: Reshard) -> Text:
    """The topology change, where the checkpoint stopped, the global batch, one row per mode; each line < 80."""
    s, t = reshard.source, reshard.target
    text = PlainText()
    text.append("Elastic resume: ", style="bold")
    text.append(f"world size {s.world_size} -> {t.world_size}, sp {s.sp_world_size} -> {t.sp_world_size} "
                f"({s.groups} -> {t.groups} DP groups)\n")
    before, after = reshard.global_batch_before, reshard.global_batch_after
    text.append(f"stopped in epoch {s.epoch} after {s.yielded_samples} of {s.samples_per_worker} samples/rank; ")
    text.append(f"global batch {before}" + ("" if before == after else f" -> {after}") + "\n",
                style="" if before == after else "yellow")

    def line(cells: tuple[str, ...], style: str = "") -> None:
        parts = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, WIDTHS, strict=True))]
        text.append(" ".join(parts).rstrip() + "\n", style=style)

    line(HEADERS, "bold")
    for cells in reshard.cells():
        line(cells, "bold cyan" if cells[0].endswith("*") else "")
    text.append("samples of that epoch; before: what the old layout leaves unread\n", style="italic")
    text.append("* the chosen mode" if reshard.mode else "choose a mode in the form (reshard: …) and preview",
                style="italic")
    return text


class ReshardPanel(PlainStatic):
    """Every reshard mode's accounting for the preview on screen (hidden when it has none)."""

    reshard: var[Reshard | None] = var(None, always_update=True, init=False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.display = False

    def watch_reshard(self, reshard: Reshard | None) -> None:
        self.display = reshard is not None
        self.update(reshard_text(reshard) if reshard is not None else "")
