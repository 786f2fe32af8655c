"""The demo workspace behind ``fvconsole demo``: a small but real training run and shard cache.

Layout (all under one directory)::

    .fvconsole-demo.json          marker, written first ("building") and last ("complete"), with a
                                  random token and the top-level names the build creates: lets
                                  `fvconsole demo DIR` rebuild this dir (also after a build that
                                  died part-way), deleting only those names
    data/openvid/*.parquet        real Parquet dataset (~50 row groups)
    manifests/openvid.json        its streaming manifest (outside the dataset)
    run.yaml                      the next job: 8 ranks, sp 2, resumes from checkpoint-300 (legacy)
    output/checkpoint-100,200,300 legacy checkpoints (real DCP); 200 was saved with seed 7
    output/checkpoint-400         rank-local (FastVideo-native) checkpoint, saved in epoch 1 as FastVideo's
                                  loader counts (800 samples per rank: 724 make an epoch, 76 into the next)
    output/checkpoint-500         interrupted save (RNG files for half the ranks)
    output/dataloader-state/validated-100
                                  checkpoint-100 migrated, with FastVideo's validation receipt
    shard-cache/<key>/            complete, partial, incomplete, empty, writing and invalid entries
    shard-cache/README.txt        a foreign file the scan must ignore
    shard-cache/old-run-weights/  a foreign directory (FastVideo's GC counts it and may delete it)
    resume/                       empty: where the printed reshard command puts its checkpoint view
    fleet/                        the stand-in fleet: per-node caches, srun, squeue, sinfo
"""

from __future__ import annotations

import copy
import os
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from fvconsole.core.shared.atomic import atomic_write_json
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.mounts import mount_points
from fvconsole.core.shared.removal import remove_empty_dir, remove_tree
from fvconsole.core.shared.untrusted import load_file

MARKER = ".fvconsole-demo.json"
#: Everything a build makes at the top of DIR (besides the marker); the marker records it.
CREATED = ("data", "manifests", "output", "map-style-output", "text-only-output", "run.yaml", "run-text-only.yaml",
           "shard-cache", "fleet", "resume")
MAX_MARKER_BYTES = 1 << 20
_TOKEN = re.compile(r"[0-9a-f]{32}")
_MARKER_TMP = re.compile(r"\." + re.escape(MARKER) + r"\.[0-9a-f]{8}\.tmp")
DEMO_ROWS = (48, 64, 56, 72, 60, 52, 68, 64)  # row counts cycled over the row groups
DATASET_AGE = 30 * 86400  # the dataset predates every checkpoint
DEMO_STEPS = {100: 3 * 86400, 200: 2 * 86400, 300: 26 * 3600, 400: 5 * 3600, 500: 20 * 60}


@dataclass(frozen=True)
class DemoWorkspace:
    """Paths of a built demo workspace."""

    root: str
    dataset_root: str
    manifest_path: str
    config_path: str
    output_dir: str
    cache_root: str
    legacy_checkpoint: str  # the one that migrates cleanly with run.yaml
    mismatch_checkpoint: str  # legacy, saved with a different seed
    sidecar_dir: str  # suggested migration output
    validated_sidecar_dir: str  # checkpoint-100's set, with FastVideo's validation receipt
    map_style_output_dir: str  # a run with FastVideo's map-style loader: legacy, not migratable
    #: A streaming run that projects FastVideo's text_only columns while the manifest holds t2v's:
    #: FastVideo rebuilds the manifest at resume, with the same fingerprint (the migration says so).
    text_only_config_path: str
    text_only_checkpoint: str
    #: A stand-in fleet (fleet_builders): per-node roots ``fleet/<node>/wcache`` (``{node}`` in this
    #: path) and ``fleet/bin`` holding an srun, squeue and sinfo that emulate eight Slurm nodes.
    fleet_cache_root: str
    fleet_bin: str
    fleet_nodes: str  # as a Slurm hostlist
    created_at: float

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DemoMarker:
    """What a previous build recorded in its marker: its token and the top-level names it created."""

    token: str
    created: tuple[str, ...]


