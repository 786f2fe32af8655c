"""The preview's reading stage: every file the planner needs, read once into one record.

Plans are data: :func:`read_sources` does all of a preview's file-system reading (the
checkpoint; the run config, once, into its typed record; the manifest and its check; its
columns against the run's projection; what a reshard reads of the checkpoint; the output
dir's rules, its lock and staging dirs, its free space) and returns :class:`Sources`, with
what reading refused and warned of as values. The planner (:func:`.plan.plan_migration`)
computes the preview from the request and this record alone, so what is read and what is
decided are two steps a reader can follow one after the other.

What is read keeps the preview's short-circuits: nothing when a path cannot be read at all,
no manifest when the run config refuses, the output dir's lock and staging dirs only when
reading refused nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fvconsole.core.formats.parquet_columns import TYPE_PATH
from fvconsole.core.formats.rng_files import LEGACY_RNG_NAME, rng_rank
from fvconsole.core.formats.run_params import Params
from fvconsole.core.formats.runconfig import Mismatch, RunConfig
from fvconsole.core.migration import output_dir
from fvconsole.core.migration.elastic import ReshardSources, checkpoint_links, source_layout, source_topology
from fvconsole.core.migration.inputs import (
    CheckpointFacts,
    ConfigRead,
    inspect_source,
    rank_local_refusal,
    read_config,
)
from fvconsole.core.migration.request import Finding, Found, MigrationRequest
from fvconsole.core.migration.reshard import MODES
from fvconsole.core.migration.source_state import read_source_states
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import real
from fvconsole.core.shared.progress import Progress, no_progress
from fvconsole.core.shared.reasons import Reason, invalid
from fvconsole.core.shared.walk import listing

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.formats.column_check import ColumnCheck
    from fvconsole.core.formats.manifest import Manifest

#: The preview's progress steps: the checkpoint, the run config, the manifest, its columns, the cursors.
STEPS = 5


@dataclass(frozen=True)
class Sources:
    """What a preview reads for one request, read once; the planner's only input besides the request.

    The refusals found while reading come in four groups, each in the place the preview
    reports it among the planner's own (the step's confirmation follows the checkpoint's, the
    world size's and the batch count's follow the run config's).
    """

    #: Refused before anything was read (a path with a NUL byte, an unknown mode): nothing else is set.
    refused: tuple[Found, ...] = ()
    #: The checkpoint's real path; the output dir as the operator means it (:func:`.output_dir.resolve`).
    checkpoint: str = ""
    output_dir: str = ""
    facts: CheckpointFacts = CheckpointFacts("")
    config: RunConfig | None = None
    #: The run config's path as refusals name it.
    config_where: str = ""
    mismatches: tuple[Mismatch, ...] = ()
    #: The run config's checked values (the target's, when resharding).
    params: Params = Params()
    #: The topology changes, or a mode was chosen; ``native``: a rank-local checkpoint resharded (a checkpoint view).
    resharding: bool = False
    native: bool = False
    manifest: Manifest | None = None
    #: What FastVideo's loader does at resume with the manifest's columns (None: not checked).
    columns: ColumnCheck | None = None
    #: What a reshard reads of the checkpoint (None: no reshard, or nothing to lay out).
    reshard: ReshardSources | None = None
    #: A checkpoint view's links (empty unless native).
    links: tuple[tuple[str, str], ...] = ()
    #: False for a set being verified: its own dir is the output dir, so no output dir rule applies.
    output_rules: bool = True
    #: The output dir's lock and staging dirs (None: not read); its filesystem's free space.
    review: output_dir.Review | None = None
    space: output_dir.Space | None = None
    checkpoint_refusals: tuple[Found, ...] = ()
    config_refusals: tuple[Found, ...] = ()
    output_refusals: tuple[Found, ...] = ()
    dataset_refusals: tuple[Found, ...] = ()
    #: Every warning reading found, in the order the preview reports them.
    warnings: tuple[Reason, ...] = ()

    @property
    def refusing(self) -> bool:
        return bool(self.checkpoint_refusals or self.config_refusals or self.output_refusals
                    or self.dataset_refusals)


@dataclass(frozen=True)
class _Dataset:
    """The manifest named by the run config, its columns' verdict, and what they refuse and warn of."""

    manifest: Manifest | None = None
    columns: ColumnCheck | None = None
    refusals: tuple[Found, ...] = ()
    warnings: tuple[Reason, ...] = ()


