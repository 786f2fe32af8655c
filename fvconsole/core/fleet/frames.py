"""The wire protocol between the node-side runner and the login node: ``FVNODE`` frames.

Every line the runner (:mod:`fvconsole.cli.node`) prints on stdout is a frame::

    FVNODE <node> start              the runner is up (the node was reached)
    FVNODE <node> <i>/<n> <chunk>    piece i of n of the node's result envelope (JSON text)

Why frames rather than one JSON line per node: in a single job step srun merges the stdout
of every node. slurmstepd forwards task output in messages of at most 1024 bytes; a longer
line is cut there (and, with ``srun --label``, each piece is written as its own labelled
line), so pieces of different nodes could be mixed. A frame line stays under 1024 bytes, so
it always arrives whole and unmixed; the envelope is ASCII-only JSON (``ensure_ascii``), so a
chunk boundary never splits a character. The start frame tells "never reached" (unreachable,
or retried one srun per node) from "reached but did not finish" (timeout).

Decoding is strict: a frame that is not ASCII, a chunk sequence with a gap, a second result,
or JSON with NaN/Infinity, absurd nesting or a number beyond Python's digit limit is a
problem of that node (reported as ``invalid``), never an exception for the run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fvconsole.core.shared.untrusted import UntrustedError, decode

MARKER = "FVNODE"
START = "start"
#: JSON characters per frame: with the marker and a node name a frame line stays < 1024 bytes.
CHUNK_CHARS = 800
_MARKER_BYTES = MARKER.encode() + b" "
_SEQ = re.compile(r"([0-9]{1,9})/([0-9]{1,9})")


class FrameError(ValueError):
    """A line that claims to be a frame but is malformed; ``node`` is the name it gave (if any)."""

    def __init__(self, node: str | None, reason: str) -> None:
        super().__init__(reason)
        self.node = node
        self.reason = reason


@dataclass(frozen=True)
class Frame:
    """One parsed frame; ``seq`` is None for the start frame."""

    node: str
    seq: int | None
    total: int
    chunk: str


def start_line(node: str) -> str:
    """The runner's first line."""
    return f"{MARKER} {node} {START}"


def encode_payload(payload: dict[str, Any]) -> str:
    """The envelope as compact ASCII JSON (raises ValueError for NaN/Infinity: never sent)."""
    return json.dumps(payload, ensure_ascii=True, allow_nan=False, separators=(",", ":"), sort_keys=True,
                      default=str)


def result_lines(node: str, payload: dict[str, Any]) -> list[str]:
    """The frames that carry one result envelope."""
    text = encode_payload(payload)
    chunks = [text[i:i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
    return [f"{MARKER} {node} {i}/{len(chunks)} {chunk}" for i, chunk in enumerate(chunks)]


def parse_frame(line: bytes) -> Frame | None:
    """A frame, None for a line that is not one (noise), FrameError for a malformed frame."""
    if not line.startswith(_MARKER_BYTES):
        return None
    head = line.split(b" ", 2)
    claimed = head[1].decode("ascii", "replace") if len(head) > 1 and head[1] else None
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise FrameError(claimed, "result frame is not ASCII (invalid UTF-8 or binary output)") from None
    parts = text.rstrip("\r").split(" ", 3)
    if len(parts) < 3 or not parts[1]:
        raise FrameError(claimed, "truncated result frame")
    node, tag = parts[1], parts[2]
    if tag == START and len(parts) == 3:
        return Frame(node, None, 0, "")
    match = _SEQ.fullmatch(tag)
    if not match:
        raise FrameError(node, f"malformed result frame (tag {tag[:20]!r})")
    seq, total = int(match.group(1)), int(match.group(2))
    if seq >= total:
        raise FrameError(node, f"malformed result frame ({seq}/{total})")
    return Frame(node, seq, total, parts[3] if len(parts) == 4 else "")


def decode_result(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """Strict JSON decoding of one envelope (the untrusted-document door): (object, None) or (None, reason)."""
    try:
        value = decode(text, "result", "result")
    except UntrustedError as exc:
        if exc.syntax:
            return None, f"invalid JSON in result ({exc.detail})"
        if "non-finite number" in exc.detail:
            return None, "non-finite number (NaN or Infinity) in result"
        return None, f"unusable JSON in result ({exc.detail})"  # e.g. beyond the digit limit
    if not isinstance(value, dict):
        return None, "result is not a JSON object"
    return value, None


class ResultAssembler:
    """One node's frames, in arrival order, back into its single result envelope."""

    def __init__(self) -> None:
        self.started = False
        self.payload: dict[str, Any] | None = None
        self.problem: str | None = None
        self._parts: list[str] = []
        self._total = 0

    @property
    def complete(self) -> bool:
        return self.payload is not None and self.problem is None

    def fail(self, reason: str) -> None:
        """Record the first problem (later ones add nothing an operator needs)."""
        if self.problem is None:
            self.problem = reason
        self._parts = []

    def add(self, frame: Frame) -> bool:
        """Take one frame; True when it completed the envelope."""
        self.started = True
        if self.problem is not None or frame.seq is None:
            return False
        if frame.seq == 0:
            if self.payload is not None or self._parts:
                self.fail("more than one result")
                return False
            self._total = frame.total
        elif frame.seq != len(self._parts) or frame.total != self._total:
            self.fail(f"result frames out of order ({frame.seq}/{frame.total} after {len(self._parts)}/{self._total})")
            return False
        self._parts.append(frame.chunk)
        if len(self._parts) < self._total:
            return False
        payload, problem = decode_result("".join(self._parts))
        self._parts = []
        if problem is not None:
            self.fail(problem)
            return False
        self.payload = payload
        return True

    def finish(self) -> None:
        """The stream ended: a result cut short is a problem."""
        if self._parts and self.problem is None:
            self.fail(f"truncated result ({len(self._parts)} of {self._total} frames)")