def read_marker(root: str) -> DemoMarker:
    """The marker of a previous build, or FvError: a marker that does not parse, lacks the token
    or lists a name this demo never creates is not the demo's (so nothing is deleted on its word)."""
    path = os.path.join(root, MARKER)
    not_ours = f"{root}: directory is not empty and is not a demo workspace ({MARKER} "
    try:
        doc = load_file(path, "demo marker", MAX_MARKER_BYTES)
    except FileNotFoundError:
        raise FvError(not_ours + "missing); choose another DIR") from None
    except OSError as exc:
        raise FvError(not_ours + f"unreadable: {exc.strerror}); choose another DIR") from None
    except FvError:
        raise FvError(not_ours + "is not a demo marker: it does not parse); choose another DIR") from None
    token = doc.get("token") if isinstance(doc, dict) else None
    created = doc.get("created") if isinstance(doc, dict) else None
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise FvError(not_ours + "is not a demo marker: no demo token); choose another DIR")
    if not isinstance(created, list) or not all(isinstance(n, str) and n in CREATED for n in created):
        raise FvError(not_ours + "is not a demo marker: field created is not a list of the demo's names); "
                      "choose another DIR")
    return DemoMarker(token, tuple(created))


def _ours(name: str, marker: DemoMarker) -> bool:
    """A top-level name a previous build made: one it recorded, its marker, a temp file of its marker."""
    return name == MARKER or name in marker.created or _MARKER_TMP.fullmatch(name) is not None


def check_target(root: str) -> DemoMarker | None:
    """Refuse DIR unless it is absent, empty, or holds only what a previous demo build made.

    Returns that build's marker (None for an absent or empty DIR). Refused, naming the first
    path that is not the demo's: a non-empty dir without a demo marker, anything the marker
    does not list, a mount point anywhere inside. Nothing is touched.
    """
    if os.path.islink(root):
        raise FvError(f"{root}: is a symlink; give a real directory for the demo workspace")
    if os.path.exists(root) and not os.path.isdir(root):
        raise FvError(f"{root}: exists and is not a directory")
    if not os.path.isdir(root) or not os.listdir(root):
        return None
    marker = read_marker(root)
    for name in sorted(os.listdir(root)):
        if not _ours(name, marker):
            raise FvError(f"{os.path.join(root, name)}: not made by the demo (its marker does not list it); "
                          "the demo deletes only what it built: move it away or choose another DIR")
    _check_no_mounts(root)
    return marker


def _no_space_left(root: str) -> str | None:
    """What a failed build's filesystem has left, when that is under 1 MiB (else None)."""
    try:
        st = os.statvfs(root if os.path.isdir(root) else os.path.dirname(root) or ".")
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    return f"{free} bytes free on its filesystem" if free < (1 << 20) else None


class DemoBuildFailed(FvError):
    """The build failed part-way; the message says what happened to the partial workspace."""

    kind = "demo_failed"


def _check_no_mounts(root: str) -> None:
    """Refuse a workspace with a mount point inside (bind mounts of the same filesystem included).

    ``/proc/self/mountinfo`` names every mount point; without it the remover's own check (mount
    ids of every directory it opens) still never lets a removal cross one.
    """
    points = mount_points()
    inside = sorted(p for p in points or () if p.startswith(root.rstrip(os.sep) + os.sep))
    if inside:
        raise FvError(f"{inside[0]}: a mount point inside the demo workspace; unmount it or choose another DIR")


