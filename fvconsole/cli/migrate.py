"""`fvconsole migrate`: write rank-local dataloader sidecars for a legacy checkpoint.

A dry run unless --yes: the plan is computed and shown, nothing is written.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from fvconsole.cli.checkpoints import add_set_option, format_mismatches, mismatches_json
from fvconsole.cli.common import (
    Block,
    block,
    emit_json,
    format_table,
    progress_printer,
    same_terminal,
    say,
    warn,
    whole_number,
)
from fvconsole.cli.options import add_checkpoint, add_config, add_json, add_torch_check, add_yes
from fvconsole.cli.outcome import Interruption, add_journal_args, journal_json, warn_if_unwritten
from fvconsole.cli.reshard_text import reshard_lines
from fvconsole.core.shared import FvError, Reason, elided, flags, plural

if TYPE_CHECKING:  # the core's records, for the hints only: importing migration costs every start-up
    from fvconsole.cli.outcome import Invocation
    from fvconsole.core.migration import (
        ColumnCheck,
        MigrationPlan,
        MigrationPreview,
        MigrationRequest,
        MigrationResult,
        Refusal,
    )
    from fvconsole.core.shared import Run

DESCRIPTION = """\
Recompute every rank's streaming-dataloader cursor for a legacy checkpoint and write
dataloader_state_rank<r>.pt sidecars plus migration_receipt.json into --output-dir, for
FastVideo's FASTVIDEO_DATALOADER_STATE_DIR. With --reshard, carry a checkpoint's loader
state (legacy, or FastVideo-native with its own sidecars) to the world size and sp size of
--config (elastic resume). The checkpoint is never modified.

Without --yes this is a dry run: the config mismatch report, the plan and the per-rank
cursors are printed and nothing is written. --expected-step, --expected-world-size and
--consumed-batches-per-rank are deliberate confirmations: any mismatch refuses. With --yes
the set is staged beside the output dir and published with one atomic rename (or an
atomic swap with --overwrite), so the output dir never holds a partial set, then read back
and compared with what was written. Migrations to one output dir take turns through the
lock file .<name>.fvconsole-lock beside it, from any host sharing the filesystem; the lock
of a killed migration is taken over (with a warning) by the next run on the host that ran
it; --break-lock breaks one that cannot be judged from here (another host or container).
"""

EPILOG = """\
example (dry run, then write):
  fvconsole migrate --config run.yaml --checkpoint outputs/checkpoint-4000 \\
      --output-dir /shared/gb200/dataloader-state-4000 \\
      --expected-step 4000 --expected-world-size 64 --consumed-batches-per-rank 4000
  fvconsole migrate ... --yes
  export FASTVIDEO_DATALOADER_STATE_DIR=/shared/gb200/dataloader-state-4000

elastic resume (the new job's world size; the dry run shows every mode's accounting):
  fvconsole migrate --config run-128gpus.yaml --checkpoint outputs/checkpoint-4000 \\
      --output-dir /shared/gb200/dataloader-state-4000-128 \\
      --expected-step 4000 --expected-world-size 64 --consumed-batches-per-rank 4000
  fvconsole migrate ... --reshard nearest --yes
  (a FastVideo-native checkpoint: --output-dir /shared/views/checkpoint-4000, a checkpoint view
  to resume from with training.checkpoint.resume_from_checkpoint)

