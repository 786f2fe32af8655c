"""Checkpoint discovery: which ``checkpoint-<step>`` dirs exist, are complete, and of what kind.

Listing never raises for a damaged checkpoint: what cannot be read is reported in
``problems`` (an operator is usually looking precisely because something is wrong).
``dcp/.metadata`` (a pickle of torch classes) is read with ``core.formats.inert_pickle``, which runs no
code from the file, is bounded in time and memory, and needs no torch import.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from fvconsole.core.checkpoints.kind import RunKind, run_kind
from fvconsole.core.checkpoints.verdicts import VerdictCache, default_path, identity
from fvconsole.core.formats.inert_pickle import (
    AS_DICT,
    AS_GLOBAL,
    InertObject,
    Limits,
    PickleRefused,
    load_recorded,
)
from fvconsole.core.formats.inert_pickle import load as load_pickle
from fvconsole.core.formats.sidecar_files import SIDECAR_RE
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.safe_read import read_regular_file, short_repr
from fvconsole.core.shared.untrusted import load_file
from fvconsole.core.shared.walk import TreeSize, listing, tree_size

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
RNG_RE = re.compile(r"^rng_state_rank(\d+)\.pt$")
DATALOADER_KEY = "dataloader"

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

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def to_json(self) -> dict:
        return fields_json(self, omit=("run_kind", "files", "newest_mtime", "total_limit"), name=self.name)


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """The step in a ``checkpoint-<step>`` directory name (what FastVideo compares against)."""
    match = CHECKPOINT_RE.match(os.path.basename(os.path.normpath(os.fspath(path))))
    return int(match.group(1)) if match else None


MAX_METADATA_BYTES = 256 * 2**20
#: FastVideo's step counter is an int64 everywhere it is stored.
MAX_STEP = 2**63 - 1
MAX_DCP_METADATA_BYTES = 2**30


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


_INERT_MODULES = ("torch", "pathlib", "collections", "copyreg")
#: DCP metadata of a 64-rank run with 4,000 sharded tensors is ~36 MB and 17.5M opcodes;
#: these caps leave room for several times that and stop a hostile file within seconds.
DCP_LIMITS = Limits(max_ops=100_000_000, max_memo=100_000_000, max_globals=256, max_work=10_000_000)


#: Names outside torch a DCP metadata pickle holds: some Python releases (Debian 12's 3.11.2
#: among them) pickle an enum member as ``getattr(EnumClass, "NAME")``, as torch's
#: ``TensorProperties`` memory format. Inert like every other global: recorded, never called.
_INERT_NAMES = {("builtins", "getattr")}


def _dcp_global(module: str, name: str) -> str:
    """Resolver for the DCP pickle: torch/pathlib names (and an enum member's ``getattr``) become
    inert stand-ins, nothing else."""
    if module == "collections" and name == "OrderedDict":
        return AS_DICT
    if module in _INERT_MODULES or module.startswith(("torch.", "pathlib.")) or (module, name) in _INERT_NAMES:
        return AS_GLOBAL
    raise PickleRefused(f"names {module}.{name}, which a DCP metadata pickle never does")


def _read_dcp_keys(meta: str) -> tuple[str, ...]:
    """State-dict keys of ``dcp/.metadata`` without running the pickle's code (nor importing torch).

    torch's ``FileSystemReader.read_metadata`` is a plain ``pickle.load``: listing a checkpoint
    with it would execute whatever a planted ``.metadata`` asks for. The file is a pickle of a
    few torch dataclasses; only ``Metadata.state_dict_metadata``'s keys are needed. The inert
    reader (``core.formats.inert_pickle``) imports and runs nothing and bounds time and memory; it also
    saves the ~2 s torch import.
    """
    return _dcp_keys_in(load_pickle(read_regular_file(meta, "DCP metadata", MAX_DCP_METADATA_BYTES),
                                    _dcp_global, DCP_LIMITS))


def _dcp_keys_in(obj: Any) -> tuple[str, ...]:
    """The state-dict keys of a decoded DCP ``Metadata`` (ValueError when it is not one)."""
    if not isinstance(obj, InertObject) or obj.cls.name != "Metadata":
        raise ValueError(f"top-level object is {getattr(getattr(obj, 'cls', None), 'name', type(obj).__name__)}, "
                         "not a DCP Metadata")
    state = obj.state
    if isinstance(state, tuple):  # (dict state, slot state) of a dataclass with slots
        merged: dict = {}
        for part in state:
            if isinstance(part, dict):
                merged.update(part)
        state = merged
    table = state.get("state_dict_metadata") if isinstance(state, dict) else None
    if not isinstance(table, dict) or not all(isinstance(k, str) for k in table):
        raise ValueError("Metadata has no state_dict_metadata mapping of string keys")
    return tuple(sorted(table))


# DCP metadata is immutable once written; cache key includes identity, mtime and ctime (a
# rewrite in place that restores size and mtime still changes ctime).
_DCP_CACHE: dict[tuple[str, int, int, int, int], tuple[str, ...]] = {}
_DCP_CACHE_MAX = 4096


def dcp_state_keys(checkpoint_dir: str | os.PathLike[str]) -> list[str]:
    """Sorted DCP state-dict keys from ``dcp/.metadata`` (CPU, no process group, no torch).

    FvError naming the file when it is missing or unreadable (the unpickling error is kept).
    """
    dcp_dir = os.path.join(os.fspath(checkpoint_dir), "dcp")
    meta = os.path.join(dcp_dir, ".metadata")
    try:
        st = os.stat(meta)
    except OSError as exc:
        raise FvError(f"{meta}: cannot read DCP metadata ({exc.strerror or exc})") from None
    key = (os.path.realpath(meta), st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    cached = _DCP_CACHE.get(key)
    if cached is not None:
        return list(cached)
    with _dcp_errors(meta):
        keys = _read_dcp_keys(meta)
    if len(_DCP_CACHE) >= _DCP_CACHE_MAX:
        _DCP_CACHE.clear()
    _DCP_CACHE[key] = keys
    return list(keys)


@contextmanager
def _dcp_errors(meta: str) -> Iterator[None]:
    """Every way decoding ``meta`` fails, as the one FvError naming it (the pickle's reason kept)."""
    try:
        yield
    except FvError:
        raise
    except PickleRefused as exc:
        raise FvError(f"{meta}: unreadable DCP metadata: the pickle {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged pickle can raise anything
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise FvError(f"{meta}: unreadable DCP metadata ({reason})") from None


def dcp_key_summary(checkpoint_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Top-level DCP key → number of state keys under it (for the TUI detail pane)."""
    summary: dict[str, int] = {}
    for key in dcp_state_keys(checkpoint_dir):
        top = key.split(".", 1)[0]
        summary[top] = summary.get(top, 0) + 1
    return dict(sorted(summary.items()))


def dataloader_key_count(checkpoint_dir: str, verdicts: VerdictCache | None = None) -> int:
    """State keys under ``dataloader`` in ``dcp/.metadata`` (what tells legacy from none).

    With ``verdicts``, a file whose identity was decoded cleanly before is not decoded again,
    nor one of the shape of a file this listing decoded (``core/formats/pickle_shape.py``: the same
    bytes but for opaque strings and integers, as every save of one run writes); a new verdict
    is kept only if the file's identity did not change while it was read.
    FvError as :func:`dcp_state_keys`.
    """
    meta = os.path.join(checkpoint_dir, "dcp", ".metadata")
    if verdicts is None:
        return _loader_keys(dcp_state_keys(checkpoint_dir))
    key = _identity(meta)
    if key is not None:
        hit = verdicts.get(key)
        if hit is not None:
            return hit
    try:
        os.stat(meta)
    except OSError as exc:
        raise FvError(f"{meta}: cannot read DCP metadata ({exc.strerror or exc})") from None
    with _dcp_errors(meta):  # as dcp_state_keys words it: reading is part of decoding
        data = read_regular_file(meta, "DCP metadata", MAX_DCP_METADATA_BYTES)
        count = verdicts.shapes.verdict(data)
        if count is None:
            obj, spans = load_recorded(data, _dcp_global, DCP_LIMITS)
            count = _loader_keys(_dcp_keys_in(obj))
            verdicts.shapes.keep(data, spans, count)
    if key is not None and _identity(meta) == key:
        verdicts.put(key, count)
    return count


def _loader_keys(keys: Iterable[str]) -> int:
    return sum(1 for k in keys if k == DATALOADER_KEY or k.startswith(DATALOADER_KEY + "."))


def _identity(meta: str) -> str | None:
    try:
        st = os.lstat(meta)
    except OSError:
        return None
    return identity(meta, st) if stat.S_ISREG(st.st_mode) else None


def _scan_rank_files(path: str) -> tuple[set[int], set[int], bool, bool]:
    """(rng ranks, sidecar ranks, has dcp dir, has metadata.json) from one directory listing."""
    rng: set[int] = set()
    sidecars: set[int] = set()
    has_dcp = has_meta = False
    with listing(path) as it:
        for entry in it:
            name = entry.name
            if name == "dcp":
                has_dcp = entry.is_dir(follow_symlinks=False)
            elif name == "metadata.json":
                has_meta = True
            elif (m := RNG_RE.match(name)) is not None:
                rng.add(int(m.group(1)))
            elif (m := SIDECAR_RE.match(name)) is not None:
                sidecars.add(int(m.group(1)))
    return rng, sidecars, has_dcp, has_meta


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


def inspect_checkpoint(path: str | os.PathLike[str], *, read_dcp: bool = True,
                       verdicts: VerdictCache | None = None, size: TreeSize | None = None) -> CheckpointInfo:
    """Inspect one ``checkpoint-<step>`` dir. ``read_dcp=False`` skips the DCP metadata (kind may be unknown).

    ``verdicts``: remembered DCP decodes (``core.checkpoints.verdicts``), for listings; ``size``: the
    tree's walk when the caller made it already (retention's, which also looked for held inodes).
    """
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    step = checkpoint_step(path)
    if step is None:
        raise FvError(f"{path}: not a checkpoint directory (name must match checkpoint-<step>)")
    if not os.path.isdir(path):
        raise FvError(f"{path}: checkpoint directory does not exist")
    problems: list[str] = []
    if os.path.islink(path):
        problems.append("checkpoint directory is a symlink")
    rng, sidecars, has_dcp, has_meta = _scan_rank_files(path)
    metadata_step: int | None = None
    config: Any = None
    meta_error: str | None = None
    if has_meta:
        try:
            meta = read_metadata(path)
            metadata_step = meta["step"]
            config = meta.get("config")
        except FvError as exc:
            meta_error = str(exc)
            problems.append(meta_error)
    else:
        problems.append("metadata.json is missing")
    if metadata_step is not None and metadata_step != step:
        problems.append(f"metadata.json step {metadata_step} differs from directory step {step}")
    if has_meta and config is None and metadata_step is not None:
        problems.append("metadata.json has no embedded config")
    world = _world_size(config)
    dcp_meta = has_dcp and os.path.isfile(os.path.join(path, "dcp", ".metadata"))
    if not has_dcp:
        problems.append("dcp/ directory is missing")
    elif not dcp_meta:
        problems.append("dcp/.metadata is missing (interrupted save)")
    if world is not None:
        complete = dcp_meta and all(r in rng for r in range(world))
        missing_rng = world - sum(1 for r in range(world) if r in rng)
        if missing_rng:
            problems.append(f"{missing_rng} of {plural(world, 'rng_state_rank<r>.pt file')} missing "
                            "(interrupted save)")
    else:
        complete = dcp_meta
    if sidecars and world is not None and sidecars != set(range(world)):
        problems.append(f"{plural(len(sidecars), 'dataloader_state_rank<r>.pt file')} for world size {world}")
    kind: Kind
    loader_keys: int | None = None
    if sidecars:
        kind = "rank-local"
    elif not read_dcp or not dcp_meta:
        kind = "unknown"
    else:
        try:
            loader_keys = dataloader_key_count(path, verdicts)
            kind = "legacy" if loader_keys else "none"
        except FvError as exc:
            problems.append(str(exc))
            kind = "unknown"
    loader: RunKind | None = None
    if kind == "legacy":  # as run_kind.checkpoint_run_kind, without reading metadata.json again
        if metadata_step is not None:
            loader = run_kind(config)
        elif meta_error is not None:
            loader = RunKind("unknown", None, False, meta_error)
        else:
            loader = checkpoint_run_kind(path)
    try:
        mtime: float | None = os.stat(path).st_mtime
    except OSError:
        mtime = None
    size = tree_size(path) if size is None else size
    if size.note:
        problems.append(size.note)
    return CheckpointInfo(
        path=path,
        step=step,
        complete=complete,
        kind=kind,
        rank_sidecars=len(sidecars),
        rng_states=len(rng),
        has_config=isinstance(config, dict),
        bytes=size.bytes,
        size_complete=size.complete,
        metadata_step=metadata_step,
        problems=tuple(problems),
        world_size=world,
        has_dcp=has_dcp,
        has_dcp_metadata=dcp_meta,
        dataloader_keys=loader_keys,
        mtime=mtime,
        run_kind=loader,
        files=size.files,
        newest_mtime=size.newest_mtime,
        total_limit=_total_limit(config),
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
