"""What the reading stage (:mod:`.sources`) reads from the run config and the checkpoint, each problem as a refusal.

The preview reports *all* refusals rather than stopping at the first, so one dry run tells
an operator everything that is wrong: every reader here returns what it could read (None
where a value is missing or invalid) with its refusals and warnings as values, in the order
the preview reports them.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace

from fvconsole.core.formats.run_params import TOPOLOGY_PATHS, Params, read_params, topology_change
from fvconsole.core.formats.runconfig import (
    Mismatch,
    RunConfig,
    TrainingKeys,
    compare_configs,
    load_run_config,
)
from fvconsole.core.migration.request import Finding, Found
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.reasons import Reason, invalid
from fvconsole.core.shared.safe_read import sha256_regular_file


@dataclass(frozen=True)
class CheckpointFacts:
    path: str
    dir_step: int | None = None
    metadata_step: int | None = None
    metadata_sha256: str | None = None
    embedded: dict | None = None
    #: The checkpoint's kind (docs/formats.md §1), None when it could not be inspected.
    kind: str | None = None
    #: A rank-local checkpoint's sidecar count (refused unless the plan reshards: :func:`rank_local_refusal`).
    rank_sidecars: int = 0

    #: The embedded config's values fvconsole reads (read once, with ``embedded``).
    keys: TrainingKeys = TrainingKeys()

    @property
    def step(self) -> int | None:
        """The step the sidecars are for: the directory name's, else metadata.json's."""
        return self.dir_step if self.dir_step is not None else self.metadata_step

    @property
    def topology(self) -> tuple[int, int] | None:
        """(world size, sp size) of the embedded config, when both are valid."""
        if self.embedded is None:
            return None
        world, sp = self.keys.num_gpus, self.keys.sp_size
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in (world, sp)) or world % sp:
            return None
        return world, sp


@dataclass(frozen=True)
class Inspected:
    """The checkpoint's facts and what reading them refused and warned of (words without flags)."""

    facts: CheckpointFacts
    refusals: tuple[Reason, ...]
    warnings: tuple[Reason, ...]


def rank_local_refusal(facts: CheckpointFacts) -> Reason | None:
    """A rank-local checkpoint on its own topology: FastVideo resumes it as it is (None: not rank-local)."""
    if facts.kind != "rank-local":
        return None
    return invalid(
        "checkpoint.kind",
        f"{facts.path} already holds {plural(facts.rank_sidecars, 'rank-local dataloader_state_rank<r>.pt sidecar')} "
        f"(kind 'rank-local', expected 'legacy'); FastVideo uses {'it' if facts.rank_sidecars == 1 else 'them'} and "
        "would ignore migrated ones: migration is unnecessary",
    )


def inspect_source(ckpt: str) -> Inspected:
    """Directory name, dcp/, metadata.json and its embedded config; kind and completeness."""
    from fvconsole.core.checkpoints.dcp_metadata import dcp_metadata_refusal
    from fvconsole.core.checkpoints.listing import checkpoint_step

    dir_step = checkpoint_step(ckpt)
    if not os.path.isdir(ckpt):
        return Inspected(CheckpointFacts(ckpt, dir_step), (invalid("checkpoint", f"{ckpt} is not a directory"),), ())
    refused = []
    if dir_step is None:
        refused.append(invalid(
            "checkpoint",
            f"directory name {os.path.basename(ckpt)!r} does not match checkpoint-<step>; FastVideo checks "
            "sidecars against the step in that name",
        ))
    dcp = os.path.join(ckpt, "dcp")
    if not os.path.isdir(dcp):
        refused.append(invalid("checkpoint.dcp", f"missing DCP directory {dcp}"))
    elif (no_metadata := dcp_metadata_refusal(ckpt)) is not None:
        # dcp.save writes .metadata last: without it (or with a FIFO or a directory in its place)
        # FastVideo cannot load this checkpoint at all, so sidecars for it could never be used.
        refused.append(invalid("checkpoint.dcp", f"{no_metadata}; FastVideo cannot resume from this checkpoint"))
    facts, why = _read_metadata(CheckpointFacts(ckpt, dir_step))
    refused += [why] if why is not None else []
    if dir_step is None:
        return Inspected(facts, tuple(refused), ())
    kind, sidecars, warnings = _inspect_kind(ckpt)
    return Inspected(replace(facts, kind=kind, rank_sidecars=sidecars), tuple(refused), warnings)


def _read_metadata(facts: CheckpointFacts) -> tuple[CheckpointFacts, Reason | None]:
    """metadata.json's step, its sha256 and its embedded config (read once, as ``TrainingKeys``)."""
    from fvconsole.core.checkpoints.listing import read_metadata

    meta_path = os.path.join(facts.path, "metadata.json")
    try:
        meta = read_metadata(facts.path)
        facts = replace(facts, metadata_step=meta["step"])
        facts = replace(facts, metadata_sha256=sha256_regular_file(meta_path))
        if not isinstance(meta.get("config"), dict):
            return facts, invalid("metadata.config", f"{meta_path} has no embedded run config (field 'config')")
        return replace(facts, embedded=meta["config"], keys=TrainingKeys.of(meta["config"])), None
    except FvError as exc:
        return facts, invalid("metadata.json", str(exc))
    except OSError as exc:
        return facts, invalid("metadata.json", f"{meta_path}: cannot read ({exc.strerror or exc})")


