"""The *dcp* and *config* checks: what ``dcp.load`` reads, and how the next config differs from the saved one.

``dcp``: ``dcp/.metadata`` present and readable (its one reader, through ``core/checkpoints/storage.py``), every
storage file it references there, regular and as long as the furthest byte any item reads. A
missing or inconsistent ``metadata.json`` is a warning: FastVideo's resume does not read it
(fvconsole's own tools do). ``config``: the mismatch report of ``core/formats/runconfig.py``
between the embedded config and the next one, as warnings: FastVideo refuses only through the
dataloader state and the dataset, which carry the fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.checkpoints.listing import read_metadata
from fvconsole.core.checkpoints.storage import DcpStorage, dcp_storage
from fvconsole.core.formats.runconfig import compare_configs
from fvconsole.core.preflight.model import Check, ResumePoint
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import human_bytes, plural

#: At most this many differing keys are named in the config check's line.
MAX_NAMED = 3


@dataclass(frozen=True)
class CheckpointFacts:
    """What the checks below read of the checkpoint once: its DCP storage and its embedded config."""

    storage: DcpStorage | None
    embedded: Mapping[str, Any] | None
    checks: tuple[Check, ...]


def read_checkpoint(point: ResumePoint, fix: str | None) -> CheckpointFacts:
    """The dcp check's findings (``fix``: the command for an interrupted save) and the embedded config."""
    checks: list[Check] = []
    storage: DcpStorage | None = None
    try:
        storage = dcp_storage(point.checkpoint)
    except FvError as exc:
        checks.append(Check("dcp", "fail", str(exc), fix=fix))
    if storage is not None:
        bad = storage.problems
        for f in bad[:MAX_NAMED]:
            checks.append(Check("dcp", "fail", f"{point.checkpoint}/dcp/{f.name}: {f.problem}"))
        if len(bad) > MAX_NAMED:
            checks.append(Check("dcp", "fail", f"{plural(len(bad) - MAX_NAMED, 'more storage file')} of "
                                f"{point.checkpoint}/dcp cannot be read whole"))
        if not bad:
            checks.append(Check("dcp", "ok", f"dcp/.metadata: {plural(len(storage.keys), 'state key')}, "
                                f"{plural(len(storage.files), 'storage file')} present and whole "
                                f"({human_bytes(sum(f.needed_bytes for f in storage.files))} read)"))
    embedded: Mapping[str, Any] | None = None
    try:
        meta = read_metadata(point.checkpoint)
        config = meta.get("config")
        embedded = config if isinstance(config, Mapping) else None
        if meta["step"] != point.step:
            checks.append(Check("dcp", "warn", f"{point.checkpoint}/metadata.json: field 'step' is {meta['step']}, "
                                f"the directory name says {point.step} (FastVideo resumes from the name's)"))
        if embedded is None:
            checks.append(Check("dcp", "warn", f"{point.checkpoint}/metadata.json: no embedded config "
                                "(FastVideo's resume does not read it; fvconsole's migration does)"))
    except FvError as exc:
        checks.append(Check("dcp", "warn", f"{exc} (FastVideo's resume does not read it; fvconsole's tools do)"))
    return CheckpointFacts(storage, embedded, tuple(checks))


def config_check(embedded: Mapping[str, Any] | None, config: Mapping[str, Any], reshard: str | None, *,
                 overrides: Sequence[str], config_file: str | None) -> Check:
    """The next config against the embedded one (``reshard``: the accounting of a set resharded for the target);
    each key named ends with where its value came from, as ``migrate``'s refusal says it: the override of
    ``overrides`` that set it, else ``config_file``."""
    if embedded is None:
        return Check("config", "skip", "the checkpoint has no readable embedded config to compare with")
    mismatches = compare_configs(embedded, config, overrides)
    if not mismatches:
        return Check("config", "ok", "the next config equals the checkpoint's embedded config")
    critical = [m for m in mismatches if m.critical] or list(mismatches)
    named = "; ".join(m.describe(config_file) for m in critical[:MAX_NAMED])
    more = len(mismatches) - min(len(critical), MAX_NAMED)
    text = f"{plural(len(mismatches), 'difference')} from the embedded config: {named}"
    if more:
        text += f" (and {more} more)"
    if reshard:
        text += f"; {reshard}"
    return Check("config", "warn", text)