def _clear_previous(root: str, marker: DemoMarker, *, keep_marker: bool) -> None:
    """Remove what a demo build made in ``root`` (``core.shared.removal``: no symlink followed, no mount crossed).

    With ``keep_marker`` the marker stays, so a clear that fails part-way still leaves a
    directory the same command can rebuild.
    """
    for name in sorted(os.listdir(root)):
        if not _ours(name, marker) or (keep_marker and name == MARKER):
            continue
        try:
            remove_tree(os.path.join(root, name))
        except OSError as exc:
            what = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
            raise FvError(f"{os.path.join(root, name)}: the previous demo workspace could not be removed "
                          f"({what})") from None


def _write_marker(root: str, payload: dict) -> None:
    atomic_write_json(os.path.join(root, MARKER), payload, sync_dir=False)


def _remove_partial(root: str, marker: DemoMarker, created_root: bool) -> str:
    """After a failed build: remove what it made; returns what the error message should say."""
    try:
        _clear_previous(root, marker, keep_marker=False)
    except (OSError, FvError):
        if os.path.isfile(os.path.join(root, MARKER)):
            return "the partial workspace is marked as a demo workspace: run the same command to rebuild it"
        return "the partial workspace could not be removed"
    if created_root and not remove_empty_dir(root):
        return "the partial workspace was removed, except for what is left in it"
    return "the partial workspace was removed"


def _age(path: str, when: float) -> None:
    """Backdate a tree (dir and files): checkpoints show varied ages, the dataset a fixed mtime."""
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
    os.utime(path, (when, when))


def build_demo_workspace(root: str, now: float | None = None) -> DemoWorkspace:
    """Build (or rebuild) the demo workspace at ``root``; returns its paths.

    The marker is written first (state "building"), so a build killed part-way leaves a
    directory this function rebuilds; a build that fails removes what it made and raises
    DemoBuildFailed naming ``root``.
    """
    root = os.path.abspath(os.path.expanduser(root))
    previous = check_target(root)
    created_root = not os.path.isdir(root)
    if previous is not None:
        _clear_previous(root, previous, keep_marker=True)
    now = time.time() if now is None else now
    marker = DemoMarker(secrets.token_hex(16), CREATED)
    recorded = {"fvconsole_demo": 1, "token": marker.token, "created": list(marker.created)}
    try:
        os.makedirs(root, exist_ok=True)
        _write_marker(root, {"state": "building", "root": root, "started_at": now, **recorded})
        workspace = _build(root, now)
        _write_marker(root, {"state": "complete", **workspace.to_json(), **recorded})
    except BaseException as exc:
        full = _no_space_left(root)  # before the partial workspace is removed and frees it
        outcome = _remove_partial(root, marker, created_root) if os.path.isdir(root) else "nothing was created"
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, OSError):
            reason = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
        else:
            reason = str(exc) or type(exc).__name__
            if full:  # torch's writer reports a full disk as "unexpected pos ...", not ENOSPC
                reason += f"; No space left on device ({full})"
        raise DemoBuildFailed(f"{root}: building the demo workspace failed ({reason}); {outcome}") from exc
    return workspace