def _inspect_kind(ckpt: str) -> tuple[str | None, int, tuple[Reason, ...]]:
    """The checkpoint's kind, its rank-local sidecar count, and the warnings its inspection gives."""
    from fvconsole.core.checkpoints.gaps import GapKind
    from fvconsole.core.checkpoints.listing import inspect_checkpoint

    try:
        info = inspect_checkpoint(ckpt)
    except FvError as exc:
        return None, 0, (invalid("warning", f"checkpoint could not be inspected: {exc}"),)
    warned = []
    if not info.complete:
        warned.append(invalid("warning", (
            f"checkpoint {ckpt} is incomplete ({info.gaps_brief}): " + "; ".join(g.summary for g in info.gaps))))
    if info.kind == "none":
        warned.append(invalid("warning", (
            f"checkpoint {ckpt} has no 'dataloader' state in DCP (kind 'none', expected 'legacy'); the "
            "sidecars are reconstructed from the step alone")))
    elif info.kind == "unknown":
        unreadable = info.has_dcp_metadata or any(g.kind is GapKind.DCP_METADATA_UNREADABLE for g in info.gaps)
        why = "DCP metadata unreadable" if unreadable else "no dcp/.metadata to read"
        warned.append(invalid("warning", f"checkpoint {ckpt} kind is unknown ({why}); expected 'legacy'"))
    if info.dcp_error is not None:
        warned.append(invalid("warning", info.dcp_error))
    return info.kind, info.rank_sidecars if info.kind == "rank-local" else 0, tuple(warned)


@dataclass(frozen=True)
class ConfigRead:
    """The run config read once (None: refused) and what the reading stage makes of it: its mismatch
    report against the checkpoint's, whether the plan reshards, its checked values, what they refuse
    and warn of."""

    config: RunConfig | None
    #: The run config's path as refusals name it.
    where: str
    mismatches: tuple[Mismatch, ...] = ()
    #: The topology changes, or a mode was chosen; ``native``: a rank-local checkpoint resharded (a checkpoint view).
    resharding: bool = False
    native: bool = False
    #: The run config's checked values (the target's, when resharding).
    params: Params = Params()
    refusals: tuple[Found, ...] = ()
    warnings: tuple[Reason, ...] = ()


def read_config(config_path: str, overrides: tuple[str, ...], facts: CheckpointFacts,
                reshard: str | None) -> ConfigRead:
    """The run config, its mismatch report against ``facts``' embedded config and its values, checked
    (``dataloader_num_workers`` as a native reshard allows it: 0 or 1; else 0)."""
    try:
        cfg = load_run_config(config_path, overrides)
    except FvError as exc:
        chosen = reshard is not None
        return ConfigRead(None, config_path, resharding=chosen, native=chosen and facts.kind == "rank-local",
                          refusals=(invalid("config", str(exc)),))
    compared = () if facts.embedded is None else compare_configs(facts.embedded, cfg.data, cfg.overrides)
    carried = topology_change(compared)
    resharding = reshard is not None or bool(carried)
    native = resharding and facts.kind == "rank-local"
    where = cfg.path or config_path
    params, param_refusals = read_params(cfg.keys, where, max_workers=1 if native else 0)
    mismatches, refused, warned = _judge(compared, carried, cfg.path, reshard)
    return ConfigRead(cfg, where, mismatches, resharding, native, params, (*refused, *param_refusals), warned)


def _judge(mismatches: tuple[Mismatch, ...], carried: tuple[Mismatch, ...], config: str | None,
           reshard: str | None) -> tuple[tuple[Mismatch, ...], tuple[Found, ...], tuple[Reason, ...]]:
    """The mismatch report of the run config ``config``, what it refuses and warns of; a world/sp change
    (``carried``: its rows) refuses here only as part of another mismatch.

    A topology change alone is the reshard's (the planner refuses it without a mode); with
    a mode chosen (``reshard``) its rows are reported as non-critical.
    """
    if carried and reshard is not None:
        mismatches = tuple(replace(m, critical=False) if m in carried else m for m in mismatches)
    critical = [m for m in mismatches if m.critical and m not in carried]
    refused: tuple[Found, ...] = ()
    if critical:
        # each key names where its value came from: a --set override, else the file (not the file for all)
        differs = ("the run config differs from the checkpoint's embedded config on "
                   f"{plural(len(critical), 'critical key')}: " + "; ".join(m.describe(config) for m in critical))
        fixes = [m.override for m in critical]
        # each is a launch override the form or --set can repeat; not for a value of another type than the
        # checkpoint's (num_gpus: eight): that value is refused as such, repeating the checkpoint's is no fix
        if all(fixes) and all(type(m.checkpoint) is type(m.config) for m in critical):
            refused = (Finding("config.critical_override", "config",
                               (("differs", differs), ("overrides", " ".join(shlex.quote(f) for f in fixes if f)))),)
        else:
            refused = (invalid("config", differs),)
    others = sum(1 for m in mismatches if not m.critical and m.path not in TOPOLOGY_PATHS)
    warned = (invalid("warning", "the run config differs from the checkpoint's embedded config on "
                      f"{plural(others, 'non-critical key')}"),) if others else ()
    return mismatches, refused, warned
