"""A count is said with its noun, never spelled with "(s)" (issue 28 item 3).

``core/shared/humanize.py: plural`` is the one spelling of a plural ("1 entry", "3 entries");
a phrase without a count is worded from the number of its items ("the override X", "the
overrides X Y"). So no string literal of the core or the CLI spells a plural as ``(s)``,
``(es)`` or ``(ies)`` after a word ("1 problem(s)"). Only string constants are read, through
``ast``: code such as ``type(s)`` is not text and is not looked at.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: The packages whose every string literal is read.
PACKAGES = ("fvconsole/core", "fvconsole/cli", "fvconsole/tui")

#: A word, then the plural's ending in parentheses: "file(s)", "match(es)", "entr(ies)", "{noun}(s)".
SPELLED_PLURAL = re.compile(r"\w\((?:s|es|ies)\)")


def spelled_plurals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal of ``source`` that spells a plural with parentheses.

    An f-string is read whole, a ``{value}`` standing for a word, so ``f"{noun}(s)"`` is found
    as ``f"{n} file(s)"`` is; everything that is not a string constant is code and never read.
    """
    found: list[tuple[int, str]] = []
    parts: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
            parts.update(id(v) for v in node.values)
            if SPELLED_PLURAL.search(text):
                found.append((node.lineno, text))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts
              and SPELLED_PLURAL.search(node.value)):
            found.append((node.lineno, node.value))
    return found


def test_no_string_of_the_core_or_the_cli_spells_a_plural_with_parentheses() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {text!r}"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for line, text in spelled_plurals(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "say the count with humanize.plural (\"1 file\", \"2 files\"):\n" + "\n".join(offenders)


@pytest.mark.parametrize("source", [
    'say(f"pruned {n} checkpoint(s) from {out}")\n',
    'warn(f"{n} malformed line(s) skipped")\n',
    'MESSAGE = "{count} file(s) that are not sidecars"\n',
    'TEXT = ("refused (" "2 reason(s))")\n',
    'f"{noun}(s)"\n',
    'f"{n} critical mismatch(es)"\n',
    '"{n} entr(ies)"\n',
    'def f():\n    """Returns the key(s) it found."""\n',
])
def test_the_scan_finds_a_plural_spelled_with_parentheses(source: str) -> None:
    assert spelled_plurals(source), source


@pytest.mark.parametrize("source", [
    "ok = type(s) is not int\n",
    "names = sorted(s for s in items if len(s) > 1)\n",
    'say(f"pruned {plural(n, \'checkpoint\')} from {out}")\n',
    'HELP = "an age: (s) seconds, (m) minutes"\n',
    'call(s)(es)\n',
])
def test_the_scan_leaves_code_and_correct_text(source: str) -> None:
    assert spelled_plurals(source) == [], source
