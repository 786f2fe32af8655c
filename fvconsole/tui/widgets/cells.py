"""How the console's table cells are fitted to their columns: :class:`FittedCell`, one rule for
every cell (headers too), so a cut is always visible as ``…``. ``tui/widgets/strip_rows.py``
draws each cell through it.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from fvconsole.tui.plain import fit_cell


class FittedCell:
    """A table cell drawn in the width its column gives it, by :func:`plain.fit_cell`'s rule.

    A cell longer than its column would be cut at its edge without a mark; every table cell
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