def refused_at_once(req: MigrationRequest, output_rules: bool) -> tuple[Found, ...]:
    """A path with a NUL byte (every os call would raise on it) or an unknown mode: refused before anything is read."""
    paths = [("config", req.config_path), ("checkpoint", req.checkpoint)]
    paths += [("output_dir", req.output_dir)] if output_rules else []
    refused = tuple(invalid(name, f"path contains a NUL byte ({os.fspath(value)!r})")
                    for name, value in paths if "\x00" in os.fspath(value))
    if refused or req.reshard is None or req.reshard in MODES:
        return refused
    return (invalid("reshard", f"unknown mode {req.reshard!r}; the modes are {', '.join(MODES)}"),)


def read_sources(req: MigrationRequest, progress: Progress | None = None, *, output_rules: bool = True,
                 break_lock: bool = False) -> Sources:
    """Everything a preview of ``req`` reads: never writes, never plans.

    Reads metadata.json, dcp/.metadata, the run config, the manifest and (unless skipped)
    stats each dataset file once; ``output_rules``: every output dir rule is judged, its lock
    only read (``break_lock``: judged as ``--break-lock`` would), so the preview refuses
    exactly what executing the plan would.
    """
    progress = progress or no_progress
    refused = refused_at_once(req, output_rules)
    if refused:
        return Sources(refused=refused, output_rules=output_rules)
    progress(0, STEPS, "reading checkpoint")
    ckpt = real(req.checkpoint)
    inspected = inspect_source(ckpt)
    facts = inspected.facts
    progress(1, STEPS, "reading run config")
    read = read_config(req.config_path, req.overrides, facts, req.reshard)
    rank_local = None if read.resharding else rank_local_refusal(facts)
    out = output_dir.resolve(req.output_dir)
    output_refusals = _output_rules(req.overwrite, ckpt, out, facts, read) if output_rules else ()
    progress(2, STEPS, "loading manifest")
    dataset = _read_dataset(req.skip_source_check, read.params, progress)
    sources = Sources(
        checkpoint=ckpt, output_dir=out, facts=facts, config=read.config, config_where=read.where,
        mismatches=read.mismatches, params=read.params, resharding=read.resharding, native=read.native,
        manifest=dataset.manifest, columns=dataset.columns, output_rules=output_rules,
        checkpoint_refusals=(*inspected.refusals, *([rank_local] if rank_local is not None else [])),
        config_refusals=read.refusals, output_refusals=output_refusals,
        dataset_refusals=dataset.refusals, warnings=(*inspected.warnings, *read.warnings, *dataset.warnings),
    )
    return _read_rest(sources, req.reshard is not None, progress, break_lock)


def _read_rest(sources: Sources, chosen: bool, progress: Progress, break_lock: bool) -> Sources:
    """What the plan reads once its sources are known: a reshard's checkpoint states, a view's links,
    the output dir's lock, staging dirs and free space (``chosen``: a reshard mode was chosen)."""
    reshard = _read_reshard(sources, chosen, progress) if sources.resharding else None
    links = checkpoint_links(sources.checkpoint) if sources.native and not sources.refusing else ()
    review = space = None
    if sources.output_rules:
        review = None if sources.refusing else output_dir.review(sources.output_dir, break_lock=break_lock)
        space = output_dir.free_space(sources.output_dir)
    return replace(sources, reshard=reshard, links=links, review=review, space=space)


