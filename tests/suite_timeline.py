"""Where the suite's time goes: a per-test timeline, and its summary.

``--durations`` gives each test's wall time, which on a shared 2-core machine is mostly other
processes' load. With ``FVCONSOLE_TEST_TIMELINE=FILE`` set, every test (in every xdist worker)
appends one JSON line to FILE: its id, xdist group, worker, wall start and end, and the CPU
seconds its worker process and the children it waited for spent on it. Then::

    python tests/suite_timeline.py FILE

prints the run's span, each worker's busy, CPU and idle time (idle: between its first and last
test, no test running), the CPU and wall sums of the largest groups, and the tests that waited
most (wall minus CPU: sleeps, deadlines, a terminal) and cost most CPU. Setting the variable
changes nothing else; the pytest invocation stays the same.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from collections.abc import Iterator

ENV = "FVCONSOLE_TEST_TIMELINE"


def cpu_seconds() -> float:
    """User + system CPU of this process and of its reaped children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def record(nodeid: str, group: str) -> Iterator[None]:
    """Generator around one test's run protocol (a hookwrapper body): appends its line to the file."""
    path = os.environ.get(ENV)
    if not path:
        yield
        return
    start, cpu = time.time(), cpu_seconds()
    yield
    line = {"id": nodeid, "group": group, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "start": start, "end": time.time(), "cpu": cpu_seconds() - cpu}
    with open(path, "a", encoding="utf-8") as out:  # one short write per line: workers append whole lines
        out.write(json.dumps(line) + "\n")


def summary(lines: list[dict]) -> str:
    """The report ``python tests/suite_timeline.py FILE`` prints."""
    if not lines:
        return "no tests recorded"
    out: list[str] = []
    first, last = min(x["start"] for x in lines), max(x["end"] for x in lines)
    cpu = sum(x["cpu"] for x in lines)
    out.append(f"{len(lines)} tests, span {last - first:.1f} s (first test start to last test end), "
               f"CPU in tests {cpu:.1f} s")
    by_worker: dict[str, list[dict]] = collections.defaultdict(list)
    for x in lines:
        by_worker[x["worker"]].append(x)
    for worker, runs in sorted(by_worker.items()):
        busy = sum(x["end"] - x["start"] for x in runs)
        begin, end = min(x["start"] for x in runs), max(x["end"] for x in runs)
        out.append(f"  {worker}: {len(runs)} tests, {begin - first:5.1f}-{end - first:5.1f} s, busy {busy:.1f} s, "
                   f"CPU {sum(x['cpu'] for x in runs):.1f} s, idle between tests {end - begin - busy:.1f} s")
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for x in lines:
        groups[x["group"] if x["group"] != x["id"] else "(single tests)"].append(x)
    out.append("groups (CPU s, wall s, tests):")
    ranked = sorted(groups.items(), key=lambda kv: -sum(x["end"] - x["start"] for x in kv[1]))
    for name, runs in ranked[:12]:
        wall = sum(x["end"] - x["start"] for x in runs)
        out.append(f"  {sum(x['cpu'] for x in runs):7.1f} {wall:7.1f} {len(runs):5d}  {name}")
    out.append("waited most (wall - CPU s, wall s):")
    for x in sorted(lines, key=lambda x: x["cpu"] - (x["end"] - x["start"]))[:12]:
        out.append(f"  {x['end'] - x['start'] - x['cpu']:6.1f} {x['end'] - x['start']:6.1f}  {x['id']}")
    out.append("CPU most (CPU s, wall s):")
    for x in sorted(lines, key=lambda x: -x["cpu"])[:25]:
        out.append(f"  {x['cpu']:6.1f} {x['end'] - x['start']:6.1f}  {x['id']}")
    return "\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as src:
        print(summary([json.loads(line) for line in src if line.strip()]))
