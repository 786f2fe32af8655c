"""`fvconsole sidecars verify`: check a written sidecar set against a recomputed plan."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from fvconsole.cli.checkpoints import add_set_option
from fvconsole.cli.common import Block, block, command_failed, emit_json, format_table, say, warn
from fvconsole.cli.options import add_checkpoint, add_config, add_json, add_torch_check
from fvconsole.core.shared import MissingExtra, elided, flags, plural

#: The extra --deep needs (pyarrow reads the dataset's next sample ids).
PARQUET = "parquet"

if TYPE_CHECKING:  # the core's record, for the hint only (importing migration costs start-up)
    from fvconsole.core.migration import VerifyResult

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.cli.outcome import Invocation

VERIFY_EPILOG = """\
examples:
  fvconsole sidecars verify --config run.yaml --checkpoint outputs/checkpoint-4000 \\
      --sidecar-dir /shared/gb200/dataloader-state-4000
  fvconsole sidecars verify ... --deep --json

Sidecars are read without torch: the reader understands torch.save's zip format, imports
and runs nothing named in the pickle, refuses compressed records and bounds size, work and
nesting, so a file whose pickle would run code is reported as a problem and never executed.
--torch-check additionally loads every sidecar the reader accepted with
torch.load(weights_only=True) (imports torch, a few seconds) and reports any difference.

exit codes: 0 every sidecar and the receipt match, 1 verification failed or inputs unreadable,
2 usage error.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `sidecars verify`."""
    parser = sub.add_parser(
        "sidecars",
        help="verify rank-local dataloader sidecars",
        description="Work with rank-local dataloader sidecars (dataloader_state_rank<r>.pt).",
    )
    commands = parser.add_subparsers(dest="sidecars_command", metavar="SUBCOMMAND", required=True)
    verify = commands.add_parser(
        "verify",
        help="check a sidecar dir against the plan recomputed from config + checkpoint",
        description="Recompute the migration plan from the run config and the checkpoint, then "
        "compare every sidecar field by field, check the receipt (schema, step, world size, sha256 "
        "of every file) and report missing, extra and foreign files. FastVideo's own validation "
        "receipt (--upstream-receipt, or found in the sidecar dir) must still hold for the files. "
        "--deep also reads, from the Parquet dataset, the id of the next sample each rank will read.",
        epilog=VERIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config(verify, "the run config (YAML)", required=True)
    add_checkpoint(verify, "the checkpoint-<step> dir")
    verify.add_argument(flags.SIDECAR_DIR, required=True, metavar="DIR", help="the dir holding the sidecars")
    add_set_option(verify)
    # --deep here reads the dataset's next sample ids, not a cache's shards: its own declaration.
    verify.add_argument(flags.DEEP, action="store_true", help="read each rank's next sample id from the dataset")
    add_torch_check(verify, "also load every sidecar with torch.load(weights_only=True) and compare (imports torch)")
    verify.add_argument(
        "--upstream-receipt", metavar="PATH",
        help="FastVideo's validation receipt (validate_streaming_dataloader_sidecars.py --output) to check; "
        "default: the newest one in the sidecar dir",
    )
    add_json(verify, "print exactly one JSON object")
    verify.set_defaults(func=_verify)


def _verify(args: argparse.Namespace, _invocation: Invocation) -> int:
    from fvconsole.core.migration import verify_sidecars

    try:
        result = verify_sidecars(
            args.config, args.checkpoint, args.sidecar_dir, overrides=tuple(args.overrides), deep=args.deep,
            torch_check=args.torch_check, upstream_receipt=args.upstream_receipt,
        )
    except MissingExtra as exc:  # name the option that needs the extra: what the user typed
        if not args.deep or exc.extra != PARQUET:
            raise
        raise MissingExtra(f"{flags.DEEP} (each rank's next sample id)", exc.package, exc.extra) from None
    if not args.json:
        say(_report(result, args.deep))
        warn(*result.warnings)
    if not result.ok:
        first = result.problems[0] if result.problems else "unknown problem"
        raise command_failed(1, f"verification failed ({plural(len(result.problems), 'problem')}); first: {first}",
                             result.to_json())
    if args.json:
        emit_json(result.to_json())
    return 0


def _report(result: VerifyResult, deep: bool) -> Block:
    lines = [f"sidecar dir: {result.sidecar_dir}"]
    if result.step is not None:
        lines.append(f"plan: step {result.step}, world size {result.world_size}")
    if result.ranks:
        headers = ["rank", "ok", "rg position", "row offset", "yielded", "next sample"]
        if deep:
            headers.append("next id")
        rows = elided(result.ranks, lambda r: _row(r, deep), lambda n: ["...", f"{n} more"] + [""] * (len(headers) - 2))
        lines.append(format_table(headers, rows, right=(0, 2, 3, 4, 5)))
    upstream = result.upstream_validation
    if upstream is not None:
        lines.append(f"{upstream.summary()}: {upstream.path}")
    if result.ok:
        lines.append(f"OK: {plural(len(result.ranks), 'sidecar')} and the receipt match the plan")
    else:
        lines.append(f"FAILED: {plural(len(result.problems), 'problem')}:")
        lines += elided(result.problems, lambda p: f"  - {p}", lambda n: f"  ... {n} more", 20, 5)
    return block(lines)


def _row(r: dict[str, Any], deep: bool) -> list[Any]:
    row = [r["rank"], "ok" if r["ok"] else "BAD", r["row_group_position"], r["row_offset"],
           r["yielded_samples"], r["next_sample_index"]]
    if deep:
        row.append(r.get("next_sample_id", "-"))
    return row
