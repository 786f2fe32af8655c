"""How the console's table cells are fitted to their columns: :class:`FittedCell`, one rule for
every cell (headers too), so a cut is always visible as ``…``.

The drawing of the lines themselves (Textual's ``DataTable`` drawing, the same segments for less
work, issue 29) reaches into ``DataTable``'s private methods, so it lives with every other use of
Textual's private API in ``tui/widgets/textual_private.py``.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from fvconsole.tui.plain import fit_cell


class FittedCell:
    """A table cell drawn in the width its column gives it, by :func:`plain.fit_cell`'s rule.

    DataTable crops a one-line cell at the column's edge without a mark; every FastTable cell
    (headers too) is drawn through this, so a cut is always visible as ``…``. Styles are kept
    on what fits; a path elided in the middle keeps the cell's base style.
    """

    __slots__ = ("cell",)

    def __init__(self, cell: Any) -> None:
        self.cell = cell

    def fitted(self, width: int) -> Any:
        """The cell as drawn in ``width`` cells: itself when it fits (or is not one line of Text)."""
        cell = self.cell
        if not isinstance(cell, Text) or "\n" in cell.plain or cell.cell_len <= width:
            return cell
        plain = cell.plain
        fitted = fit_cell(plain, width)
        if fitted.endswith("…") and plain.startswith(fitted[:-1]):
            text = cell[: len(fitted) - 1]
            text.append("…")
        else:
            text = Text(fitted, style=cell.style, end="")
        text.no_wrap, text.end = True, ""
        return text

    def __rich_console__(self, console: Any, options: Any) -> Any:
        yield self.fitted(options.max_width)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.cell)
