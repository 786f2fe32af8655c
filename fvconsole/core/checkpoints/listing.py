"""Checkpoint discovery: which ``checkpoint-<step>`` dirs exist, are complete, and of what kind.

Listing never raises for a damaged checkpoint: what cannot be read is reported in
``problems`` (an operator is usually looking precisely because something is wrong).
``dcp/.metadata`` (a pickle of torch classes) is read by its one reader,
``core/checkpoints/dcp_metadata.py``, which runs no code from the file, is bounded in time and
memory, and needs no torch import.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fvconsole.core.checkpoints.dcp_metadata import dataloader_key_count, dcp_metadata_gap
from fvconsole.core.checkpoints.gaps import INTERRUPTED, Gap, GapKind, gap_brief, gap_words
from fvconsole.core.checkpoints.kind import RunKind, run_kind
from fvconsole.core.checkpoints.verdicts import VerdictCache, default_path
from fvconsole.core.formats.sidecar_files import SIDECAR_RE
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.safe_read import short_repr
from fvconsole.core.shared.untrusted import load_file
from fvconsole.core.shared.walk import TreeSize, listing, tree_size

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
RNG_RE = re.compile(r"^rng_state_rank(\d+)\.pt$")

Kind = Literal["legacy", "rank-local", "none", "unknown"]


@dataclass(frozen=True)
class CheckpointInfo:
    """What one checkpoint directory holds, as far as can be told without loading tensors."""

    path: str
    step: int
    complete: bool
    kind: Kind
    rank_sidecars: int
    rng_states: int
    has_config: bool
    bytes: int
    metadata_step: int | None
    problems: tuple[str, ...] = ()
    #: World size from the embedded config (None when unknown).
    world_size: int | None = None
    has_dcp: bool = False
    has_dcp_metadata: bool = False
    #: Number of DCP state keys under ``dataloader.`` (None when DCP metadata was not read).
    dataloader_keys: int | None = None
    #: mtime of the checkpoint directory (seconds since the epoch).
    mtime: float | None = None
    #: False when ``bytes`` is not the whole tree's (a symlinked checkpoint, a walk over its bound).
    size_complete: bool = True
    #: A legacy checkpoint's loader (``core.checkpoints.kind``), from the ``metadata.json`` read above
    #: (a listing reads it once); None otherwise. Not in ``to_json``: the CLI adds it as ``run_kind``.
    run_kind: RunKind | None = None
    #: Files the size walk counted, and the newest one's mtime (None: no file, or not walked):
    #: a checkpoint's age for retention (``core/retention``). Not in ``to_json``: ``checkpoints
    #: ls`` shows the dir's mtime; ``checkpoints prune`` shows the age it judges by.
    files: int = 0
    newest_mtime: float | None = None
    #: The embedded ``training.checkpoint.checkpoints_total_limit`` as written (None: absent), for what
    #: FastVideo's own cleanup will do (``core/retention/fastvideo.py``) without reading metadata.json again.
    total_limit: Any = None
    #: Why this process could not read the checkpoint (None: it could): never complete, and a
    #: prune keeps it saying so; ``checkpoints ls`` lists it and goes on.
    unreadable: str | None = None
    #: A checkpoint view (``migrate --reshard`` of a native checkpoint): the real path of the
    #: checkpoint its ``dcp`` link leads into. Judged through its links, as FastVideo follows them.
    view_of: str | None = None
    #: Why ``dcp/.metadata`` could not be decoded (its reader's one line, also in ``problems``); None
    #: when it was, or was not read. Not in ``to_json``: ``problems`` says it.
    dcp_error: str | None = None
    #: Why it is not complete, typed (empty when complete); each one's line is in ``problems`` too.
    #: What a caller decides by (a prune's reason, a migration's warning), never the words. Not in
    #: ``to_json``: ``complete`` and ``problems`` say it.
    gaps: tuple[Gap, ...] = ()

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def completeness(self) -> str:
        """``yes``, or ``NO (which gaps)`` in :func:`gap_words`'s words: the one wording of the record's
        completeness (``checkpoints show`` and the console's detail pane)."""
        return "yes" if self.complete else f"NO ({gap_words(self.gaps)})"

    @property
    def gaps_brief(self) -> str:
        """The gaps in :func:`gap_brief`'s words (``interrupted save`` only for a cut-off save's, ``no dcp/
        directory``): the one wording a prune's reasons and ``checkpoints ls``'s warning open with."""
        return gap_brief(self.gaps)

    def to_json(self) -> dict:
        return fields_json(self, omit=("run_kind", "files", "newest_mtime", "total_limit", "dcp_error", "gaps"),
                           name=self.name)


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """The step in a ``checkpoint-<step>`` directory name (what FastVideo compares against)."""
    match = CHECKPOINT_RE.match(os.path.basename(os.path.normpath(os.fspath(path))))
    return int(match.group(1)) if match else None


MAX_METADATA_BYTES = 256 * 2**20
#: FastVideo's step counter is an int64 everywhere it is stored.
MAX_STEP = 2**63 - 1


def read_metadata(checkpoint_dir: str | os.PathLike[str]) -> dict:
    """``metadata.json`` as a dict; FvError naming the file and field when malformed."""
    path = os.path.join(os.fspath(checkpoint_dir), "metadata.json")
    try:
        data = load_file(path, "metadata.json", MAX_METADATA_BYTES)
    except FileNotFoundError:
        raise FvError(f"{path}: missing (no metadata.json in the checkpoint)") from None
    except OSError as exc:
        raise FvError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise FvError(f"{path}: must be a JSON object, got {type(data).__name__}")
    step = data.get("step")
    if "step" not in data:
        raise FvError(f"{path}: field 'step' is missing")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise FvError(f"{path}: field 'step' must be an integer from 0 to {MAX_STEP} (got {short_repr(step)})")
    if "config" in data and not isinstance(data["config"], dict):
        raise FvError(f"{path}: field 'config' must be a mapping (got {type(data['config']).__name__})")
    return data


@dataclass(frozen=True)
class _Entries:
    """What one listing of a checkpoint dir found (symlinks judged as FastVideo follows them)."""

    rng: set[int]
    sidecars: set[int]
    has_dcp: bool
    has_meta: bool
    #: ``dcp`` is a symlink: a checkpoint view (docs/formats.md §3) whose links FastVideo follows.
    dcp_linked: bool


def _scan_rank_files(path: str) -> _Entries:
    """One directory listing: the RNG files and sidecars by rank, ``dcp/`` and ``metadata.json``.

    A symlinked entry (a checkpoint view's) counts as FastVideo sees it, through the link: an RNG
    file that resolves to no file is not there, ``dcp`` that resolves to a directory is.
    """
    rng: set[int] = set()
    sidecars: set[int] = set()
    has_dcp = has_meta = dcp_linked = False
    with listing(path) as it:
        for entry in it:
            name = entry.name
            linked = entry.is_symlink()
            if name == "dcp":
                dcp_linked = linked
                has_dcp = _follows_to(path, name, stat.S_ISDIR) if linked else entry.is_dir(follow_symlinks=False)
            elif name == "metadata.json":
                has_meta = True
            elif (m := RNG_RE.match(name)) is not None:
                if not linked or _follows_to(path, name, stat.S_ISREG):
                    rng.add(int(m.group(1)))
            elif (m := SIDECAR_RE.match(name)) is not None:
                sidecars.add(int(m.group(1)))
    return _Entries(rng, sidecars, has_dcp, has_meta, dcp_linked)


def _follows_to(path: str, name: str, kind: Callable[[int], bool]) -> bool:
    """The link ``path/name`` resolves to an entry of ``kind`` (PermissionError: cannot be told)."""
    try:
        return kind(os.stat(os.path.join(path, name)).st_mode)
    except PermissionError:
        raise
    except OSError:
        return False


def _viewed(path: str, entries: _Entries) -> str | None:
    """The checkpoint a view's ``dcp`` link leads into (its real directory), None for a checkpoint of its own."""
    if not (entries.dcp_linked and entries.has_dcp):
        return None
    return os.path.dirname(os.path.realpath(os.path.join(path, "dcp")))


def _world_size(config: Any) -> int | None:
    try:
        value = config["training"]["distributed"]["num_gpus"]
    except (KeyError, TypeError):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _total_limit(config: Any) -> Any:
    try:
        return config["training"]["checkpoint"]["checkpoints_total_limit"]
    except (KeyError, TypeError):
        return None


@dataclass(frozen=True)
class _Embedded:
    """What ``metadata.json`` gave: its step, its config, why it could not be read."""

    step: int | None = None
    config: Any = None
    error: str | None = None


def _read_embedded(path: str, has_meta: bool, step: int, problems: list[str]) -> _Embedded:
    """``metadata.json`` of the checkpoint ``path``, its problems noted (never raises for a damaged one)."""
    if not has_meta:
        problems.append("metadata.json is missing")
        return _Embedded()
    try:
        meta = read_metadata(path)
    except FvError as exc:
        problems.append(str(exc))
        return _Embedded(error=str(exc))
    found = _Embedded(meta["step"], meta.get("config"))
    if found.step != step:
        problems.append(f"metadata.json step {found.step} differs from directory step {step}")
    if found.config is None:
        problems.append("metadata.json has no embedded config")
    return found


def _gaps(has_dcp: bool, dcp_gap: Gap | None, rng: set[int], world: int | None) -> list[Gap]:
    """Why it is not complete (§1: ``dcp/.metadata`` and an RNG file per rank of the embedded world size)."""
    gaps = [Gap(GapKind.NO_DCP, "dcp/ directory is missing")] if not has_dcp else []
    gaps += [dcp_gap] if dcp_gap is not None else []
    if world is not None and (missing_rng := world - sum(1 for r in range(world) if r in rng)):
        what = plural(world, "rng_state_rank<r>.pt file")
        gaps.append(Gap(GapKind.RNG_MISSING, f"{missing_rng} of {what} missing{INTERRUPTED}"))
    return gaps


def _kind(path: str, sidecars: set[int], dcp_meta: bool, read_dcp: bool, verdicts: VerdictCache | None,
          problems: list[str]) -> tuple[Kind, int | None, str | None]:
    """(kind, DCP state keys under ``dataloader``, why not: None when decoded or not read)."""
    if sidecars:
        return "rank-local", None, None
    if not read_dcp or not dcp_meta:
        return "unknown", None, None
    try:
        keys = dataloader_key_count(path, verdicts)
    except FvError as exc:
        problems.append(str(exc))
        return "unknown", None, str(exc)
    return ("legacy" if keys else "none"), keys, None


def _loader(kind: Kind, embedded: _Embedded, path: str) -> RunKind | None:
    """A legacy checkpoint's loader, as ``checkpoint_run_kind`` says, without reading metadata.json again."""
    if kind != "legacy":
        return None
    if embedded.step is not None:
        return run_kind(embedded.config)
    if embedded.error is not None:
        return RunKind("unknown", None, False, embedded.error)
    return checkpoint_run_kind(path)


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _unreadable(path: str, step: int, exc: OSError, problems: list[str]) -> CheckpointInfo:
    """A checkpoint this process cannot read: listed, never complete, saying why (it is kept, not judged)."""
    why = f"cannot be read ({exc.strerror or exc})"
    return CheckpointInfo(path=path, step=step, complete=False, kind="unknown", rank_sidecars=0, rng_states=0,
                          has_config=False, bytes=0, metadata_step=None, problems=(*problems, why),
                          gaps=(Gap(GapKind.UNREADABLE, why),), size_complete=False, unreadable=why)


def inspect_checkpoint(path: str | os.PathLike[str], *, read_dcp: bool = True,
                       verdicts: VerdictCache | None = None, size: TreeSize | None = None) -> CheckpointInfo:
    """Inspect one ``checkpoint-<step>`` dir. ``read_dcp=False`` skips the DCP metadata (kind may be unknown).

    ``verdicts``: remembered DCP decodes (``core.checkpoints.verdicts``), for listings; ``size``: the
    tree's walk when the caller made it already (retention's, which also looked for held inodes).
    A checkpoint that cannot be read (its directory or ``dcp/`` not searchable by this user) is
    returned as ``unreadable``, never raised: a listing goes on with the rest.
    """
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    step = checkpoint_step(path)
    if step is None:
        raise FvError(f"{path}: not a checkpoint directory (name must match checkpoint-<step>)")
    if not os.path.isdir(path):
        raise FvError(f"{path}: checkpoint directory does not exist")
    problems: list[str] = ["checkpoint directory is a symlink"] if os.path.islink(path) else []
    try:
        entries = _scan_rank_files(path)
        dcp_gap = dcp_metadata_gap(path) if entries.has_dcp else None
    except PermissionError as exc:
        return _unreadable(path, step, exc, problems)
    rng, sidecars, has_dcp = entries.rng, entries.sidecars, entries.has_dcp
    view_of = _viewed(path, entries)
    embedded = _read_embedded(path, entries.has_meta, step, problems)
    world = _world_size(embedded.config)
    dcp_meta = has_dcp and dcp_gap is None
    gaps = _gaps(has_dcp, dcp_gap, rng, world)
    problems += [gap.text for gap in gaps]
    if sidecars and world is not None and sidecars != set(range(world)) and view_of is None:
        # A view's sidecars are the target world's (its receipt says which); the embedded config is the source's.
        problems.append(f"{plural(len(sidecars), 'dataloader_state_rank<r>.pt file')} for world size {world}")
    kind, loader_keys, dcp_error = _kind(path, sidecars, dcp_meta, read_dcp, verdicts, problems)
    size = tree_size(path) if size is None else size
    if size.note:
        problems.append(size.note)
    return CheckpointInfo(
        path=path,
        step=step,
        complete=not gaps,
        kind=kind,
        rank_sidecars=len(sidecars),
        rng_states=len(rng),
        has_config=isinstance(embedded.config, dict),
        bytes=size.bytes,
        size_complete=size.complete,
        metadata_step=embedded.step,
        problems=tuple(problems),
        gaps=tuple(gaps),
        world_size=world,
        has_dcp=has_dcp,
        has_dcp_metadata=dcp_meta,
        dataloader_keys=loader_keys,
        mtime=_mtime(path),
        run_kind=_loader(kind, embedded, path),
        files=size.files,
        newest_mtime=size.newest_mtime,
        total_limit=_total_limit(embedded.config),
        view_of=view_of,
        dcp_error=dcp_error,
    )


def checkpoint_dirs(output_dir: str | os.PathLike[str]) -> list[str]:
    """``checkpoint-<step>`` children of an output dir, highest step first."""
    base = os.fspath(output_dir)
    found: list[tuple[int, str]] = []
    with listing(base) as it:
        for entry in it:
            match = CHECKPOINT_RE.match(entry.name)
            if match and entry.is_dir():
                found.append((int(match.group(1)), os.path.join(base, entry.name)))
    found.sort(key=lambda item: (-item[0], item[1]))
    return [p for _, p in found]


def discover_checkpoints(path: str | os.PathLike[str], *, read_dcp: bool = True) -> list[CheckpointInfo]:
    """Checkpoints in an output dir, or the one checkpoint dir given; newest (highest step) first."""
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if not os.path.exists(path):
        raise FvError(f"{path}: checkpoint path does not exist")
    if not os.path.isdir(path):
        raise FvError(f"{path}: not a directory (expected an output dir or a checkpoint-<step> dir)")
    verdicts = VerdictCache(default_path()) if read_dcp else None
    if checkpoint_step(path) is not None:
        infos = [inspect_checkpoint(path, read_dcp=read_dcp, verdicts=verdicts)]
    else:
        try:
            dirs = checkpoint_dirs(path)
        except OSError as exc:
            raise FvError(f"{path}: cannot list directory ({exc.strerror or exc})") from None
        infos = [inspect_checkpoint(d, read_dcp=read_dcp, verdicts=verdicts) for d in dirs]
    if verdicts is not None:
        verdicts.save()
    return infos


def latest_resumable(infos: list[CheckpointInfo]) -> CheckpointInfo | None:
    """What FastVideo's "latest" resume picks: the highest step whose ``dcp/`` is a directory.

    It may be incomplete (an interrupted save), which is worth a warning.
    """
    candidates = [info for info in infos if info.has_dcp]
    return max(candidates, key=lambda info: info.step, default=None)


def checkpoint_run_kind(checkpoint_dir: str | os.PathLike[str]) -> RunKind:
    """The run kind of one checkpoint; unknown (with why) when ``metadata.json`` is unreadable.

    A listing has it already: ``CheckpointInfo.run_kind`` (``metadata.json`` read once).
    """
    try:
        return run_kind(read_metadata(checkpoint_dir).get("config"))
    except FvError as exc:
        return RunKind("unknown", None, False, str(exc))
