"""`fvconsole checkpoints prune OUTPUT_DIR`: what of a training output dir may go, and removing it.

A dry run unless --yes; the dry run and --yes plan with the same function (``plan_prune``) on
a fresh scan, --yes under the output dir's lock. Its own module: the plan and result
renderers beside the options (``checkpoints.py`` lists and shows).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from fvconsole.cli.common import (
    Block,
    block,
    emit_json,
    format_table,
    progress_printer,
    say,
    warn,
    whole_number,
)
from fvconsole.cli.options import add_grace, add_json, add_yes
from fvconsole.cli.outcome import Interruption, add_journal_args, journal_json, warn_if_unwritten
from fvconsole.core.shared import (
    EXIT_OK,
    FvError,
    PartialFailure,
    UsageError,
    clipped,
    flags,
    human_bytes,
    plural,
)

if TYPE_CHECKING:  # the core's records, for the hints only: importing retention costs every `checkpoints` start-up
    from fvconsole.cli.outcome import Invocation
    from fvconsole.core.retention import PrunePlan, PruneResult, PruneRules
PRUNE_HELP = """\
Delete the checkpoint-<step> dirs of a training output dir that no keep rule keeps.
A dry run unless --yes: it lists what would go and what stays, and why.

Complete checkpoints are selected by --keep-last N (beyond the N newest complete ones) and
--older-than D (newest file modified more than D ago); with both, a checkpoint goes only
when it is beyond the newest N *and* older than D. Incomplete checkpoints (no dcp/ directory,
dcp/.metadata missing or not a readable regular file, or an rng_state_rank<r>.pt missing;
`checkpoints show` says which) are selected by --incomplete; one newer than the
newest complete checkpoint only once older than --grace (default 10m). --step N selects
checkpoint-N, complete or not, by name (as the console's marked prune; a step that is not
there refuses the prune). --keep-every K (complete checkpoints whose step is a multiple of K)
and --keep STEP only keep.

Never deleted, whatever the flags: the newest complete checkpoint; one with a file open or
mapped by a live process on this node (named by pid); the one whose published sidecar set
(found by its receipt in the output dir's subdirectories, two levels down, e.g.
dataloader-state/checkpoint-<step>) is the newest resumable state; a symlink, or anything
that is not a checkpoint-<step> directory of this output dir; anything across a mount; one
this user could not remove entirely.

--yes takes the output dir's lock (the one a migration into it takes: a prune and a
migration exclude each other; named from the real directory, so a symlink to it or ~ takes
the same lock), plans again under it, renames each victim out of the
checkpoint-<step> pattern (FastVideo's "latest" and its cleanup never see a half-deleted
one), re-checks it and removes it with a progress line on stderr. A prune interrupted part-way
leaves only hidden .fvconsole-pruning-* leftovers, which the next prune removes first
(unless the prune that named one still runs on this host). One checkpoint that cannot be
removed is reported and the rest go on. Each execution that removed something appends one
line to the journal (`fvconsole history`).

examples:
  fvconsole checkpoints prune /runs/gb200/outputs --keep-last 3            # preview only
  fvconsole checkpoints prune /runs/gb200/outputs --keep-last 3 --keep-every 1000 --yes
  fvconsole checkpoints prune /runs/gb200/outputs --keep-last 2 --older-than 7d --incomplete --json
  fvconsole checkpoints prune /runs/gb200/outputs --step 3000 --step 3500 --yes

