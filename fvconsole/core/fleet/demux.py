"""Split one srun's output into per-node results, within a per-node byte budget.

srun runs with ``--label``, so each line of a task's stdout/stderr arrives as ``<task>: text``.
A task becomes a node by its first frame naming a node of the step (a one-node step knows
its node up front, and also takes unlabelled lines). Everything is read incrementally and
counted per task: past ``cap`` bytes a task's further output is dropped and its node is
``invalid`` ("output exceeds ..."), so a node printing a gigabyte costs the login node no
more than ``cap`` (one-node steps are stopped at once: see ``over_cap``). Lines longer than
any frame are never buffered whole. Nothing here raises for what a node prints.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fvconsole.core.fleet.frames import FrameError, ResultAssembler, parse_frame

#: The longest line kept in memory; frames are < 1 KiB, so a longer line is noise.
MAX_LINE = 64 << 10
_TAIL_LINES = 3
_TAIL_CHARS = 400
_LABEL = re.compile(rb" *([0-9]{1,9}): ")
_SRUN_NODE_LINE = re.compile(r"srun: error: ([A-Za-z0-9._-]+): tasks? [0-9,\-\[\]]+: ")


def _text(line: bytes) -> str:
    return line.decode("utf-8", "replace").strip()[:_TAIL_CHARS]


@dataclass
class NodeStream:
    """What one node sent (mutable while the step runs)."""

    node: str
    result: ResultAssembler = field(default_factory=ResultAssembler)
    bytes: int = 0
    over_cap: bool = False
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=_TAIL_LINES))

    @property
    def started(self) -> bool:
        return self.result.started or self.over_cap


class _Lines:
    """Bytes -> lines, never holding more than MAX_LINE of one line.

    Yields ``(line, size, whole)``: an overlong line is handed on once as its head (which
    carries the srun label) with ``whole=False``, then as ``(None, n, False)`` continuations
    that only count bytes. Linear in the bytes however they arrive: a line still open is kept
    as its pieces, and only the new data is searched for its end (srun's output comes in
    pieces of 1 KiB or less; re-joining a 64 KiB open line for each cost 64 copies of it).
    """

    def __init__(self) -> None:
        self._open: list[bytes] = []
        self._open_bytes = 0
        self._skipping = False

    @property
    def held(self) -> int:
        """Bytes of the open line kept in memory (at most MAX_LINE)."""
        return self._open_bytes

    def _take(self, piece: bytes) -> bytes:
        """The open line with ``piece`` after it, and nothing open any more."""
        if not self._open:
            return piece
        line = b"".join([*self._open, piece])
        self._open, self._open_bytes = [], 0
        return line

    def feed(self, data: bytes, final: bool = False) -> list[tuple[bytes | None, int, bool]]:
        out: list[tuple[bytes | None, int, bool]] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            piece = data[start:end]
            start = end + 1
            if self._skipping:
                out.append((None, len(piece) + 1, False))
                self._skipping = False
            else:
                line = self._take(piece)
                out.append((line, len(line) + 1, True))
        rest = data[start:]
        if self._skipping:
            if rest:
                out.append((None, len(rest), False))
        elif rest:
            self._open.append(rest)
            self._open_bytes += len(rest)
            if self._open_bytes > MAX_LINE:
                size = self._open_bytes
                out.append((self._take(b"")[:MAX_LINE], size, False))
                self._skipping = True
        if final:
            if self._open:
                line = self._take(b"")
                out.append((line, len(line) + 1, True))
            self._skipping = False
        return out


class StepDemux:
    """Per-node streams of one srun (one node, or many in a single step)."""

    def __init__(self, nodes: Sequence[str], cap: int,
                 on_result: Callable[[str], None] | None = None) -> None:
        self.nodes = tuple(nodes)
        self.cap = cap
        self.streams = {node: NodeStream(node) for node in self.nodes}
        self.srun_stderr: deque[str] = deque(maxlen=_TAIL_LINES)
        self.over_cap = False  # a one-node step went over its budget
        self._settled: set[str] = set()  # nodes with a final state: result, problem or over budget
        self._lost: set[int] = set()  # tasks over budget before naming their node
        self._single = self.nodes[0] if len(self.nodes) == 1 else None
        self._task_node: dict[int, str] = {0: self._single} if self._single else {}
        self._claimed: set[str] = set(self._task_node.values())
        self._task_bytes: dict[int, int] = {}
        self._out, self._err = _Lines(), _Lines()
        self._out_task: int | None = None  # task of the overlong stdout line being skipped
        self._on_result = on_result

    # ---------------------------------------------------------------- input

    def feed_stdout(self, data: bytes, final: bool = False) -> None:
        for line, size, whole in self._out.feed(data, final):
            if line is None:
                self._count(self._out_task, size)
                continue
            task, body = self._label(line)
            self._out_task = task
            if self._count(task, size):
                if whole:
                    self._frame(task, body)
                elif body.startswith(b"FVNODE "):
                    self._frame_error(task, None, f"result frame longer than {MAX_LINE} bytes")

    def feed_stderr(self, data: bytes, final: bool = False) -> None:
        for line, _size, _whole in self._err.feed(data, final):
            if line is None:
                continue
            match = _LABEL.match(line)
            task = int(match.group(1)) if match else None
            text = _text(line[match.end():] if match else line)
            if not text:
                continue
            node = self._task_node.get(task) if task is not None else None
            if node is None and task is None:
                named = _SRUN_NODE_LINE.match(text)
                node = named.group(1) if named and named.group(1) in self.streams else self._single
                self.srun_stderr.append(text)
            if node is not None:
                self.streams[node].stderr.append(text)

    def finish(self) -> None:
        """srun's output ended (or was cut off)."""
        self.feed_stdout(b"", final=True)
        self.feed_stderr(b"", final=True)
        for stream in self.streams.values():
            stream.result.finish()

    @property
    def settled(self) -> bool:
        """Nothing more to wait for: every node has a result, a problem or went over budget
        (a task that went over budget before naming its node accounts for one node; such a
        node never started, and a single step retries it on its own)."""
        return len(self._settled) + len(self._lost) >= len(self.nodes)

    # ---------------------------------------------------------------- internals

    def _mark(self, node: str | None) -> None:
        if node is None or node in self._settled:
            return
        stream = self.streams[node]
        if stream.over_cap or stream.result.problem is not None or stream.result.payload is not None:
            self._settled.add(node)

    def _label(self, line: bytes) -> tuple[int | None, bytes]:
        match = _LABEL.match(line)
        if match:
            return int(match.group(1)), line[match.end():]
        return (0 if self._single else None), line

    def _count(self, task: int | None, size: int) -> bool:
        """Charge ``size`` bytes to a task; False once it is over its budget (drop the line)."""
        if task is None:
            return False
        total = self._task_bytes.get(task, 0) + size
        self._task_bytes[task] = total
        node = self._task_node.get(task)
        if node is not None:
            self.streams[node].bytes = total
        if total <= self.cap:
            return True
        if node is None:
            self._lost.add(task)
        elif not self.streams[node].over_cap:
            self.streams[node].over_cap = True
            self.over_cap = self.over_cap or self._single is not None
            self._mark(node)
        return False

    def _frame(self, task: int, body: bytes) -> None:
        node = self._task_node.get(task)
        try:
            frame = parse_frame(body)
        except FrameError as exc:
            self._frame_error(task, exc.node, exc.reason)
            return
        if frame is None:
            return  # noise (a prolog, a warning): tolerated, and counted against the budget
        if node is None:
            node = self._claim(task, frame.node)
            if node is None:
                return
        elif frame.node != node:
            self.streams[node].result.fail(f"answered as node {frame.node[:64]!r}")
            self._mark(node)
            return
        if self.streams[node].result.add(frame) and self._on_result is not None:
            self._on_result(node)
        self._mark(node)

    def _frame_error(self, task: int, claimed: str | None, reason: str) -> None:
        target = self._task_node.get(task) or self._claim(task, claimed)
        if target is not None:
            self.streams[target].result.fail(reason)
            self._mark(target)

    def _claim(self, task: int, name: str | None) -> str | None:
        """Bind a task to the node its first frame names (a node of this step, not yet taken)."""
        if name is None or name not in self.streams:
            return None
        if name in self._claimed:
            self.streams[name].result.fail("answered by more than one task")
            self._mark(name)
            return None
        self._claimed.add(name)
        self._task_node[task] = name
        stream = self.streams[name]
        stream.bytes = self._task_bytes.get(task, 0)
        return name