def _build(root: str, now: float) -> DemoWorkspace:
    """Everything inside ``root`` except the marker."""
    from fvconsole.demo import builders, cache_builders

    dataset = builders.write_dataset(os.path.join(root, "data", "openvid"), files=4, row_groups_per_file=13,
                                     rows_per_group=DEMO_ROWS)
    _age(dataset, now - DATASET_AGE)  # before the manifest records mtimes: same `now`, same fingerprint
    manifest = os.path.join(root, "manifests", "openvid.json")
    builders.build_manifest(dataset, manifest)
    output = os.path.join(root, "output")
    config = builders.run_config(data_path=dataset, manifest_path=manifest, output_dir=output, num_gpus=8,
                                 sp_size=2, train_batch_size=1, grad_accum=2, seed=42, read_batch_size=8)
    # The next job's run.yaml resumes from checkpoint-300 explicitly, as an operator's relaunch would;
    # the checkpoints embed the config of the jobs that saved them (which set no resume).
    next_job = copy.deepcopy(config)
    next_job["training"]["checkpoint"]["resume_from_checkpoint"] = os.path.join(output, "checkpoint-300")
    config_path = builders.write_run_config(os.path.join(root, "run.yaml"), next_job)
    other_seed = builders.run_config(data_path=dataset, manifest_path=manifest, output_dir=output, num_gpus=8,
                                     sp_size=2, train_batch_size=1, grad_accum=2, seed=7, read_batch_size=8)
    builders.write_checkpoint(output, 100, config)
    builders.write_checkpoint(output, 200, other_seed)
    builders.write_checkpoint(output, 300, config)
    builders.write_checkpoint(output, 400, config, kind="rank-local")
    builders.write_checkpoint(output, 500, config, kind="rank-local", complete=False)
    validated = os.path.join(output, "dataloader-state", "validated-100")
    builders.write_validated_set(config_path, os.path.join(output, "checkpoint-100"), validated, step=100,
                                 world_size=8, consumed_batches_per_rank=200,
                                 created_at=datetime.fromtimestamp(now - 2 * 86400, timezone.utc).isoformat())
    for step, age in DEMO_STEPS.items():
        _age(os.path.join(output, f"checkpoint-{step}"), now - age)
    map_output = os.path.join(root, "map-style-output")
    map_config = builders.run_config(data_path=dataset, manifest_path=manifest, output_dir=map_output, num_gpus=8,
                                     sp_size=2, train_batch_size=1, grad_accum=2, seed=42, dataloader_type="map")
    builders.write_checkpoint(map_output, 150, map_config)
    _age(os.path.join(map_output, "checkpoint-150"), now - 2 * 86400)
    text_output = os.path.join(root, "text-only-output")
    text_config = builders.run_config(data_path=dataset, manifest_path=manifest, output_dir=text_output, num_gpus=8,
                                      sp_size=2, train_batch_size=1, grad_accum=2, seed=42, read_batch_size=8,
                                      **{"training.data.preprocessed_data_type": "text_only"})
    text_config_path = builders.write_run_config(os.path.join(root, "run-text-only.yaml"), text_config)
    text_checkpoint = builders.write_checkpoint(text_output, 120, text_config)
    _age(text_checkpoint, now - 30 * 3600)
    os.mkdir(os.path.join(root, "resume"))  # the reshard command's checkpoint view goes here (outside output/)
    cache_root = os.path.join(root, "shard-cache")
    cache_builders.build_demo_cache(cache_root, now=now)
    with open(os.path.join(cache_root, "README.txt"), "w", encoding="utf-8") as handle:
        handle.write("not a cache entry: the scan lists it as foreign and never deletes it\n")
    os.mkdir(os.path.join(cache_root, "old-run-weights"))
    with open(os.path.join(cache_root, "old-run-weights", "notes.txt"), "w", encoding="utf-8") as handle:
        handle.write("someone's copy: fvconsole never touches it, FastVideo's GC counts it and may delete it\n")
    from fvconsole.core.fleet import compress_hostlist
    from fvconsole.demo.fleet_builders import build_fleet

    fleet = build_fleet(os.path.join(root, "fleet"), now)
    workspace = DemoWorkspace(
        root=root, dataset_root=dataset, manifest_path=manifest, config_path=config_path, output_dir=output,
        cache_root=cache_root, legacy_checkpoint=os.path.join(output, "checkpoint-300"),
        mismatch_checkpoint=os.path.join(output, "checkpoint-200"),
        sidecar_dir=os.path.join(output, "dataloader-state", "checkpoint-300"), validated_sidecar_dir=validated,
        map_style_output_dir=map_output, text_only_config_path=text_config_path, text_only_checkpoint=text_checkpoint,
        fleet_cache_root=fleet.root, fleet_bin=os.path.dirname(fleet.srun), fleet_nodes=compress_hostlist(fleet.nodes),
        created_at=now,
    )
    return workspace
