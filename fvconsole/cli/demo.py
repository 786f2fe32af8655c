"""`fvconsole demo [DIR] [--no-tui]`: build a realistic workspace and open the console on it."""

from __future__ import annotations

import argparse
import os
import shlex
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.cli.outcome import Invocation

EPILOG = """\
examples:
  fvconsole demo                    # build in a fresh temp dir and open the console
  fvconsole demo ./fv-demo          # build (or rebuild) ./fv-demo, then open the console
  fvconsole demo ./fv-demo --no-tui # build and print the equivalent headless commands

DIR must be empty, missing, or a previous demo workspace (it is rebuilt); anything else is
refused and left untouched: a rebuild deletes only the paths its marker (.fvconsole-demo.json,
with the build's token) lists, and refuses, naming it, anything else in DIR or a mount point
inside it. A build that fails part-way removes what it made (or, if it
cannot, leaves DIR marked so the same command rebuilds it) and names DIR in its error.
Without a terminal (stdin or stdout not a TTY: CI, cron, a pipe) the console is not
opened: the workspace is built and the equivalent commands are printed, as with --no-tui.
exit codes: 0 ok, 1 refused or the build failed (DIR not a demo workspace, disk full),
2 usage.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `demo` parser."""
    parser = sub.add_parser(
        "demo",
        help="build a demo workspace (run, checkpoints, shard cache) and open the console on it",
        description="Build a small, real FastVideo-like workspace: a Parquet dataset and its streaming "
        "manifest, a run config, legacy (DCP) and rank-local checkpoints, and a weight shard cache "
        "with complete, partial, incomplete and invalid entries. Then open the console on it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dir", nargs="?", metavar="DIR", help="where to build (default: a fresh dir under $TMPDIR)")
    parser.add_argument("--no-tui", action="store_true", help="build and print the equivalent CLI commands only")
    parser.set_defaults(func=run_demo)


def cli_commands(ws: object) -> list[str]:
    """The headless commands that do what the console does on this workspace."""
    from fvconsole.demo.fleet_builders import DEMO_JOB

    q = shlex.quote
    ckpt, out = ws.legacy_checkpoint, ws.sidecar_dir  # type: ignore[attr-defined]
    cfg, root = ws.config_path, ws.cache_root  # type: ignore[attr-defined]
    return [
        f"fvconsole checkpoints ls {q(ws.output_dir)}",  # type: ignore[attr-defined]
        f"fvconsole checkpoints show {q(ws.mismatch_checkpoint)} --config {q(cfg)}",  # type: ignore[attr-defined]
        f"fvconsole checkpoints show {q(ckpt)} --tensors",
        f"fvconsole checkpoints ls {q(ws.map_style_output_dir)}   # a map-style run: not migratable",  # type: ignore[attr-defined]
        f"fvconsole migrate --config {q(ws.text_only_config_path)} "  # type: ignore[attr-defined]
        f"--checkpoint {q(ws.text_only_checkpoint)} \\\n"  # type: ignore[attr-defined]
        f"    --output-dir {q(os.path.join(os.path.dirname(ws.text_only_checkpoint), 'dataloader-state'))} "  # type: ignore[attr-defined]
        "--expected-step 120 --expected-world-size 8 --consumed-batches-per-rank 240"
        "   # text_only columns: FastVideo rebuilds the manifest",
        f"fvconsole migrate --config {q(cfg)} --checkpoint {q(ckpt)} --output-dir {q(out)} \\\n"
        "    --expected-step 300 --expected-world-size 8 --consumed-batches-per-rank 600   # dry run",
        f"fvconsole migrate --config {q(cfg)} --checkpoint {q(ckpt)} --output-dir {q(out)} \\\n"
        "    --expected-step 300 --expected-world-size 8 --consumed-batches-per-rank 600 --yes",
        f"fvconsole preflight --config {q(cfg)} --dataloader-state-dir {q(out)}"
        "   # GO now: run.yaml resumes checkpoint-300 (without the dir: NO-GO, exit 1)",
        f"fvconsole sidecars verify --config {q(cfg)} --checkpoint {q(ckpt)} --sidecar-dir {q(out)}",
        f"fvconsole sidecars verify --config {q(cfg)} --checkpoint {q(os.path.join(ws.output_dir, 'checkpoint-100'))} "
        f"--sidecar-dir {q(ws.validated_sidecar_dir)}   # FastVideo's validation receipt",
        f"fvconsole migrate --config {q(cfg)} --checkpoint {q(os.path.join(ws.output_dir, 'checkpoint-400'))} "  # type: ignore[attr-defined]
        f"--set training.distributed.num_gpus=4 \\\n"
        f"    --output-dir {q(os.path.join(ws.root, 'resume', 'checkpoint-400'))} "  # type: ignore[attr-defined]
        "--expected-step 400 --expected-world-size 8 --consumed-batches-per-rank 800 --reshard nearest"
        "   # elastic resume of the native checkpoint on 4 GPUs: dry run",
        f"fvconsole cache ls {q(root)}",
        f"fvconsole cache evict {q(root)} --invalid          # dry run; add --yes to delete",
        f"fvconsole cache verify {q(root)}   # exit 1: a complete entry whose shard header disagrees with its manifest",
        f"fvconsole cache evict {q(root)} --invalid --verify   # dry run: that entry selected too",
        f"{fleet_command(ws)}   # a stand-in fleet: 8 emulated nodes, no Slurm needed",
        f"{fleet_prefix(ws)} fvconsole fleet cache ls --job {DEMO_JOB} "
        f"--cache-root {q(ws.fleet_cache_root)}   # the nodes of the training job (the stand-in squeue)",  # type: ignore[attr-defined]
        f"{fleet_prefix(ws)} fvconsole fleet cache evict --nodes {q(ws.fleet_nodes)} "  # type: ignore[attr-defined]
        f"--cache-root {q(ws.fleet_cache_root)} --invalid   # dry run on every node",  # type: ignore[attr-defined]
        f"{reopen_command(ws)}   # the console again",
        f"{fleet_prefix(ws)} {reopen_command(ws)}   # the console with the stand-in fleet: view 4, nodes "
        f"{ws.fleet_nodes}, cache root {ws.fleet_cache_root}",  # type: ignore[attr-defined]
    ]