exit codes: 0 dry run or written, 1 refused (nothing written; also: another migration
holds the lock), 2 usage error, 3 failed part-way (the output dir was not changed) or the
published set did not read back as written (details reported); 143/129/130 stopped by
SIGTERM/SIGHUP/Ctrl-C before publishing (staging dir and lock removed; once publishing
has begun it completes first, then exit 3).
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `migrate` parser."""
    parser = sub.add_parser(
        "migrate",
        help="write rank-local dataloader sidecars for a legacy checkpoint, or reshard a checkpoint's "
             "(dry run unless --yes)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from fvconsole.core.migration import RESHARD_MODES  # the modes the command line offers are the core's

    add_config(parser, "the run config (YAML)", required=True)
    add_checkpoint(parser, "the checkpoint-<step> dir: a legacy one, or with --reshard also a FastVideo-native one")
    parser.add_argument(flags.OUTPUT_DIR, required=True, metavar="DIR", help="where to write the sidecar set (outside the checkpoint)")
    parser.add_argument("--expected-step", required=True, type=whole_number(0), metavar="S", help="the checkpoint's step")
    parser.add_argument("--expected-world-size", required=True, type=whole_number(1), metavar="W",
                        help="the checkpoint's world size (the run that saved it; with --reshard the new one is "
                             "--config's)")
    parser.add_argument(
        "--consumed-batches-per-rank", required=True, type=whole_number(0), metavar="B",
        help="batches each rank consumed (= step x gradient_accumulation_steps)",
    )
    add_set_option(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing sidecar set atomically")
    parser.add_argument(
        "--skip-source-check", action="store_true",
        help="accept dataset files whose size/mtime drifted from the manifest",
    )
    parser.add_argument(
        "--break-lock", action="store_true",
        help="break the output dir's lock of a migration of another host or container that you know "
             "is gone (a killed run of this host's is taken over without it); a holder seen running "
             "is never broken",
    )
    parser.add_argument(
        flags.RESHARD, choices=RESHARD_MODES, metavar="MODE", default=None,
        help="elastic resume on the run config's world size / sp size: where the new ranks start "
        f"({_modes(RESHARD_MODES)}; a dry run without it shows each mode's accounting)",
    )
    add_yes(parser, "write the sidecars (default: dry run)")
    add_torch_check(parser, "with --yes: also load each sidecar with torch.load(weights_only=True) before publishing "
                            "(imports torch; sidecars are written in torch's format without it)")
    add_json(parser, "print exactly one JSON object")
    add_journal_args(parser)
    parser.add_argument("--workers", type=whole_number(1), default=None, help=argparse.SUPPRESS)
    parser.set_defaults(func=_run)


def _modes(modes: tuple[str, ...]) -> str:
    """``next-epoch, epoch-start or nearest``."""
    return f"{', '.join(modes[:-1])} or {modes[-1]}"


def _request(args: argparse.Namespace) -> MigrationRequest:
    from fvconsole.core.migration import MigrationRequest

    return MigrationRequest(
        config_path=args.config,
        checkpoint=args.checkpoint,
        output_dir=args.output_dir,
        expected_step=args.expected_step,
        expected_world_size=args.expected_world_size,
        consumed_batches_per_rank=args.consumed_batches_per_rank,
        overrides=tuple(args.overrides),
        overwrite=args.overwrite,
        skip_source_check=args.skip_source_check,
        reshard=args.reshard,
    )


def _run(args: argparse.Namespace, invocation: Invocation) -> int | Interruption:
    from fvconsole.core.migration import preview_migration

    preview = preview_migration(_request(args), break_lock=args.break_lock)
    mismatches = mismatches_json(preview.mismatches)
    warnings = list(preview.warnings)
    refusals = list(preview.refusals)
    if refusals or preview.plan is None:
        _refuse(args, preview, refusals, mismatches, warnings)
    plan = preview.plan
    extra = [n.cli for n in (*plan.notes, *plan.output_dir_notes)]
    if not args.yes:
        if args.json:
            emit_json({"executed": False, "plan": plan.to_json(), "mismatches": mismatches,
                       "receipt": None, "warnings": warnings})
        else:
            say(_report(plan, preview, args.config))
            warn(*extra)
            say("", f"dry run: nothing written; re-run with --yes to write {plural(plan.world_size, 'sidecar')} "
                f"to {os.path.abspath(plan.output_dir)}")
        return 0
    from fvconsole.core.journal import appender
    from fvconsole.core.migration import MigrationOperation, completed
    from fvconsole.core.shared import run_locked

    base = {"executed": False, "plan": plan.to_json(), "mismatches": mismatches, "receipt": None, "warnings": warnings}
    if not args.json:
        say(_report(plan, preview, args.config))
        warn(*extra)

    def execution_warning(why: Reason) -> None:  # execution's own findings (staging dirs left alone), once each
        warnings.append(why.cli)
        if not args.json:
            warn(why.cli)

    def lock_note(why: Reason) -> None:  # a killed run's lock taken over: on stderr, also under --json
        warnings.append(why.cli)
        warn(why.cli)

    progress = None if args.json and not sys.stderr.isatty() else progress_printer("writing sidecars", plain_lines=True)
    operation = MigrationOperation(plan, command=invocation.command_line, workers=args.workers,
                                   on_warning=execution_warning, on_lock_note=lock_note, torch_check=args.torch_check)
    try:
        run = run_locked(operation, break_stale=args.break_lock, journal=appender(invocation.journal),
                         progress=progress)
    except FvError as exc:  # a refusal before the first write
        raise exc.with_details(_refusal_details(exc, base)) from None
    result = operation.settled(run)
    if run.stop is not None:  # Ctrl-C, SIGTERM, SIGHUP (fvconsole.core.shared.interrupts)
        return _stopped(run, base)
    if run.failure is not None:  # failed part-way (exit 3): where it stopped, and its journal line
        warn_if_unwritten(run.journal)
        details = dict(base, failure=run.failure.report, journal=journal_json(run.journal))
        raise run.failure.with_details(details) from None
    assert result is not None
    invocation.record_write(completed(result.sidecars, result.output_dir))
    warn_if_unwritten(run.journal)
    if args.json:
        emit_json(dict(result.to_json(), journal=journal_json(run.journal)))
        return 0
    on = _resume_topology(result.plan)
    if result.plan.links:  # a native checkpoint's reshard: FastVideo resumes from the view itself
        say("", f"wrote {plural(result.sidecars, 'sidecar')} to the checkpoint view {result.output_dir} "
            f"({plural(len(result.plan.links), 'entry', 'entries')} linked to {result.plan.checkpoint})",
            f"receipt: {result.receipt_path}", f"next step: resume training{on} with (FASTVIDEO_DATALOADER_STATE_DIR unset)",
            f"  training.checkpoint.resume_from_checkpoint: {result.output_dir}")
        return 0
    say("", f"wrote {plural(result.sidecars, 'sidecar')} to {result.output_dir}", f"receipt: {result.receipt_path}",
        f"next step: resume training{on} with", f"  export FASTVIDEO_DATALOADER_STATE_DIR={result.output_dir}")
    return 0


def _resume_topology(plan: MigrationPlan) -> str:
    """`` on world size 16 (sp size 2; this set is for 16 ranks)`` after a reshard (the console says it too);
    empty for a migration, whose set is for the checkpoint's own world size."""
    if plan.reshard is None:
        return ""
    return f" on world size {plan.world_size} (sp size {plan.sp_world_size}; this set is for {plan.world_size} ranks)"


