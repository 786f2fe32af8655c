"""``run_preflight``: every check, in the order FastVideo meets them, into one verdict.

Reads only (nothing is written, no lock is taken), imports no torch, and reads every untrusted
file through the doors (sidecars and RNG snapshots by the inert pickle reader, JSON by the
untrusted-document door, listings by the walk). Shared work is done once: the manifest is
predicted and laid out into shards once, each shard's read order and suffix sums once per SP
group, the fallback RNG file once; each rank then costs one sidecar and one RNG file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fvconsole.core.formats.run_params import read_params
from fvconsole.core.formats.runconfig import (
    RunConfig,
    TrainingKeys,
    apply_overrides,
    get_path,
    load_run_config,
)
from fvconsole.core.formats.sidecar_files import RECEIPT_NAME
from fvconsole.core.migration.defaults import suggest_output_dir
from fvconsole.core.migration.published import published_for, read_published_set
from fvconsole.core.migration.receipt import MAX_RECEIPT_BYTES
from fvconsole.core.migration.verify import verify_sidecars
from fvconsole.core.preflight.cache import check_cache
from fvconsole.core.preflight.checkpoint import config_check, read_checkpoint
from fvconsole.core.preflight.dataset import fingerprint_checks, predict_manifest
from fvconsole.core.preflight.fixes import (
    WORLD_FLAG,
    export_state_dir,
    migrate_command,
    no_state_dir_note,
    pass_state_dir,
    prune_command,
    resharded_by,
    verify_command,
)
from fvconsole.core.preflight.loader import check_loader, live_loader, regular_files
from fvconsole.core.preflight.model import Check, PreflightReport, ResumePoint, ordered
from fvconsole.core.preflight.request import STATE_DIR_ENV, PreflightRequest
from fvconsole.core.preflight.resolve import OUTPUT_PATH, RESUME_PATH, resolve_resume
from fvconsole.core.preflight.rng import check_rng
from fvconsole.core.preflight.room import check_room
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import real
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.untrusted import load_file

WORLD_PATH = "training.distributed.num_gpus"
SP_PATH = "training.distributed.sp_size"


def _whole(value: Any, path: str, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FvError(f"{where}: field '{path}' must be an integer >= {minimum} (got {value!r})")
    return value


def _reshard_note(set_dir: str | None, world: int) -> str | None:
    """The accounting a receipt records for a set resharded for ``world`` (None: not one)."""
    if set_dir is None:
        return None
    try:
        receipt = load_file(os.path.join(set_dir, RECEIPT_NAME), "migration receipt", MAX_RECEIPT_BYTES)
    except (OSError, FvError):
        return None
    reshard = receipt.get("reshard") if isinstance(receipt, dict) else None
    if not isinstance(reshard, dict):
        return None
    target, acc = reshard.get("target"), reshard.get("accounting")
    if not isinstance(target, dict) or target.get("world_size") != world or not isinstance(acc, dict):
        return None
    counts = ", ".join(f"{k.replace('_', ' ')} {acc.get(k)}" for k in ("consumed", "to_read", "repeated", "unread")
                       if isinstance(acc.get(k), int))
    return f"the state was resharded for world size {world} by {resharded_by(reshard.get('mode'))} ({counts} samples)"


def _set_checks(req: PreflightRequest, set_dir: str, world: int) -> list[Check]:
    """A published fvconsole set verified as ``sidecars verify`` does: its problems as warnings."""
    try:
        found = read_published_set(set_dir)
        source = found.checkpoint if found is not None else None
        if source is None:
            return []
        overrides = list(req.overrides) + ([f"{WORLD_PATH}={world}"] if req.world_size is not None else [])
        result = verify_sidecars(req.config_path, source, set_dir, overrides=tuple(overrides))
    except FvError as exc:
        return [Check("dataloader", "warn", f"{set_dir}: the published set was not verified ({exc})")]
    command = verify_command(req.config_path, source, set_dir)
    if result.ok:
        return [Check("dataloader", "ok", f"{set_dir}: the published set verifies (receipt, hashes"
                      + (", FastVideo's validation receipt)" if result.upstream_validation is not None else ")"))]
    return [Check("dataloader", "warn", f"{set_dir}: sidecars verify finds {plural(len(result.problems), 'problem')}; "
                  f"first: {result.problems[0]}", fix=command)]


def _fix_dirs(point: ResumePoint, world: int) -> tuple[str, str]:
    """Where a migration's set goes: beside a legacy checkpoint, and a native view outside the output dir."""
    out = os.path.dirname(point.checkpoint)
    view = os.path.join(f"{out}-world{world}", point.name)
    return suggest_output_dir(point.checkpoint, point.step), view


def _streaming(config: Mapping[str, Any]) -> bool:
    value = get_path(config, "training.data.dataloader_type", None)
    return isinstance(value, str) and "".join(value.split()).lower() == "streaming"