def fleet_command(ws: object) -> str:
    """``fleet cache ls`` of the demo's stand-in fleet, its srun first on PATH."""
    q = shlex.quote
    return (f"{fleet_prefix(ws)} fvconsole fleet cache ls --nodes {q(ws.fleet_nodes)} "  # type: ignore[attr-defined]
            f"--cache-root {q(ws.fleet_cache_root)}")  # type: ignore[attr-defined]


def fleet_prefix(ws: object) -> str:
    """``PATH=<the stand-in fleet's bin>:"$PATH"``: its srun, squeue and sinfo found first."""
    return f'PATH={shlex.quote(ws.fleet_bin)}:"$PATH"'  # type: ignore[attr-defined]


def run_demo(args: argparse.Namespace, invocation: Invocation) -> int:
    """Build the workspace, then open the console (or print the commands with --no-tui or no terminal)."""
    import tempfile

    from fvconsole.cli import has_terminal
    from fvconsole.cli.streams import write_err, write_out
    from fvconsole.core.shared import printable, remove_empty_dir
    from fvconsole.demo import require_demo_extra
    from fvconsole.demo.workspace import DemoBuildFailed, build_demo_workspace

    require_demo_extra()  # without torch & co. (the lean install): one line naming the extra, nothing made
    target = args.dir or tempfile.mkdtemp(prefix="fvconsole-demo-")
    started = time.monotonic()
    try:
        ws = build_demo_workspace(target)
    except DemoBuildFailed:
        if not args.dir:  # the fresh temp dir is ours: leave nothing behind when it is empty
            remove_empty_dir(target)
        raise
    invocation.record_write(f"the demo workspace was built in {ws.root}")
    write_out(f"demo workspace: {printable(ws.root)}  (built in {time.monotonic() - started:.1f}s)\n")
    write_out(f"  run config   {printable(ws.config_path)}\n  checkpoints  {printable(ws.output_dir)}\n"
              f"  shard cache  {printable(ws.cache_root)}\n"
              f"  fleet        {printable(ws.fleet_cache_root)} on {ws.fleet_nodes}: emulated nodes, "
              f"no Slurm needed; try it with\n"
              f"    {printable(fleet_command(ws))}\n")
    terminal = has_terminal()
    if args.no_tui or not terminal:
        if not args.no_tui:
            write_err("note: no terminal (stdin or stdout is not a TTY), so the console was not opened; "
                      "open it from a terminal with the last command below\n")
        write_out("\nequivalent commands:\n")
        for command in cli_commands(ws):
            write_out(f"  {printable(command, keep_newlines=True)}\n")
        return 0
    from fvconsole.tui.launch import run_console

    console_args = argparse.Namespace(config=ws.config_path, checkpoints=ws.output_dir, cache_root=ws.cache_root,
                                      read_only=bool(getattr(args, "read_only", False)))
    code = run_console(console_args)
    write_out(f"demo workspace kept at {printable(ws.root)}; reopen it (without rebuilding) with:\n"
              f"  {printable(reopen_command(ws))}\n")
    return code


def reopen_command(ws: object) -> str:
    """The command that opens the console on a built workspace without rebuilding it."""
    q = shlex.quote
    return (f"fvconsole --config {q(ws.config_path)} --checkpoints {q(ws.output_dir)} "  # type: ignore[attr-defined]
            f"--cache-root {q(ws.cache_root)}")  # type: ignore[attr-defined]
