"""`fvconsole checkpoints ls|show`: what a training output dir holds, and whether it can resume.

Also home of the small formatting helpers the `migrate` and `sidecars` commands share
(mismatch tables, `--set` options), so the three commands read alike.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fvconsole.cli.common import Block, block, emit_json, format_table, say, warn
from fvconsole.cli.options import add_config, add_json
from fvconsole.cli.prune import register_prune
from fvconsole.core.shared import elided, flags, head_tail, human_bytes, plural

if TYPE_CHECKING:  # the core's records, for the hints only: importing them costs every start-up
    from fvconsole.cli.outcome import Invocation
    from fvconsole.core.checkpoints import CheckpointInfo, DcpMetadata, DcpTensors, DiskBudget, RunKind
    from fvconsole.core.formats import Mismatch
    from fvconsole.core.retention import FastVideoOutlook

LS_EPILOG = """\
examples:
  fvconsole checkpoints ls /runs/gb200/outputs
  fvconsole checkpoints ls /runs/gb200/outputs/checkpoint-4000 --json

exit codes: 0 listed (even when empty), 1 the directory cannot be read.
"""

SHOW_EPILOG = """\
examples:
  fvconsole checkpoints show /runs/gb200/outputs/checkpoint-4000
  fvconsole checkpoints show /runs/gb200/outputs/checkpoint-4000 --tensors
  fvconsole checkpoints show /runs/gb200/outputs/checkpoint-4000 --config run.yaml \\
      --set training.distributed.num_gpus=64 --json