def _output_rules(overwrite: bool, ckpt: str, out: str, facts: CheckpointFacts, read: ConfigRead) -> tuple[Reason, ...]:
    """Every output dir rule (and a checkpoint view's), as execution would apply them."""
    data_root = None if read.params.data_path is None else real(read.params.data_path)
    found = output_dir.output_dir_rules(out, ckpt, data_root, overwrite).reasons
    if read.native and facts.step is not None:
        found += output_dir.checkpoint_view_rules(out, facts.step, _run_output_dirs(read.config, facts))
    return found


def _run_output_dirs(cfg: RunConfig | None, facts: CheckpointFacts) -> tuple[str, ...]:
    """The run's ``training.checkpoint.output_dir``, in the new config and in the checkpoint's (where set)."""
    found = []
    for keys in (facts.keys,) if cfg is None else (cfg.keys, facts.keys):
        value = keys.output_dir
        if isinstance(value, str) and value.strip() and "\x00" not in value:
            found.append(real(os.path.expanduser(value)))
    found.append(os.path.dirname(facts.path))  # the checkpoint's own parent is a run's output dir
    return tuple(dict.fromkeys(found))


def _read_dataset(skip_source_check: bool, params: Params, progress: Progress) -> _Dataset:
    """The manifest named by the config, its integrity, (unless skipped) its source check and its columns."""
    from fvconsole.core.formats.column_check import check_columns
    from fvconsole.core.formats.manifest import check_manifest, load_manifest

    if params.manifest_path is None:
        return _Dataset()
    try:
        manifest = load_manifest(params.manifest_path)
    except FvError as exc:
        return _Dataset(refusals=(invalid("training.data.streaming_manifest_path", str(exc)),))
    progress(3, STEPS, "checking manifest")
    check = check_manifest(manifest, params.data_path, source=True)
    refused: list[Found] = [invalid("manifest", problem) for problem in check.problems]
    warned = []
    for problem in check.source_problems:
        if skip_source_check:
            warned.append(invalid("warning", f"source check skipped: {problem}"))
        else:
            refused.append(Finding("manifest.source", "manifest.source", (("problem", problem),)))
    warned += [invalid("warning", warning) for warning in check.warnings]
    if params.data_type is None:
        return _Dataset(manifest, None, tuple(refused), tuple(warned))
    columns = check_columns(manifest, params.data_type, lambda done, total, message: progress(
        3, STEPS, f"{message} ({done}/{total})"))
    if columns.refuses:
        refused.append(invalid(TYPE_PATH, columns.message))
    elif columns.verdict == "not-checked":
        warned.append(invalid("warning", columns.message))
    return _Dataset(manifest, columns, tuple(refused), tuple(warned))


def _read_reshard(sources: Sources, chosen: bool, progress: Progress) -> ReshardSources | None:
    """The checkpoint's layout on the run's rows, a native checkpoint's loader states, its RNG files.

    None when there is nothing to lay out (no valid embedded topology, no manifest, a value
    the layout needs refused). The states are read only on a layout that can feed every group.
    """
    facts, params, manifest = sources.facts, sources.params, sources.manifest
    if facts.topology is None or manifest is None or None in (params.batch, params.seed, params.shuffle):
        return None
    layout, refused = source_layout(facts.topology, params, manifest)
    states = None
    if sources.native and layout is not None and facts.step is not None:
        progress(3, STEPS, "reading the checkpoint's loader states")
        states = read_source_states(
            facts.path, step=facts.step, world_size=layout.topo.world_size,
            sp_world_size=layout.topo.sp_world_size, fingerprint=manifest.fingerprint,
            topology=source_topology(layout, params), rows=manifest.rows, orders=layout.orders,
            batch_size=layout.topo.batch_size)
    if not chosen:
        return ReshardSources(layout, refused, states)
    try:
        with listing(facts.path) as entries:  # one listing, not a stat per target rank
            named = [(e.name, rank) for e in entries if (rank := rng_rank(e.name)) is not None]
    except OSError:
        named = []
    ranks = frozenset(rank for name, rank in named if os.path.isfile(os.path.join(facts.path, name)))
    fallback = os.path.isfile(os.path.join(facts.path, LEGACY_RNG_NAME))
    return ReshardSources(layout, refused, states, ranks, fallback)
