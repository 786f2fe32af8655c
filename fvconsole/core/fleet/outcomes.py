"""What one node answered, classified: ok, failed, timeout, invalid or unreachable.

The kinds mean the same whether the node ran in its own srun or inside a single job step:

- ``ok``: the command ran and exited 0 with a well-formed JSON document;
- ``failed``: it ran and refused or failed (its JSON carries the reason);
- ``timeout``: reached (or still waiting for resources) when the time limit ran out;
- ``invalid``: it answered, but not with one well-formed result (bad frames, bad JSON, NaN,
  fields of the wrong type, more output than the per-node budget);
- ``unreachable``: no result at all (srun could not start it, the node died, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fvconsole.core.fleet.demux import NodeStream
from fvconsole.core.fleet.documents import check_document, check_envelope
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.untrusted import reason_from_json

KINDS = ("ok", "failed", "timeout", "invalid", "unreachable")


@dataclass(frozen=True)
class NodeOutcome:
    """What one node answered (or why it did not)."""

    node: str
    kind: str  # one of KINDS
    exit_code: int | None  # the fvconsole command's exit code on the node
    output: dict[str, Any] | None  # its JSON document
    error: str | None  # one-line reason when kind != "ok"
    srun_exit: int | None = None
    #: The command's refusal as data (when the node sent it): what the console words.
    reason: Reason | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def may_have_acted(self) -> bool:
        """True when a failed node may still have changed something (timed out, or exit 3)."""
        return self.kind == "timeout" or self.exit_code == 3

    def to_json(self) -> dict[str, Any]:
        """The node's own JSON document, or ``{"error": reason, ...}``."""
        if self.ok and self.output is not None:
            return self.output
        payload: dict[str, Any] = dict(self.output or {})
        payload["error"] = self.error or "failed"
        payload["failure"] = self.kind
        if self.exit_code is not None:
            payload["exit_code"] = self.exit_code
        return payload


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def from_envelope(node: str, payload: Mapping[str, Any], *, expects: str | None, timeout: float,
                  why: str = "", srun_exit: int | None = None) -> NodeOutcome:
    """Classify a node's complete result envelope."""
    problem = check_envelope(payload)
    if problem:
        return NodeOutcome(node, "invalid", None, None, f"malformed result: {problem}", srun_exit)
    if payload.get("timeout") is not None:  # the node's own time limit (single-step fan-out)
        return NodeOutcome(node, "timeout", None, None, f"timed out after {timeout:g}s", srun_exit)
    code = payload.get("exit")
    output = payload.get("output")
    if not isinstance(output, dict):
        snippet = str(payload.get("invalid_output") or "")[:120]
        if not snippet and code not in (0, None):  # e.g. a usage error: the reason is on stderr
            return NodeOutcome(node, "failed", code, None, f"exit {code}: {why or 'no output'}", srun_exit)
        reason = f"command printed invalid JSON (exit {code}): {snippet!r}"
        return NodeOutcome(node, "invalid", code, None, reason, srun_exit)
    shape = check_document(expects, output, ok=code == 0)
    if shape:
        return NodeOutcome(node, "invalid", code, None, f"unexpected JSON from the command: {shape}", srun_exit)
    if code != 0:
        return NodeOutcome(node, "failed", code, output, str(output.get("error") or f"exit {code}"), srun_exit,
                           reason_from_json(payload.get("reason")))
    return NodeOutcome(node, "ok", 0, output, None, srun_exit)


def classify(stream: NodeStream, *, expects: str | None, timeout: float, cap: int, srun_exit: int | None,
             timed_out: bool, srun_line: str = "", start_error: str | None = None) -> NodeOutcome:
    """One node's outcome from what its stream holds once its srun has ended.

    ``srun_line``: srun's own last stderr line (a reason when the node sent none).
    """
    node = stream.node
    why = (stream.stderr[-1] if stream.stderr else "") or srun_line
    if stream.over_cap:
        return NodeOutcome(node, "invalid", None, None, f"output exceeds {_mib(cap)} (stopped reading)",
                           srun_exit)
    if stream.result.problem:
        return NodeOutcome(node, "invalid", None, None, stream.result.problem, srun_exit)
    if stream.result.payload is not None:
        return from_envelope(node, stream.result.payload, expects=expects, timeout=timeout, why=why,
                             srun_exit=srun_exit)
    if timed_out:
        return NodeOutcome(node, "timeout", None, None, f"timed out after {timeout:g}s", srun_exit)
    if start_error:
        return NodeOutcome(node, "unreachable", None, None, start_error, srun_exit)
    why = why or (f"srun exit {srun_exit}" if srun_exit else "no output")
    return NodeOutcome(node, "unreachable", None, None, f"no result from node: {why}", srun_exit)