def _refusal_details(exc: FvError, base: dict[str, object]) -> dict[str, object]:
    """The command's JSON for a re-check's refusal before the first write (nothing was written).

    A re-check right before writing refuses with a reason (the preview's code and field for the
    same rule), so its refusal object is the preview's shape: ``Refusal(reason).to_json()``.
    """
    from fvconsole.core.migration import Refusal
    from fvconsole.core.shared import invalid

    # every refusal of execution carries its reason (an unforeseen one: its text)
    return dict(base, refusals=[Refusal(exc.reason or invalid("execute", exc.message)).to_json()])


def _stopped(run: Run[MigrationPlan, MigrationResult], base: dict[str, object]) -> Interruption:
    """The command's JSON for an interruption: once execution had begun writing, where and its journal line."""
    from fvconsole.core.migration import MigrationFailure

    stop = run.stop
    failure = stop.account if isinstance(stop.account, MigrationFailure) else None
    merged = dict(base, executed=bool(failure and failure.output_dir_changed))
    if failure is not None:  # staging had begun (or the set was published): who stopped it, and where
        warn_if_unwritten(run.journal)
        merged["failure"] = {**failure.to_json(), "interrupted_by": stop.name}
        merged["journal"] = journal_json(run.journal)
    return Interruption(stop, merged)


