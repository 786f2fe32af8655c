"""Node-side entry point: ``python -m fvconsole.core.fleet.node <fvconsole args...>``.

srun starts this once per node. It replaces ``{node}`` in every argument with the Slurm
node name (``SLURMD_NODENAME``) -- on the node, so sites whose node-local roots live side
by side on one filesystem (and the tests) can give each node its own root -- runs the
ordinary headless command in-process with stdout captured, and prints exactly one line::

    FVNODE <node> {"node": ..., "exit": <exit code>, "output": <the command's JSON or null>, ...}

One self-describing line per node lets the login side demultiplex output reliably even
if srun or the site's prolog adds noise; the command's stderr passes through untouched.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

MARKER = "FVNODE"
NODE_PLACEHOLDER = "{node}"
_SNIPPET = 300


def node_name() -> str | None:
    """The Slurm node name of this task (None outside a Slurm step)."""
    return os.environ.get("SLURMD_NODENAME") or None


def substitute_node(argv: Sequence[str], node: str) -> list[str]:
    """Replace ``{node}`` in every argument."""
    return [arg.replace(NODE_PLACEHOLDER, node) for arg in argv]


def run_captured(argv: Sequence[str]) -> tuple[int, str]:
    """Run ``fvconsole <argv>`` in-process; return (exit code, captured stdout)."""
    from fvconsole.cli import main as cli_main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            code = cli_main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return int(code), buffer.getvalue()


def envelope(node: str, code: int, stdout: str) -> dict[str, Any]:
    """Wrap the command's stdout: parsed JSON under "output", or a snippet when it is not JSON."""
    payload: dict[str, Any] = {"node": node, "exit": code, "output": None}
    text = stdout.strip()
    try:
        parsed = json.loads(text) if text else None
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        payload["output"] = parsed
    else:
        payload["invalid_output"] = text[:_SNIPPET]
    return payload


def format_line(node: str, payload: dict[str, Any]) -> str:
    """The single result line (JSON has no raw newlines, so one line per node holds)."""
    return f"{MARKER} {node} {json.dumps(payload, separators=(',', ':'), sort_keys=True, default=str)}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command for this node and print its one result line; always exit 0 once it ran."""
    args = list(sys.argv[1:] if argv is None else argv)
    node = node_name()
    if node is None:
        payload = {"node": None, "exit": 1, "output": {"error": "SLURMD_NODENAME is not set: run under srun"}}
        print(format_line("?", payload), flush=True)
        return 1
    code, stdout = run_captured(substitute_node(args, node))
    print(format_line(node, envelope(node, code, stdout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