exit codes: 0 shown (mismatches are reported, not an error), 1 unreadable checkpoint or config.
"""


# --------------------------------------------------------------------------- shared helpers


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set k.a.b=value`` (repeatable): the launch-time dotted overrides of the run."""
    parser.add_argument(
        flags.SET,
        dest="overrides",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a run-config value, e.g. training.distributed.num_gpus=64 (repeatable; "
        "use the same overrides the training launch used)",
    )


def short(value: Any, width: int = 48) -> str:  # a config value: any YAML value
    """A one-line rendering of a config value for tables."""
    text = "<missing>" if value is None else repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def mismatch_rows(mismatches: Sequence[Mismatch], config_file: str) -> list[list[str]]:
    """One row per mismatch; ``from`` names where the config side came from: the ``--set`` that set it, else the file."""
    rows = []
    for data in mismatches_json(mismatches):
        missing = data.get("missing")
        ck = "<missing>" if missing in ("checkpoint", "both") else short(data.get("checkpoint"))
        cfg = "<missing>" if missing in ("config", "both") else short(data.get("config"))
        set_by = data.get("config_set_by")
        source = config_file if set_by is None else f"{flags.SET} {set_by}"
        rows.append(["!" if data.get("critical") else "", str(data.get("path")), ck, cfg, source])
    return rows


def format_mismatches(mismatches: Sequence[Mismatch], config_file: str, *, limit: int = 40) -> str | Block:
    """Critical rows first (the caller's order is already critical-first), marked with '!'; ``config_file``
    as the user named it."""
    if not mismatches:
        return "config: matches the checkpoint's embedded config on every key"
    rows = mismatch_rows(mismatches, config_file)
    critical = sum(1 for r in rows if r[0])
    head, omitted, tail = head_tail(rows, head=limit, tail=4)
    shown = head + ([["", f"... {omitted} more", "", "", ""]] if omitted else []) + tail
    title = f"config mismatches: {critical} critical ('!'), {len(rows) - critical} other"
    return block([title, format_table(["", "path", "checkpoint", "config", "from"], shown)])


def mismatches_json(mismatches: Sequence[Mismatch]) -> list[dict]:
    return [m.to_json() if hasattr(m, "to_json") else dict(m) for m in mismatches]


# --------------------------------------------------------------------------- ls


def _latest_resume(infos: Sequence[CheckpointInfo]) -> CheckpointInfo | None:
    """The checkpoint FastVideo's "latest" resume picks: highest step with a dcp/ dir."""
    from fvconsole.core.checkpoints import latest_resumable

    return latest_resumable(list(infos))


def ls_warnings(infos: Sequence[CheckpointInfo]) -> list[str]:
    warnings = []
    latest = _latest_resume(infos)
    if latest is not None and not latest.complete:
        warnings.append(
            f"{latest.path}: newest checkpoint is incomplete ({latest.gaps_brief}); "
            "FastVideo's \"latest\" resume would pick it — resume from an explicit complete checkpoint"
        )
    for info in infos:
        warnings.extend(f"{info.path}: {p}" for p in getattr(info, "problems", ()))
    return warnings


def _ls(args: argparse.Namespace, _invocation: Invocation) -> int:
    from fvconsole.core.checkpoints import discover_checkpoints, disk_budget

    infos = sorted(discover_checkpoints(args.dir), key=lambda i: i.step, reverse=True)
    outlook = _fastvideo_outlook(args, infos)
    warnings = ls_warnings(infos) + ([w.cli for w in outlook.warnings] if outlook is not None else [])
    latest = _latest_resume(infos)
    budget = disk_budget(args.dir, infos)
    kinds = legacy_run_kinds(infos)
    if args.json:
        emit_json(
            {
                "checkpoints": [dict(i.to_json(), run_kind=kinds[i.path].to_json() if i.path in kinds else None)
                                for i in infos],
                # the path FastVideo's "latest" resume picks (the highest step with a dcp/ dir, complete or not);
                # latest_resume_path names it apart from disk.latest_complete_path, fastvideo.latest_resume_step
                "latest": latest.path if latest is not None else None,
                "latest_resume_path": latest.path if latest is not None else None,
                "disk": budget.to_json(),
                "fastvideo": outlook.to_json() if outlook is not None else None,
                "warnings": warnings,
            }
        )
        return 0
    if not infos:
        say(f"no checkpoint-<step> directories under {args.dir}", budget_line(budget))
        return 0
    rows = [
        [
            i.step,
            "yes" if i.complete else "NO",
            i.kind,
            loader_cell(kinds.get(i.path)),
            i.rank_sidecars,
            i.rng_states,
            "yes" if i.has_config else "no",
            human_bytes(i.bytes) if i.size_complete else "?",
            i.path,
        ]
        for i in infos
    ]
    say(format_table(["step", "complete", "kind", "loader", "sidecars", "rng", "config", "size", "path"], rows,
                     right=(0, 4, 5, 7)))
    say(budget_line(budget))
    if outlook is not None:
        say(*fastvideo_lines(outlook))
    for i in infos:
        if i.view_of is not None:
            say(f"view: {i.path} is a checkpoint view of {i.view_of} (judged through its links)")
        if i.path in kinds and not kinds[i.path].migratable:
            say(f"note: {i.path}: not migratable: {kinds[i.path].why}")
    warn(*warnings)
    return 0


def _fastvideo_outlook(args: argparse.Namespace, infos: Sequence[CheckpointInfo]) -> FastVideoOutlook | None:
    """What FastVideo's cleanup and "latest" will do (None for one checkpoint dir: no output dir to judge)."""
    from fvconsole.core.checkpoints import checkpoint_step
    from fvconsole.core.retention import fastvideo_outlook

    if checkpoint_step(args.dir) is not None:
        return None
    config = None
    if args.config:
        from fvconsole.core.formats import load_run_config

        config = load_run_config(args.config, args.overrides)
    return fastvideo_outlook(os.path.abspath(os.path.expanduser(args.dir)), infos, config, args.overrides or ())


def fastvideo_lines(outlook: FastVideoOutlook) -> list[str]:
    """``fastvideo:`` lines: the cleanup limit and where it is from, what it deletes, what ``latest`` picks."""
    source = f" (from {outlook.limit_source})" if outlook.limit_source else " (not set anywhere)"
    if outlook.cleanup_limit is None:
        cleanup = f"FastVideo will refuse to start: checkpoints_total_limit{source} is not a number it reads"
    elif outlook.cleanup_limit <= 0:
        cleanup = f"checkpoints_total_limit {outlook.cleanup_limit}{source}: its cleanup deletes nothing"
    elif outlook.cleanup_deletes or outlook.cleanup_keeps_symlinks:
        gone = ", ".join(f"checkpoint-{s}" for s in outlook.cleanup_deletes) or "nothing"
        cleanup = (f"checkpoints_total_limit {outlook.cleanup_limit}{source}: right after the next save its "
                   f"cleanup deletes {gone}")
        if outlook.cleanup_keeps_symlinks:
            cleanup += " (symlinked, kept: " + ", ".join(f"checkpoint-{s}" for s in outlook.cleanup_keeps_symlinks) + ")"
    else:
        cleanup = (f"checkpoints_total_limit {outlook.cleanup_limit}{source}: its cleanup after the next save "
                   "deletes nothing")
    latest = f"checkpoint-{outlook.latest}" if outlook.latest is not None else "nothing (a fresh start)"
    return [f"fastvideo: {cleanup}", f"fastvideo: resume_from_checkpoint latest resumes from {latest}"]


def legacy_run_kinds(infos: Sequence[CheckpointInfo]) -> dict[str, RunKind]:
    """The run kind (streaming or map-style loader) of every legacy checkpoint, by path
    (found by the listing's one read of its ``metadata.json``)."""
    from fvconsole.core.checkpoints import checkpoint_run_kind

    return {i.path: i.run_kind or checkpoint_run_kind(i.path) for i in infos if i.kind == "legacy"}


def loader_cell(kind: RunKind | None) -> str:
    """``streaming``, ``map-style`` or ``unknown`` for a legacy checkpoint; ``-`` otherwise."""
    return "-" if kind is None else kind.loader


def budget_line(budget: DiskBudget) -> str:
    """Free space of the output dir's filesystem and how many more saves of the latest size fit."""
    if budget.free_bytes is None:
        return f"disk: free space unknown (statvfs failed on {budget.path})"
    line = f"disk: {human_bytes(budget.free_bytes)} free of {human_bytes(budget.total_bytes)}"
    if budget.saves_fit is None:
        return line + "; no complete save of known size to budget with"
    return (line + f"; room for {plural(budget.saves_fit, 'more save')} of {human_bytes(budget.latest_bytes)} "
            f"(the size of {os.path.basename(budget.latest)})")


# --------------------------------------------------------------------------- show


def dcp_summary(keys: Sequence[str]) -> dict:
    """Key counts per top-level state key, plus the legacy `dataloader.*` keys verbatim."""
    prefixes: dict[str, int] = {}
    for key in keys:
        top = key.split(".", 1)[0]
        prefixes[top] = prefixes.get(top, 0) + 1
    dataloader = [k for k in keys if k == "dataloader" or k.startswith("dataloader.")]
    return {"keys": len(keys), "prefixes": dict(sorted(prefixes.items())), "dataloader_keys": dataloader}


def critical_values(config: Mapping[str, Any] | None) -> dict:
    """The checkpoint's embedded values on the docs/formats.md §2 critical paths."""
    from fvconsole.core.formats import CRITICAL_PATHS, get_path

    if not isinstance(config, dict):
        return {}
    return {p: get_path(config, p, None) for p in CRITICAL_PATHS}


def _show(args: argparse.Namespace, _invocation: Invocation) -> int:
    from fvconsole.core.checkpoints import inspect_checkpoint, read_metadata, run_kind
    from fvconsole.core.shared import FvError

    info = inspect_checkpoint(args.checkpoint)
    metadata_error = None
    try:
        metadata = read_metadata(info.path)  # the path inspect_checkpoint names its problems by
    except FvError as exc:
        if args.config:
            raise  # nothing to compare the config with
        metadata = {}  # show the rest, then exit 1: this checkpoint cannot be resumed or migrated
        metadata_error = exc
    embedded = metadata.get("config")
    dcp, dcp_error = _read_dcp(info.path)  # the keys and, with --tensors, the tensors: one read (the listing's)
    keys = list(dcp.keys) if dcp is not None else []
    mismatches = None
    if args.config:
        from fvconsole.core.formats import compare_configs, load_run_config

        cfg = load_run_config(args.config, args.overrides)
        mismatches = compare_configs(embedded if isinstance(embedded, dict) else {}, cfg.data, cfg.overrides)
    summary = dcp_summary(keys)
    tensors = dcp.tensors if dcp is not None else None
    if args.json:
        emit_json(
            {
                "checkpoint": info.to_json(),
                "run_kind": run_kind(embedded).to_json() if info.kind == "legacy" else None,
                "metadata_step": metadata.get("step"),
                "critical_config": critical_values(embedded),
                "dcp": dict(summary, error=dcp_error),
                "mismatches": mismatches_json(mismatches) if mismatches is not None else None,
                **(tensors_json(tensors, dcp_error) if args.tensors else {}),
                **({"error": str(metadata_error), "code": metadata_error.error_code} if metadata_error else {}),
            }
        )
        return _metadata_exit(metadata_error)
    say(f"checkpoint: {info.path}",
        step_line(info.step, metadata.get("step"), metadata_error is not None),
        f"complete: {info.completeness}; kind: {info.kind}; "
        f"rank sidecars: {info.rank_sidecars}; rng states: {info.rng_states}; "
        f"size: {human_bytes(info.bytes) if info.size_complete else 'unknown'}")
    if info.kind == "legacy":
        say(run_kind_line(run_kind(embedded)))
    for p in getattr(info, "problems", ()):
        if metadata_error is None or p != str(metadata_error):  # that one is the error line, said once
            warn(p)
    say("", "embedded config (critical paths):")
    values = critical_values(embedded)
    say(format_table(["path", "value"], [[k, short(v, 80)] for k, v in values.items()]) if values else "  (none)")
    say("", "DCP state:")
    if dcp_error:
        say(f"  unreadable: {dcp_error}")
    else:
        say(format_table(["top-level key", "entries"], sorted(summary["prefixes"].items()), right=(1,)))
        if summary["dataloader_keys"]:
            say(f"legacy dataloader state in DCP: {plural(len(summary['dataloader_keys']), 'key')} "
                "(unsafe to resume with world size > 1 without rank-local sidecars)")
    if args.tensors:
        say("", *tensor_lines(tensors, dcp_error))
    if mismatches is not None:
        say("", format_mismatches(mismatches, args.config))
    return _metadata_exit(metadata_error)


def run_kind_line(kind: RunKind) -> str:
    """Which dataloader state the legacy checkpoint holds, and whether it can be migrated."""
    if kind.migratable:
        return "legacy dataloader state: streaming loader (migratable to rank-local sidecars)"
    return f"legacy dataloader state: {kind.loader} loader, not migratable: {kind.why}"


def _read_dcp(checkpoint: str) -> tuple[DcpMetadata | None, str | None]:
    """The DCP metadata, or why not (reported in place of the keys and tensors; the rest is still shown)."""
    from fvconsole.core.checkpoints import read_dcp_metadata
    from fvconsole.core.shared import FvError

    try:
        return read_dcp_metadata(checkpoint), None
    except FvError as exc:
        return None, " ".join(str(exc).split())


def tensors_json(tensors: DcpTensors | None, error: str | None) -> dict:
    """``--tensors --json``: every tensor and the bytes per first key component."""
    if tensors is None:
        return {"tensors": None, "totals": None, "tensors_error": error}
    return {"tensors": [t.to_json() for t in tensors.tensors], "totals": tensors.totals_json(),
            "tensors_error": None}


def tensor_lines(tensors: DcpTensors | None, error: str | None) -> list[str | Block]:
    """``--tensors``: one row per tensor (key, dtype, shape, bytes), then totals per top-level key."""
    if tensors is None:
        return ["DCP tensors:", f"  unreadable: {error}"]
    rows = [[t.key, t.dtype, "x".join(map(str, t.shape)) or "scalar",
             human_bytes(t.bytes) if t.bytes is not None else "?"] for t in tensors.tensors]
    lines: list[str | Block] = [f"DCP tensors: {len(rows)}, {human_bytes(tensors.total_bytes)}",
                                format_table(["key", "dtype", "shape", "bytes"], rows, right=(3,))]
    lines += ["", "totals per top-level key:",
              format_table(["top-level key", "bytes"], [[k, human_bytes(v)] for k, v in tensors.totals], right=(1,))]
    if tensors.unknown_size:
        lines.append(f"left out of the totals: {plural(tensors.unknown_size, 'tensor')} of a dtype of unknown "
                     "element size")
    if tensors.damaged:
        lines.append(f"left out of the totals: {plural(tensors.damaged, 'tensor')} with a problem:")
        damaged = [t for t in tensors.tensors if t.problem is not None]
        lines += elided(damaged, lambda t: f"  {short(t.key, 80)}: {t.problem}", lambda n: f"  ... {n} more", 20, 5)
    return lines


def step_line(step: int | None, metadata_step: object, unreadable: bool) -> str:
    """The step, and where metadata.json disagrees or cannot say (its error is the last line)."""
    if unreadable:
        return f"step: {step} (from the directory name; metadata.json is unreadable: see the error below)"
    if metadata_step == step:
        return f"step: {step}"
    return f"step: {step} (from the directory name; metadata.json says {metadata_step})"


def _metadata_exit(error: Exception | None) -> int:
    """`show` displays what it can of a damaged checkpoint, but a bad metadata.json is exit 1."""
    if error is None:
        return 0
    say(f"error: {' '.join(str(error).split())}", err=True)
    return 1


# --------------------------------------------------------------------------- register


def register(sub: argparse._SubParsersAction) -> None:
    """Add `checkpoints ls` and `checkpoints show`."""
    parser = sub.add_parser(
        "checkpoints",
        help="list, inspect and prune training checkpoints",
        description="List and inspect FastVideo training checkpoints (read-only); prune the ones no keep rule keeps.",
    )
    commands = parser.add_subparsers(dest="checkpoints_command", metavar="SUBCOMMAND", required=True)
    ls = commands.add_parser(
        "ls",
        help="list checkpoints newest first",
        description="List checkpoint-<step> dirs newest first: completeness (dcp/.metadata and one\n"
        "rng_state per rank), dataloader-state kind, the legacy loader (streaming: migratable;\n"
        "map-style: not, and why), sidecars, size. Then the disk budget: the output dir's free\n"
        "space and how many more saves of the latest complete one's size fit. Then what FastVideo\n"
        "itself will do: which checkpoints its cleanup deletes right after the next save (under\n"
        "training.checkpoint.checkpoints_total_limit of --config, else of the newest checkpoint's\n"
        'embedded config) and which one its "latest" resume picks. Warns when "latest" would pick an\n'
        "interrupted checkpoint, or the cleanup would leave fewer complete ones than its limit.",
        epilog=LS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ls.add_argument("dir", metavar="DIR", help="training output dir or one checkpoint-<step> dir")
    add_config(ls, "read training.checkpoint.checkpoints_total_limit from this run config "
                   "(default: the newest checkpoint's embedded config, --set applied to it)")
    add_set_option(ls)
    add_json(ls)
    ls.set_defaults(func=_ls)
    show = commands.add_parser(
        "show",
        help="metadata, DCP keys and config mismatches of one checkpoint",
        description="Show one checkpoint: metadata, DCP state key summary (legacy dataloader keys "
        "flagged) and, with --config, the mismatch report against a run config (critical rows marked '!').",
        epilog=SHOW_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("checkpoint", metavar="CKPT", help="a checkpoint-<step> dir")
    add_config(show, "compare with this run config")
    add_set_option(show)
    show.add_argument("--tensors", action="store_true",
                      help="list every tensor of dcp/.metadata (key, dtype, shape, bytes) and bytes per top-level key")
    add_json(show)
    show.set_defaults(func=_show)
    register_prune(commands)
