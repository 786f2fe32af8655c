"""`fvconsole preflight`: will the next job's resume work on every rank? One verdict, before `sbatch`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fvconsole.cli.checkpoints import add_set_option
from fvconsole.cli.common import block, emit_json, say, whole_number
from fvconsole.cli.options import add_config, add_job, add_json, add_nodes
from fvconsole.core.shared import UsageError, flags

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.cli.outcome import Invocation

EPILOG = """\
examples:
  fvconsole preflight --config next.yaml --world-size 16 --dataloader-state-dir /shared/state-300
  fvconsole preflight --config run.yaml || exit 1            # inside the job script, before torchrun
  fvconsole preflight --config run.yaml --resume outputs/checkpoint-300 --json
  fvconsole preflight --config run.yaml --cache-root /dev/shm/fv-cache --job 123456

It judges, in the order FastVideo meets them at resume: resolve (the checkpoint
resume_from_checkpoint resolves to), dcp (.metadata and every storage file whole), config
(differences from the embedded config), dataloader (each rank's state as FastVideo resolves,
checks and loads it), rng (each rank's RNG snapshot), dataset (the manifest FastVideo will use
and its fingerprint), room (bytes and inodes for the next save) and, with --cache-root, cache.
Ranks sharing a finding are folded into ranges. It writes nothing and imports no torch.

exit codes: 0 go (warnings allowed; with --strict none), 1 no-go or unreadable config,
2 usage error.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add `preflight`."""
    parser = sub.add_parser(
        "preflight",
        help="judge whether the next job resumes on every rank (before sbatch)",
        description="One verdict on whether the next FastVideo job's resume will work on every rank: "
        "the checkpoint it resolves to, its DCP files, each rank's dataloader state and RNG snapshot, "
        "the manifest the streaming loader will use, and room for the next save.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config(parser, "the next job's run config (YAML)", required=True)
    add_set_option(parser)
    parser.add_argument("--resume", metavar="latest|PATH",
                        help="resume_from_checkpoint to judge (default: the config's "
                        "training.checkpoint.resume_from_checkpoint)")
    parser.add_argument(flags.WORLD_SIZE, type=whole_number(1), metavar="N",
                        help="the world size torch.distributed will report (default: the config's num_gpus)")
    parser.add_argument(flags.DATALOADER_STATE_DIR, metavar="DIR",
                        help="the job's FASTVIDEO_DATALOADER_STATE_DIR (default: as preflight sees it)")
    parser.add_argument("--cache-root", metavar="ROOT", help="also judge the weight shard cache at ROOT")
    where = parser.add_mutually_exclusive_group()
    add_nodes(where, "judge the cache on these nodes, a Slurm hostlist (needs --cache-root)")
    add_job(where, "judge the cache on this running job's nodes (needs --cache-root)")
    parser.add_argument("--strict", action="store_true", help="warnings are a no-go too")
    add_json(parser)
    parser.set_defaults(func=_preflight)


def _preflight(args: argparse.Namespace, _invocation: Invocation) -> int:
    from fvconsole.core.preflight import PreflightRequest, run_preflight

    if (args.nodes or args.job) and not args.cache_root:
        raise UsageError(f"{'--nodes' if args.nodes else '--job'} needs --cache-root (the cache root on each node)")
    request = PreflightRequest.from_flags(
        args.config, overrides=args.overrides, resume=args.resume, world_size=args.world_size,
        dataloader_state_dir=args.dataloader_state_dir, cache_root=args.cache_root, nodes=args.nodes,
        job=args.job, strict=args.strict)
    report = run_preflight(request)
    if args.json:
        emit_json(report.to_json())
    else:
        say(render(report))
    return 0 if report.go else 1


def render(report) -> object:
    """The text report: what is resumed and where the inputs came from, one line per finding, the verdict last."""
    head = (f"checkpoint: {report.resume.checkpoint} (step {report.resume.step})" if report.resume is not None
            else "checkpoint: none (a fresh start)")
    lines = [head, f"world size {report.world_size}, sp size {report.sp_size}"]
    lines += [f"  {note}" for note in report.notes]
    lines += [f"{check.status:<4}  {check.check:<10}  {check.detail}" for check in report.checks]
    if report.fix_line:
        lines.append(report.fix_line)
    lines.append(report.verdict)
    return block(lines)