def _refuse(args: argparse.Namespace, preview: MigrationPreview, refusals: list[Refusal], mismatches: list[dict],
            warnings: list[str]) -> None:
    from fvconsole.core.migration import Refusal
    from fvconsole.core.shared import invalid

    if not refusals:
        refusals = [Refusal(invalid("plan", "no plan could be computed"))]
    if not args.json:
        lines = [format_mismatches(preview.mismatches, args.config)] if preview.mismatches else []
        if lines:
            say(*lines)
        warn(*warnings)
        if preview.reshard is not None:
            say(*reshard_lines(preview.reshard), "")
        # On one terminal the `error:` line below says the first refusal: the block lists the others only.
        listed = refusals[1:] if same_terminal() else refusals
        if listed:
            head = "" if listed is refusals else "; the first is the error line below"
            say(f"refused ({plural(len(refusals), 'reason')}); nothing written{head}:",
                *[f"  - {r.message}" for r in listed])
    first = refusals[0].message
    more = f" (+{plural(len(refusals) - 1, 'more refusal')})" if len(refusals) > 1 else ""
    details = {"executed": False, "mismatches": mismatches, "refusals": [r.to_json() for r in refusals],
               "warnings": warnings, "columns": None if preview.columns is None else preview.columns.to_json()}
    if preview.reshard is not None:
        details["reshard"] = preview.reshard.to_json()
    raise FvError(first + more, details=details, reason=refusals[0].reason)


def _columns_text(columns: ColumnCheck) -> str:
    """The columns line; a check that could not run is the plan's warning (on stderr), said once."""
    return "not checked (see the warning)" if columns.verdict == "not-checked" else columns.message


def _report(plan: MigrationPlan, preview: MigrationPreview, config_file: str) -> Block:
    """Mismatches, warnings, plan summary and the per-rank table (head/tail for long ones)."""
    lines = []
    if preview.mismatches:
        lines += [format_mismatches(preview.mismatches, config_file), ""]
    else:
        lines += ["config: the run config equals the checkpoint's embedded config (all keys)", ""]
    groups = plan.world_size // plan.sp_world_size if plan.sp_world_size else plan.world_size
    lines += [
        f"checkpoint: {plan.checkpoint} (step {plan.step})",
        f"manifest:   {plan.manifest_path} ({plural(plan.num_row_groups, 'row group')}, "
        f"{plural(plan.total_rows, 'row')}, "
        f"fingerprint {plan.manifest_fingerprint[:12]})",
        *([f"columns:    {_columns_text(plan.columns)}"] if plan.columns is not None else []),
        f"world size {plan.world_size}, SP size {plan.sp_world_size} ({plural(groups, 'data-parallel group')}), "
        f"batch size {plan.batch_size}, gradient accumulation {plan.gradient_accumulation_steps}",
        f"consumed batches per rank {plan.consumed_batches_per_rank} -> yielded samples per rank "
        f"{plan.yielded_samples_per_rank} of {plan.samples_per_worker} per worker "
        f"({plan.epoch_progress * 100:.1f}% of the epoch)",
        "",
    ]
    if plan.reshard is not None:
        lines[-2:-1] = [f"reshard {plan.reshard.mode}: every rank starts epoch {plan.epoch} at yielded sample "
                        f"{plan.yielded_samples_per_rank} of {plan.samples_per_worker} per worker",
                        "", *reshard_lines(plan.reshard)]
    rows = elided(plan.ranks, lambda c: c.cells(), lambda n: ("...", f"{n} more", "", "", "", "", ""))
    lines.append(format_table(
        ["rank", "sp group", "rg position", "row offset", "yielded", "next sample", "next rg"], rows,
        right=(0, 1, 2, 3, 4, 5, 6),
    ))
    return block(lines)
