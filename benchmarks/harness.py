"""Timing, result rows, the machine description and the printed table."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Row:
    """One line of the results table; ``ratio`` is baseline / fvconsole (higher is better).

    ``*_cpu`` are CPU seconds (this process, or the child for a subprocess). When both sides
    have one, the ratio uses CPU time: on a shared machine wall time mostly measures the
    neighbours, while CPU time of single-threaded work does not.
    """

    case: str
    fv_seconds: float | None
    baseline_seconds: float | None = None
    baseline: str = ""
    target: str = ""
    met: bool | None = None
    note: str = ""
    fv_cpu: float | None = None
    baseline_cpu: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.fv_cpu and self.baseline_cpu is not None:
            return self.baseline_cpu / self.fv_cpu
        if not self.fv_seconds or self.baseline_seconds is None:
            return None
        return self.baseline_seconds / self.fv_seconds

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Wall time of one call and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def measure(fn: Callable[[], Any], repeat: int = 1) -> Timing:
    """Fastest wall and CPU time over ``repeat`` calls (the least disturbed by other load)."""
    walls, cpus = [], []
    for _ in range(max(1, repeat)):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return Timing(min(walls), min(cpus))


def run_command(cmd: Sequence[str], stdout: Any = None, cwd: str | None = None) -> tuple[Timing, int]:
    """Run a subprocess; its wall time, its own CPU time (user + sys) and its exit code."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(list(cmd), stdout=stdout if stdout is not None else subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu), proc.returncode


def best_command(cmd: Sequence[str], repeat: int) -> Timing:
    """Fastest wall and CPU time of a command that must succeed."""
    runs = []
    for _ in range(max(1, repeat)):
        timing, code = run_command(cmd)
        if code != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {code}")
        runs.append(timing)
    return Timing(min(t.wall for t in runs), min(t.cpu for t in runs))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, str]:
    """CPU, cores, Python, torch and OS, printed above the table."""
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:  # pragma: no cover - torch is a dependency
        torch_version = "not installed"
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "python": sys.version.split()[0],
        "torch": torch_version,
        "os": f"{platform.system()} {platform.release()}",
        # Other work on the machine skews every absolute number; the ratios are what count.
        "load average (1/5/15 min)": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 0.001:
        return f"{value * 1e6:.0f} us"
    if value < 1:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s"


def _fmt_pair(wall: float | None, cpu: float | None) -> str:
    if cpu is None:
        return _fmt_seconds(wall)
    return f"{_fmt_seconds(wall)} ({_fmt_seconds(cpu)})"


def _fmt_ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}x" if value < 100 else f"{value:.0f}x"


def _fmt_met(value: bool | None) -> str:
    return {True: "yes", False: "NO", None: "-"}[value]


def format_table(rows: Sequence[Row]) -> str:
    """A Markdown table (prints well on a terminal and pastes into docs/performance.md)."""
    headers = ("case", "fvconsole wall (cpu)", "baseline", "baseline wall (cpu)", "ratio", "target", "met", "notes")
    body = [
        (r.case, _fmt_pair(r.fv_seconds, r.fv_cpu), r.baseline or "-", _fmt_pair(r.baseline_seconds, r.baseline_cpu),
         _fmt_ratio(r.ratio), r.target or "-", _fmt_met(r.met), r.note)
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in [headers, *body]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), rule, *(line(b) for b in body)])


def format_machine(info: dict[str, str]) -> str:
    return "machine: " + ", ".join(f"{k} {v}" for k, v in info.items())
