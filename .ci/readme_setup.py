#!/usr/bin/env python3
"""Print the README's set-up commands, verbatim, so CI runs exactly what a new user runs.

    python .ci/readme_setup.py N     # the N-th command (1-based) of the first ```bash block
                                     # under "## Set up" in README.md

Fails (exit 1) unless that block holds exactly the expected number of commands, so an
edit that adds, drops or moves one is noticed instead of silently no longer tested.
"""

from __future__ import annotations

import pathlib
import sys

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
HEADING = "## Set up"
EXPECTED = 2


def setup_commands(text: str) -> list[str]:
    """The command lines of the first ```bash block under HEADING (comments and blanks skipped)."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == HEADING)
    except StopIteration:
        raise SystemExit(f"readme_setup: no '{HEADING}' heading in {README}") from None
    commands: list[str] = []
    in_block = False
    for line in lines[start + 1:]:
        if not in_block and line.startswith("## "):
            break
        if not in_block and line.strip() == "```bash":
            in_block = True
        elif in_block and line.strip() == "```":
            return commands
        elif in_block and line.strip() and not line.lstrip().startswith("#"):
            if commands and commands[-1].endswith("\\"):
                commands[-1] += "\n" + line
            else:
                commands.append(line)
    raise SystemExit(f"readme_setup: no complete ```bash block under '{HEADING}' in {README}")


def main() -> int:
    commands = setup_commands(README.read_text(encoding="utf-8"))
    if len(commands) != EXPECTED:
        print(f"readme_setup: expected {EXPECTED} set-up commands under '{HEADING}', found {len(commands)}:",
              *commands, sep="\n  ", file=sys.stderr)
        return 1
    index = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if not 1 <= index <= EXPECTED:
        print(f"usage: {sys.argv[0]} N (1..{EXPECTED})", file=sys.stderr)
        return 2
    print(commands[index - 1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