def run_preflight(req: PreflightRequest) -> PreflightReport:
    """The verdict for ``req``: FvError only for an unreadable run config or an unusable world size."""
    cfg: RunConfig = load_run_config(req.config_path, req.overrides)
    notes: list[str] = []
    if req.world_size is not None:
        world = _whole(req.world_size, WORLD_FLAG, WORLD_FLAG)
        notes.append(f"world size {world} from {WORLD_FLAG}")
    else:
        world = _whole(cfg.get(WORLD_PATH, None), WORLD_PATH, cfg.source(WORLD_PATH))
        notes.append(f"world size {world} from the config's {WORLD_PATH}")
    sp = _whole(cfg.get(SP_PATH, 1), SP_PATH, cfg.source(SP_PATH))
    override = None
    if req.dataloader_state_dir:
        override = real(req.dataloader_state_dir)
        notes.append(f"dataloader override dir {override} (from {req.state_dir_source})")
    else:
        notes.append(no_state_dir_note(STATE_DIR_ENV))
    resume = req.resume if req.resume is not None else cfg.get(RESUME_PATH, None)
    resolution = resolve_resume(resume, cfg.get(OUTPUT_PATH, None), cfg)
    checks = [resolution.check]
    point = resolution.point
    if point is None:
        return PreflightReport(None, world, sp, ordered(checks), req.strict, tuple(notes))
    checks += _resume_checks(req, cfg, point, resolution.infos, world, sp, override)
    return PreflightReport(point, world, sp, ordered(checks), req.strict, tuple(notes))


def _resume_checks(req: PreflightRequest, cfg: RunConfig, point: ResumePoint, infos: tuple, world: int, sp: int,
                   override: str | None) -> list[Check]:
    prune = prune_command(os.path.dirname(point.checkpoint))
    facts = read_checkpoint(point, prune)
    checks = list(facts.checks)
    own = regular_files(point.checkpoint)
    target = apply_overrides(cfg.data, [f"{WORLD_PATH}={world}"])
    embedded_topology = (get_path(facts.embedded, WORLD_PATH, None), get_path(facts.embedded, SP_PATH, 1)) \
        if facts.embedded is not None else None
    changed = embedded_topology is not None and embedded_topology != (world, sp)
    legacy_dir, view_dir = _fix_dirs(point, world)
    overrides = list(req.overrides) + ([f"{WORLD_PATH}={world}"] if req.world_size is not None else [])
    migrate_fix = migrate_command(req.config_path, overrides, point.checkpoint, legacy_dir, changed)
    native = any(name.startswith("dataloader_state_rank") for name in own)
    reshard_fix = migrate_command(req.config_path, overrides, point.checkpoint, view_dir if native else legacy_dir,
                                  True)
    published = published_for(point.checkpoint, point.step) if override is None and not native else None
    if published is not None and not changed:
        # The set exists: what the job lacks is the dir, not a migration.
        migrate_fix = export_state_dir(STATE_DIR_ENV, published.output_dir)
    set_dir = None
    if world % sp:
        checks.append(Check("config", "fail", f"{SP_PATH} {sp} does not divide the world size {world} "
                            "(FastVideo: 'world_size must be divisible by sp_world_size')"))
    if not _streaming(target):
        checks.append(Check("dataloader", "skip", "training.data.dataloader_type is not 'streaming': FastVideo "
                            "does not restore a map-style loader's state"))
        checks.append(Check("dataset", "skip", "not a streaming loader: no manifest"))
    elif world % sp == 0:
        params, refused = read_params(TrainingKeys.of(target, cfg.overrides), "the next config", max_workers=1)
        if refused:
            first = refused[0]
            checks.append(Check("dataloader", "fail", f"the next config: {first.field}: {first.cli}"))
        else:
            predicted = predict_manifest(params.manifest_path, params.data_path, params.data_type)
            live = live_loader(world, sp, params.batch, params.read_batch, params.seed, params.shuffle,
                               params.workers, predicted.rows)
            checks.append(predicted.check)
            if live.samples_per_worker == 0:
                checks.append(Check("dataset", "fail", f"the manifest's rows make 0 samples per worker for world "
                                    f"size {world}, sp size {sp} ('Dataset is too small for the requested DP/SP/"
                                    "worker layout')"))
            keys = facts.storage.keys if facts.storage is not None else None
            loader = check_loader(point.checkpoint, own, point.step, world, live, override, keys, migrate_fix,
                                  reshard_fix)
            checks += loader.checks
            checks += fingerprint_checks(predicted, loader.fingerprints)
            set_dir = loader.set_dir
            if set_dir is not None:
                checks += _set_checks(req, set_dir, world)
            if published is not None:
                checks.append(Check("dataloader", "warn", f"a published sidecar set for {point.name} is in "
                                    f"{published.output_dir}, but no override dir was given: "
                                    f"{pass_state_dir(STATE_DIR_ENV)}"))
    # --world-size counts as the override of num_gpus the fix commands repeat
    checks.append(config_check(facts.embedded, target, _reshard_note(set_dir, world), overrides=overrides,
                               config_file=cfg.path))
    checks += check_rng(point.checkpoint, own, world)
    checks.append(check_room(point.checkpoint, infos))
    if req.cache_root:
        checks += check_cache(req.cache_root, world, req.nodes, req.job)
    return checks
