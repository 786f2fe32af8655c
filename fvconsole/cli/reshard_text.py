"""The elastic-resume block of `migrate`'s text: the topology change and every mode's accounting."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fvconsole.cli.common import Block, format_table

if TYPE_CHECKING:  # the core's record, for the hint only (importing migration costs start-up)
    from fvconsole.core.migration import Reshard


def reshard_lines(reshard: Reshard) -> list[str | Block]:
    """The summary, the global batch (a warning line of its own when it changes) and the modes table."""
    lines: list[str | Block] = [f"reshard: {reshard.summary}"]
    before, after = reshard.global_batch_before, reshard.global_batch_after
    lines.append(f"global batch {before}" + ("" if before == after else f" -> {after}"))
    lines.append(format_table(reshard.HEADERS, reshard.cells(), right=(2, 3, 4, 5, 6)))
    lines.append("samples of the stopped epoch; * the chosen mode" if reshard.mode else
                 "samples of the stopped epoch; choose one with --reshard MODE")
    return lines