exit codes: 0 ok (dry run included), 1 refused (also: another prune or migration holds the
lock), 2 usage error, 3 failed part-way.
"""

#: FastVideo's step counter is an int64; a count larger than this is a typo.
MAX_STEP = 2**63 - 1
MAX_COUNT = 10**9


def _bounded(minimum: int, maximum: int) -> Callable[[str], int]:
    parse_min = whole_number(minimum)

    def parse(text: str) -> int:
        value = parse_min(text)
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    return parse


def register_prune(commands: argparse._SubParsersAction) -> None:
    """Add `checkpoints prune` to the `checkpoints` subcommands."""
    prune = commands.add_parser("prune", help="delete checkpoints no keep rule keeps (dry run unless --yes)",
                                description=PRUNE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    prune.add_argument("dir", metavar="OUTPUT_DIR", help="training output dir (holds checkpoint-<step> dirs)")
    prune.add_argument("--keep-last", type=_bounded(1, MAX_COUNT), metavar="N",
                       help="select complete checkpoints beyond the N newest complete ones")
    prune.add_argument("--keep-every", type=_bounded(1, MAX_STEP), metavar="K",
                       help="also keep complete checkpoints whose step is a multiple of K")
    # --older-than and --keep are spelled as the cache's selectors (core/shared/flags.py) and mean
    # something else here: a checkpoint's newest file, a step kept. Declared here, once each.
    prune.add_argument(flags.OLDER_THAN, metavar="D",
                       help="select complete checkpoints whose newest file is older than D (e.g. 7d, 12h)")
    prune.add_argument(flags.INCOMPLETE, action="store_true", help="select incomplete checkpoints (any of the gaps named above)")
    add_grace(prune, "an incomplete checkpoint newer than the newest complete one goes only once older "
                     "than D (default 10m: it may still be being written)", default="10m")
    prune.add_argument(flags.STEP, metavar="N", type=_bounded(0, MAX_STEP), action="append", default=[],
                       help="select checkpoint-N (repeatable), as the console's marked prune does: still never "
                            "deleted when a rule that always holds keeps it (newest complete, in use, published ...)")
    prune.add_argument(flags.KEEP, metavar="STEP", type=_bounded(0, MAX_STEP), action="append", default=[],
                       help="keep this step (repeatable)")
    add_yes(prune)
    add_json(prune)
    add_journal_args(prune)
    prune.set_defaults(func=run_prune)


def rules_from_args(args: argparse.Namespace) -> PruneRules:
    """Validate the command line into ``PruneRules`` (usage errors come before any disk access)."""
    from fvconsole.core.retention import PruneRules
    from fvconsole.core.shared import parse_duration

    older = parse_duration(args.older_than, flags.OLDER_THAN) if args.older_than is not None else None
    grace = parse_duration(args.grace, flags.GRACE)
    both = sorted(set(args.step) & set(args.keep))
    if both:
        raise UsageError(f"{flags.STEP} {both[0]} and {flags.KEEP} {both[0]} contradict each other")
    return PruneRules(keep_last=args.keep_last, keep_every=args.keep_every, older_than=older,
                      incomplete=args.incomplete, grace=grace, keep_steps=frozenset(args.keep),
                      marked=frozenset(args.step))


def missing_steps(plan: PrunePlan) -> None:
    """A --step that names no checkpoint refuses the whole prune (exit 1, nothing pruned), as `cache evict
    --key` does: it is a typo or the wrong output dir, and pruning the rest would report success for what
    was not asked."""
    there = {k.step for k in plan.kept} | {d.step for d in plan.delete if not d.leftover}
    missing = sorted(plan.rules.marked - there)
    if missing:
        more = f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
        raise FvError(f"checkpoint-{missing[0]}: not a checkpoint of {plan.output_dir} ({flags.STEP}){more}; "
                      "nothing pruned", details={"missing": missing})


def run_prune(args: argparse.Namespace, invocation: Invocation) -> int | Interruption:
    """`checkpoints prune`: 0 ok (dry run too), 1 refused, 2 usage, 3 failed part-way."""
    from fvconsole.core.journal import appender
    from fvconsole.core.retention import (
        LockedPrune,
        PruneOperation,
        plan_prune,
        probe_prune_lock,
        scan_output_dir,
    )
    from fvconsole.core.shared import run_locked

    rules = rules_from_args(args)

    def make_plan() -> PrunePlan:
        plan = plan_prune(scan_output_dir(args.dir), rules)
        missing_steps(plan)
        return plan

    if not args.yes:
        plan = make_plan()
        lock = probe_prune_lock(plan.output_dir)
        if args.json:
            emit_json({**plan.to_json(), "lock": lock.refusal})
        else:
            say(render_plan(plan))
            if lock.refusal:
                say(f"note: {lock.refusal}; --yes would exit 1", err=True)
        warn(*plan.notes)
        return EXIT_OK
    progress = None if args.json else progress_printer("pruning", in_bytes=True, plain_lines=True)
    run = run_locked(PruneOperation(args.dir, make_plan, command=invocation.command_line, progress=progress),
                     journal=appender(invocation.journal))
    if run.stop is not None:  # Ctrl-C, SIGTERM, SIGHUP: what was pruned, in the stop's words
        warn_if_unwritten(run.journal)
        return Interruption(run.stop)
    done = LockedPrune.of(run)
    plan, result = done.plan, done.result
    warn(*done.warnings, *plan.notes)
    warn_if_unwritten(done.journal)
    if result.removed:
        invocation.record_write(done.done_text)
    payload = {**plan.to_json(), **result.to_json(), "journal": journal_json(done.journal)}
    if result.errors:
        if not args.json:
            say(render_result(result))
        raise PartialFailure(f"{plan.output_dir}: {plural(len(result.errors), 'checkpoint')} could not be removed "
                             f"(first: {result.errors[0]})", report=payload)
    if args.json:
        emit_json(payload)
    else:
        say(render_result(result))
    return EXIT_OK


def _step(step: int | None) -> str:
    """A step in a table (a leftover whose name was never recorded has none)."""
    return "?" if step is None else str(step)


def render_plan(plan: PrunePlan) -> Block:
    """What goes, what stays and why, and the bytes freed (dry run)."""
    lines: list[str | Block] = [f"prune plan for {plan.output_dir} (dry run)"]
    if plan.delete:
        lines.append("delete:")
        lines.append(format_table(("STEP", "SIZE", "REASON"),
                                  [(_step(d.step), human_bytes(d.bytes), clipped(d.reason, 160))
                                   for d in plan.delete],
                                  right=(0, 1), wrap="REASON"))
    else:
        lines.append("nothing to delete")
    if plan.kept:
        lines.append("keep:")
        lines.append(format_table(("STEP", "SIZE", "REASON"),
                                  [(k.step, human_bytes(k.bytes), clipped(k.reason, 160)) for k in plan.kept],
                                  right=(0, 1), wrap="REASON"))
    if plan.delete:
        lines.append(f"would free {human_bytes(plan.freed_bytes)} ({plural(len(plan.delete), 'checkpoint')}); "
                     "re-run with --yes")
    return block(lines)


def render_result(result: PruneResult) -> Block:
    lines: list[str | Block] = [f"pruned {plural(len(result.removed), 'checkpoint')} from {result.output_dir}"]
    if result.removed:
        lines.append(format_table(("STEP", "FREED", "REASON"),
                                  [(_step(r.step), human_bytes(r.bytes), clipped(r.reason, 160))
                                   for r in result.removed],
                                  right=(0, 1), wrap="REASON"))
    lines += [f"left in place: {left.why.cli}" for left in result.left]
    lines += [f"error: {err}" for err in result.errors]
    lines.append(f"freed {human_bytes(result.freed_bytes)}")
    return block(lines)
