#!/usr/bin/env python3
"""Render the reliability table of docs/reliability.md from the suite's JSON-lines report.

Usage:
    FVCONSOLE_RELIABILITY_REPORT=/tmp/rel.jsonl python -m pytest tests/reliability
    python scripts/reliability_report.py /tmp/rel.jsonl > table.md
    python scripts/reliability_report.py /tmp/rel.jsonl --update            # docs/reliability.md
    python scripts/reliability_report.py /tmp/rel.jsonl --update OTHER.md

With ``--update`` the table between the ``<!-- reliability-table:begin/end -->`` markers of
that file (default: docs/reliability.md) is replaced, so the committed table is always the
suite's own output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

BEGIN = "<!-- reliability-table:begin -->"
END = "<!-- reliability-table:end -->"
#: The page that holds the committed table (``--update`` without a file).
DEFAULT_TARGET = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"
CATEGORY_ORDER = (
    "crash: migrate",
    "crash: evict",
    "signal: migrate",
    "signal: evict",
    "disk full",
    "permissions",
    "hostile input",
    "security",
    "races",
    "tui",
)


def load(path: Path) -> list[dict]:
    """Records from the report (one JSON object per line; blank lines ignored)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def aggregate(records: list[dict]) -> list[tuple[str, str, int, int, Counter, Counter]]:
    """(category, fault, tests, trials, test outcomes, trial outcomes) per fault, in table order."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for rec in records:
        groups[(rec["category"], rec["fault"])].append(rec)
    order = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    rows = []
    for (category, fault), recs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        test_outcomes = Counter(r["outcome"] for r in recs)
        trial_outcomes: Counter = Counter()
        for r in recs:
            trial_outcomes.update(r.get("outcomes") or {})
        rows.append((category, fault, len(recs), sum(r["trials"] for r in recs), test_outcomes, trial_outcomes))
    return rows


def _fmt_counter(counter: Counter) -> str:
    return ", ".join(f"{k} ×{v}" if v != 1 else k for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def render(records: list[dict]) -> str:
    """The Markdown table plus a one-line total."""
    lines = [
        "| category | fault injected | tests | trials | result | observed outcomes |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    totals: Counter = Counter()
    trials_total = 0
    for category, fault, tests, trials, test_outcomes, trial_outcomes in aggregate(records):
        totals.update(test_outcomes)
        trials_total += trials
        result = _fmt_counter(test_outcomes).replace("|", "/")
        observed = _fmt_counter(trial_outcomes).replace("|", "/") or "-"
        lines.append(f"| {category} | {fault.replace('|', '/')} | {tests} | {trials} | {result} | {observed} |")
    summary = ", ".join(f"{v} {k}" for k, v in sorted(totals.items()))
    lines.append("")
    lines.append(f"Total: {sum(totals.values())} tests ({summary}), {trials_total} fault trials.")
    return "\n".join(lines) + "\n"


def update(target: Path, table: str) -> None:
    """Replace the table between the markers of ``target`` (markers must exist)."""
    text = target.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{target}: markers {BEGIN} / {END} not found")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    target.write_text(f"{head}{BEGIN}\n{table}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path, help="JSON-lines file written by the suite")
    parser.add_argument(
        "--update", type=Path, nargs="?", const=DEFAULT_TARGET, metavar="MD",
        help="rewrite the table inside this Markdown file (no value: docs/reliability.md)",
    )
    args = parser.parse_args(argv)
    try:
        records = load(args.report)
    except (OSError, ValueError) as exc:
        print(f"error: {args.report}: {exc}", file=sys.stderr)
        return 1
    table = render(records)
    if args.update:
        update(args.update, table)
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
