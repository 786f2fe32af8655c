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
from typing import Any, TypeVar

from fvconsole.core.fleet.demux import NodeStream
from fvconsole.core.fleet.documents import (
    NodeAnswer,
    NodeEviction,
    NodeListing,
    NodeVerification,
    ResultEnvelope,
    read_document,
)
from fvconsole.core.shared.interrupts import SIGNALS
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.untrusted import UntrustedError

KINDS = ("ok", "failed", "timeout", "invalid", "unreachable")
_ORDERLY = frozenset(int(sig) for sig in SIGNALS)

D = TypeVar("D", bound=NodeAnswer)


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
    #: ``output`` read into typed records at classification (``documents.py``); None without one.
    document: NodeAnswer | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def _read(self, record: type[D]) -> D:
        """The document as ``record``: the one read at classification, or (an outcome built by hand)
        ``output`` read now; an outcome without output reads as an empty document."""
        if isinstance(self.document, record):
            return self.document
        return record.from_json(self.output if self.output is not None else {}, self.node,
                                answered=self.exit_code == 0 and self.output is not None)

    @property
    def listing(self) -> NodeListing:
        """Its ``cache ls --json`` as records."""
        return self._read(NodeListing)

    @property
    def eviction(self) -> NodeEviction:
        """Its ``cache evict --json`` as records."""
        return self._read(NodeEviction)

    @property
    def verification(self) -> NodeVerification:
        """Its ``cache verify --json`` as records."""
        return self._read(NodeVerification)

    @property
    def may_have_acted(self) -> bool:
        """True when a failed node may still have changed something: timed out, exit 3, or its
        command was killed by a signal it cannot handle (SIGKILL, SIGSEGV: exit 128+N; an orderly
        interruption that changed nothing exits 128+N only for SIGINT, SIGTERM and SIGHUP)."""
        killed = self.exit_code is not None and self.exit_code > 128 and self.exit_code - 128 not in _ORDERLY
        return self.kind == "timeout" or self.exit_code == 3 or killed

    def to_json(self) -> dict[str, Any]:
        """The node's own JSON document, or ``{"error": reason, ...}``."""
        if self.ok and self.output is not None:
            return self.output
        payload: dict[str, Any] = dict(self.output or {})
        payload["error"] = self.error or "failed"
        payload["failure"] = self.kind
        # the node's own code when it sent one, else its refusal's, else how it failed (timeout, unreachable ...)
        payload.setdefault("code", self.reason.code if self.reason is not None else self.kind)
        if self.exit_code is not None:
            payload["exit_code"] = self.exit_code
        return payload


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def from_envelope(node: str, payload: Mapping[str, Any], *, expects: str | None, timeout: float,
                  why: str = "", srun_exit: int | None = None, document: NodeAnswer | None = None) -> NodeOutcome:
    """Classify a node's complete result envelope, its command's JSON read as ``expects``'s records
    (``documents.LS``, ``EVICT``, ``VERIFY``; another kind: only its ``error``).

    ``document``: this very payload's document, already read (when the result arrived).
    """
    try:
        envelope = ResultEnvelope.from_json(payload, node)
    except UntrustedError as exc:
        return NodeOutcome(node, "invalid", None, None, f"malformed result: {exc}", srun_exit)
    if envelope.timeout is not None:  # the node's own time limit (single-step fan-out)
        return NodeOutcome(node, "timeout", None, None, f"timed out after {timeout:g}s", srun_exit)
    code, output = envelope.exit, envelope.output
    if output is None:
        snippet = (envelope.invalid_output or "")[:120]
        if not snippet and code not in (0, None):  # e.g. a usage error: the reason is on stderr
            return NodeOutcome(node, "failed", code, None, f"exit {code}: {why or 'no output'}", srun_exit)
        reason = f"command printed invalid JSON (exit {code}): {snippet!r}"
        return NodeOutcome(node, "invalid", code, None, reason, srun_exit)
    try:
        if document is None:
            document = read_document(expects, output, node, answered=code == 0)
    except UntrustedError as exc:
        return NodeOutcome(node, "invalid", code, None, f"unexpected JSON from the command: {exc}", srun_exit)
    if code != 0:
        return NodeOutcome(node, "failed", code, output, document.error or f"exit {code}", srun_exit,
                           envelope.reason, document)
    return NodeOutcome(node, "ok", 0, output, None, srun_exit, document=document)


def classify(stream: NodeStream, *, expects: str | None, timeout: float, cap: int, srun_exit: int | None,
             timed_out: bool, srun_line: str = "", start_error: str | None = None,
             document: NodeAnswer | None = None) -> NodeOutcome:
    """One node's outcome from what its stream holds once its srun has ended.

    ``srun_line``: srun's own last stderr line (a reason when the node sent none); ``document``:
    its result's document, read when the result arrived (``from_envelope``).
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
                             srun_exit=srun_exit, document=document)
    if timed_out:
        return NodeOutcome(node, "timeout", None, None, f"timed out after {timeout:g}s", srun_exit)
    if start_error:
        return NodeOutcome(node, "unreachable", None, None, start_error, srun_exit)
    why = why or (f"srun exit {srun_exit}" if srun_exit else "no output")
    return NodeOutcome(node, "unreachable", None, None, f"no result from node: {why}", srun_exit)
