"""The runnable examples of docs/operations.md, as the tests that run them read them.

An example is the fenced block right after an ``<!-- example: NAME -->`` line, so a test
always runs what the page shows, never a copy.
"""

from __future__ import annotations

import re
from pathlib import Path

OPERATIONS = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def doc_example(name: str, page: Path = OPERATIONS) -> str:
    """The text of the fenced block following ``<!-- example: name -->``."""
    text = page.read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {re.escape(name)} -->\n```[a-z]*\n(.*?)\n```", text, re.S)
    assert match, f"{page.name}: no example named {name!r}"
    return match.group(1) + "\n"


def with_settings(script: str, **values: str) -> str:
    """``script`` with the value of each ``NAME=...`` / ``export NAME=...`` line replaced (the rest untouched)."""
    out = script
    for name, value in values.items():
        pattern = re.compile(rf"^((?:export )?{name}=)\S*(.*)$", re.M)
        out, count = pattern.subn(lambda m, v=value: f"{m.group(1)}{v}{m.group(2)}", out)
        assert count == 1, f"the example sets {name} {count} times"
    return out


def crontab_entries(text: str) -> tuple[dict[str, str], list[str]]:
    """(variables, commands) of a crontab: ``NAME=value`` lines and the command part of schedule lines."""
    variables, commands = {}, []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assignment = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2)
            continue
        fields = line.split(None, 5)
        assert len(fields) == 6, f"not a crontab line: {line!r}"
        commands.append(fields[5])
    return variables, commands
