"""Execute a migration plan (write rank-local sidecars + receipt) and verify a written set.

Why this shape: FastVideo reads ``$FASTVIDEO_DATALOADER_STATE_DIR/dataloader_state_rank<r>.pt``
for every rank, so an output dir holding half a set (or a new receipt beside old sidecars)
would resume a run from the wrong samples. Everything is therefore staged in a sibling
directory ``.<outname>.fvconsole-staging-<host>-<identity key>-<pid>-<rand>`` on the same
filesystem, each file written atomically and verified, the receipt written last, and only
then published with a single rename (new dir) or an atomic ``renameat2(RENAME_EXCHANGE)``
swap (``--overwrite``). At any instant the output dir is either absent, the previous
complete set, or the new complete set. The legacy checkpoint is only ever read.

The output dir is usually on a filesystem shared by several hosts, so a PID means nothing
by itself (:mod:`fvconsole.core.host`): executions on one output dir serialise through the
lock file ``.<outname>.fvconsole-lock`` beside it (:mod:`fvconsole.core.locks`); a staging
dir is removed only by a process of the identity in its name, once its PID is dead (the
others are reported, never touched); and the published set is re-read and compared with
what was written before success is reported.

Test-only fault hook: when the environment variable ``FVCONSOLE_FAULT_KILL_AT=N`` is set,
:func:`execute_plan` sends itself SIGKILL right before its N-th file-system operation
(every create, write, fsync, rename, unlink and rmdir counts; see :func:`_fault_point`).
``FVCONSOLE_FAULT_TRACE=<file>`` appends one line per operation label to that file so a
crash-consistency test can learn how many points there are. ``FVCONSOLE_FAULT_PAUSE_AT``
(an operation number, or a regular expression searched in each operation's label) with
``FVCONSOLE_FAULT_PAUSE_FILE=<file>`` pauses right before the first such operation: the
process writes ``<pid> <label>`` to that file and waits until the test deletes it (at most
``FVCONSOLE_FAULT_PAUSE_TIMEOUT`` seconds, default 120), so a test can act "in between"
(a second migration from another host, tampering with the published set). Never set these
in production.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from fvconsole.core import torch_zip
from fvconsole.core.errors import FvError, PartialFailure
from fvconsole.core.fsutil import is_within, sha256_file
from fvconsole.core.host import HostIdentity, current_identity, pid_alive
from fvconsole.core.locks import FileLock
from fvconsole.core.progress import Progress, no_progress
from fvconsole.core.safe_read import file_kind, load_json, open_regular, read_regular_file, short_repr

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration import MigrationPlan

SIDECAR_VERSION = 1
RECEIPT_SCHEMA = "fastvideo-legacy-streaming-dataloader-migration/v1"
RECEIPT_NAME = "migration_receipt.json"
#: A receipt lists ~250 bytes per rank; this allows a million ranks and refuses /dev/zero.
MAX_RECEIPT_BYTES = 256 * 2**20
SIDECAR_RE = re.compile(r"^dataloader_state_rank(\d+)\.pt$")
#: Hidden temp files we (and FastVideo's own atomic save) leave while writing.
TEMP_RE = re.compile(r"^\.(dataloader_state_rank\d+\.pt|migration_receipt\.json)\.[0-9A-Za-z_-]+\.tmp$")
STAGING_TAG = ".fvconsole-staging-"
LOCK_TAG = ".fvconsole-lock"
#: The longest file name most filesystems accept (staging names add ~85 bytes to the output dir's).
NAME_MAX = 255
#: Re-verification reads at most this much of a published file (a sidecar is a few KiB).
MAX_PUBLISHED_BYTES = 64 << 20
#: Below this many ranks a thread pool costs more than it saves.
PARALLEL_THRESHOLD = 16


def sidecar_name(rank: int) -> str:
    """File name FastVideo looks up for ``rank``."""
    return f"dataloader_state_rank{rank}.pt"


def staging_pattern(outname: str) -> re.Pattern[str]:
    """Names of our staging dirs for an output dir called ``outname``.

    Groups ``host`` (label), ``key`` (:attr:`HostIdentity.key`) and ``pid``; ``host`` and
    ``key`` are None for the identity-less names of older versions (``-<pid>-<rand>``).
    """
    return re.compile(
        rf"^\.{re.escape(outname)}{re.escape(STAGING_TAG)}"
        r"(?:(?P<host>[A-Za-z0-9._-]{1,40})-(?P<key>[0-9a-f]{12})-)?(?P<pid>\d+)-[0-9a-f]+$"
    )


def staging_name(outname: str, me: HostIdentity | None = None, pid: int | None = None) -> str:
    """A fresh staging dir name saying whose it is: host label, identity key, pid."""
    me = me or current_identity()
    pid = os.getpid() if pid is None else pid
    return f".{outname}{STAGING_TAG}{me.label}-{me.key}-{pid}-{secrets.token_hex(4)}"


def lock_path(out: str) -> str:
    """The migration lock of output dir ``out``: beside it, so no set ever contains it."""
    out = os.path.abspath(out)
    return os.path.join(os.path.dirname(out), f".{os.path.basename(out)}{LOCK_TAG}")


def migration_lock(out: str, step: Any = None) -> FileLock:
    """The lock that serialises executions on ``out`` (any host sharing the filesystem)."""
    return FileLock(lock_path(out), subject=os.path.abspath(out), what="another migration holds the lock",
                    break_flag="--break-lock", step=step)


# --------------------------------------------------------------------------- fault hook


_FAULT_LOCK = threading.Lock()
_FAULT_COUNT = 0
_FAULT_PAUSED = False


def _reset_fault_counter() -> None:
    global _FAULT_COUNT, _FAULT_PAUSED
    with _FAULT_LOCK:
        _FAULT_COUNT = 0
        _FAULT_PAUSED = False


def _fault_point(label: str) -> None:
    """Test-only: count one file-system step; SIGKILL or pause here if the environment says so."""
    global _FAULT_COUNT, _FAULT_PAUSED
    kill_at = os.environ.get("FVCONSOLE_FAULT_KILL_AT")
    trace = os.environ.get("FVCONSOLE_FAULT_TRACE")
    pause_at = os.environ.get("FVCONSOLE_FAULT_PAUSE_AT")
    if not kill_at and not trace and not pause_at:
        return
    with _FAULT_LOCK:  # held while paused: the other writer threads stop at their next step
        _FAULT_COUNT += 1
        count = _FAULT_COUNT
        if trace:
            with open(trace, "a", encoding="utf-8") as handle:
                handle.write(f"{count} {label}\n")
        if kill_at and kill_at.strip().isdigit() and count == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
        if pause_at and not _FAULT_PAUSED and (
            count == int(pause_at) if pause_at.strip().isdigit() else re.search(pause_at, label)
        ):
            _FAULT_PAUSED = True
            _fault_pause(label)


def _fault_pause(label: str) -> None:
    """Test-only: announce ``label`` in ``$FVCONSOLE_FAULT_PAUSE_FILE``, wait until it is deleted."""
    path = os.environ.get("FVCONSOLE_FAULT_PAUSE_FILE")
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()} {label}\n")
    os.replace(tmp, path)  # the test never sees a half-written announcement
    deadline = time.monotonic() + float(os.environ.get("FVCONSOLE_FAULT_PAUSE_TIMEOUT", "120"))
    while os.path.lexists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


# --------------------------------------------------------------------------- small helpers


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: str, label: str) -> None:
    _fault_point(label)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file_atomic(directory: str, name: str, data: bytes) -> str:
    """Temp file in ``directory``, write, flush, fsync, rename; returns the final path.

    The caller fsyncs the directory once for many files (one fsync per dir, not per file).
    """
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
    final = os.path.join(directory, name)
    _fault_point(f"create {tmp}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            _fault_point(f"write {tmp}")
            handle.write(data)
            handle.flush()
            _fault_point(f"fsync {tmp}")
            os.fsync(handle.fileno())
        _fault_point(f"rename {tmp} -> {final}")
        os.rename(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return final


# --------------------------------------------------------------------------- output dir rules


def classify_entry(name: str) -> str:
    """'sidecar', 'receipt', 'temp' (our hidden temp files) or 'foreign'."""
    if SIDECAR_RE.match(name):
        return "sidecar"
    if name == RECEIPT_NAME:
        return "receipt"
    if TEMP_RE.match(name):
        return "temp"
    return "foreign"


@dataclass(frozen=True)
class OutputState:
    """What is at the output path right now."""

    path: str
    exists: bool
    sidecars: tuple[str, ...] = ()
    receipt: bool = False
    temps: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()

    @property
    def has_set(self) -> bool:
        return bool(self.sidecars) or self.receipt


def inspect_output_dir(path: str) -> OutputState:
    """Classify the output dir's entries without following symlinks (FvError if unusable)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return OutputState(path, False)
    if stat.S_ISLNK(st.st_mode):
        raise FvError(f"{path}: output dir is a symlink; pass the real directory (--output-dir)")
    if not stat.S_ISDIR(st.st_mode):
        raise FvError(f"{path}: output dir exists and is not a directory (--output-dir)")
    sidecars, temps, foreign = [], [], []
    receipt = False
    with os.scandir(path) as entries:
        for entry in entries:
            kind = classify_entry(entry.name)
            regular = entry.is_file(follow_symlinks=False)
            if kind == "foreign" or not regular:
                foreign.append(entry.name)
            elif kind == "sidecar":
                sidecars.append(entry.name)
            elif kind == "receipt":
                receipt = True
            else:
                temps.append(entry.name)
    return OutputState(path, True, tuple(sorted(sidecars)), receipt, tuple(sorted(temps)), tuple(sorted(foreign)))


def check_output_dir(out: str, checkpoint: str, overwrite: bool) -> OutputState:
    """Refuse (FvError) unless ``out`` may receive a new set; nothing is written."""
    out_real = os.path.realpath(out)
    ck_real = os.path.realpath(checkpoint)
    if is_within(out_real, ck_real):
        raise FvError(
            f"{out}: output dir resolves to {out_real}, inside the legacy checkpoint {ck_real} "
            "(--output-dir must be outside it; the checkpoint is never modified)"
        )
    if is_within(ck_real, out_real):
        raise FvError(f"{out}: output dir contains the checkpoint {ck_real} (--output-dir)")
    state = inspect_output_dir(out)
    if state.foreign:
        shown = ", ".join(state.foreign[:3]) + (" ..." if len(state.foreign) > 3 else "")
        raise FvError(
            f"{out}: output dir contains {len(state.foreign)} file(s) that are not fvconsole sidecars "
            f"({shown}); refusing to replace it (--output-dir)"
        )
    if state.has_set and not overwrite:
        raise FvError(
            f"{out}: output dir already holds {len(state.sidecars)} sidecar(s)"
            f"{' and a receipt' if state.receipt else ''}; pass --overwrite to replace the set"
        )
    return state


# --------------------------------------------------------------------------- preconditions


def output_dir_refusal(plan: MigrationPlan, *, break_lock: bool = False) -> str | None:
    """The execute-time output dir rules (foreign files, symlinks, the lock) as a refusal message.

    The dry run (CLI) and the console's preview call this so that they refuse exactly what
    execution would, before anything is written. The lock is only read, never taken.
    """
    out = os.path.abspath(plan.output_dir)
    try:
        check_output_dir(out, plan.checkpoint, plan.request.overwrite)
    except FvError as exc:
        return f"output_dir: {exc}"
    refusal = migration_lock(out).probe(break_stale=break_lock).refusal
    if refusal:
        return f"output_dir: {refusal}"
    return _unwritable_parent(out)


def output_dir_warnings(plan: MigrationPlan, *, break_lock: bool = False) -> list[str]:
    """What execution would report beside the output dir: staging dirs, a stale lock it breaks."""
    out = os.path.abspath(plan.output_dir)
    parent, outname = os.path.dirname(out), os.path.basename(out)
    warnings = []
    for found in _staging_dirs(parent, outname):
        why = _staging_kept(found)
        warnings.append(why or f"{found.path}: staging dir of a crashed migration on this host "
                               f"(pid {found.pid}); --yes removes it")
    note = migration_lock(out).probe(break_stale=break_lock).note
    return [*warnings, note] if note else warnings


def _unwritable_parent(out: str) -> str | None:
    """Why the staging dir (a sibling of ``out``) could not be created, judged without writing.

    Looks at the nearest existing ancestor of ``out``'s parent: it must be a directory we may
    write into, on a filesystem mounted read-write. (A dry run must not promise a write that
    execution would then fail part-way.)
    """
    ancestor = os.path.dirname(out)
    while not os.path.lexists(ancestor) and ancestor != os.path.dirname(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"output_dir: {out}: {ancestor} is not a directory, so the output dir cannot be created"
    try:
        if os.statvfs(ancestor).f_flag & os.ST_RDONLY:
            return f"output_dir: {out}: {ancestor} is on a read-only filesystem"
    except OSError:
        pass
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"output_dir: {out}: no permission to create files in {ancestor}"
    return None


def _recheck_sources(plan: MigrationPlan) -> None:
    """The checkpoint metadata, config and manifest must still be what the plan was made from."""
    meta = os.path.join(plan.checkpoint, "metadata.json")
    try:
        meta_sha = sha256_file(meta)
    except OSError as exc:
        raise FvError(f"{meta}: cannot read checkpoint metadata ({exc.strerror})") from None
    if meta_sha != plan.checkpoint_metadata_sha256:
        raise FvError(f"{meta}: changed since the plan was made (sha256 {meta_sha[:12]} != {plan.checkpoint_metadata_sha256[:12]})")
    if plan.config_path and plan.config_sha256:
        try:
            cfg_sha = sha256_file(plan.config_path)
        except OSError as exc:
            raise FvError(f"{plan.config_path}: cannot read run config ({exc.strerror})") from None
        if cfg_sha != plan.config_sha256:
            raise FvError(f"{plan.config_path}: run config changed since the plan was made (sha256)")
    fingerprint = _manifest_fingerprint_now(plan.manifest_path)
    if fingerprint != plan.manifest_fingerprint:
        raise FvError(
            f"{plan.manifest_path}: field 'fingerprint' changed since the plan was made "
            f"({fingerprint[:12]} != {plan.manifest_fingerprint[:12]})"
        )


def _manifest_fingerprint_now(path: str) -> str:
    """The manifest's fingerprint now; recomputed from the row groups when the stored one agrees.

    A stored field that no longer matches its own row groups is reported as that mismatch.
    """
    from fvconsole.core.manifest import compute_fingerprint, load_manifest

    manifest = load_manifest(path)
    stored = str(manifest.fingerprint)
    recomputed = compute_fingerprint(manifest.raw["row_groups"])
    return stored if recomputed == stored else recomputed


# --------------------------------------------------------------------------- staging


@dataclass(frozen=True)
class StagingDir:
    """A staging dir beside the output dir, as its name describes it."""

    path: str
    host: str | None  # host label; None for an identity-less name of an older version
    key: str | None
    pid: int


def _staging_dirs(parent: str, outname: str) -> list[StagingDir]:
    """Staging dirs (real directories, not symlinks) of ``outname`` in ``parent``."""
    pattern = staging_pattern(outname)
    found = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return found
    for entry in sorted(entries, key=lambda e: e.name):
        match = pattern.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False):
            found.append(StagingDir(entry.path, match["host"], match["key"], int(match["pid"])))
    return found


def _staging_kept(found: StagingDir, me: HostIdentity | None = None) -> str | None:
    """Why ``found`` must be left alone, or None if it is a crashed run of this very identity.

    Only this identity can tell whether the PID in the name still runs: a staging dir of
    another host or container (or without an identity) may be a live migration's.
    """
    me = me or current_identity()
    if found.key is None:
        return (f"{found.path}: staging dir without a host identity (older fvconsole, pid {found.pid}); "
                "left untouched: remove it by hand once no migration is running")
    if found.key != me.key:
        return (f"{found.path}: staging dir of another host or container ({found.host}, pid {found.pid}); "
                "left untouched: a migration there is running or crashed, remove it by hand once it is gone")
    if pid_alive(found.pid):
        return f"{found.path}: staging dir of a running migration on this host (pid {found.pid}); left untouched"
    return None


def cleanup_stale_staging(parent: str, outname: str) -> tuple[list[str], list[str]]:
    """Remove staging dirs of crashed runs of *this* host identity; returns (removed, warnings).

    Every other staging dir is reported in the warnings and never touched.
    """
    removed, warnings = [], []
    me = current_identity()
    for found in _staging_dirs(parent, outname):
        why = _staging_kept(found, me)
        if why:
            warnings.append(why)
        elif _remove_set_dir(found.path):
            removed.append(os.path.basename(found.path))
        else:
            warnings.append(f"{found.path}: staging dir of a crashed migration holds unexpected entries; left untouched")
    return removed, warnings


def _remove_set_dir(path: str) -> bool:
    """Delete a staging/old-set dir: only our file names, never following symlinks.

    Uses a directory fd so a swapped-in symlink cannot redirect the unlinks. Returns False
    (and leaves the dir) if anything unexpected is inside.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    clean = True
    try:
        for name in os.listdir(fd):
            st = os.lstat(name, dir_fd=fd)
            if classify_entry(name) == "foreign" or stat.S_ISDIR(st.st_mode):
                clean = False
                continue
            _fault_point(f"unlink {path}/{name}")
            os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)
    if not clean:
        return False
    _fault_point(f"rmdir {path}")
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


@dataclass
class _Written:
    rank: int
    name: str
    sha256: str


def _store(staging: str, name: str, data: bytes) -> bytes:
    """Write one sidecar atomically into the staging dir and read it back (I/O only)."""
    return read_sidecar_bytes(_write_file_atomic(staging, name, data))


def _checked(rank: int, name: str, payload: Any, data: bytes, back: bytes, torch_check: bool) -> _Written:
    """The bytes read back must be the bytes written and parse (without torch) to the payload.

    ``torch_check`` also loads them with real torch (``weights_only=True``).
    """
    if back != data or torch_zip.loads(back) != payload:
        raise RuntimeError(f"{name}: round-trip mismatch after write")
    if torch_check and torch_zip.load_with_torch(back) != payload:
        raise RuntimeError(f"{name}: torch.load(weights_only=True) reads a different payload")
    return _Written(rank, name, sha256_bytes(back))


def _default_workers(ranks: int) -> int:
    if ranks < PARALLEL_THRESHOLD:
        return 1
    return max(2, min(16, (os.cpu_count() or 1) * 4))


def _write_all(
    staging: str, plan: MigrationPlan, progress: Progress, workers: int | None, done: list[_Written],
    torch_check: bool = False,
) -> None:
    """Write every rank's sidecar (torch.save's format, no torch) into ``done``, in rank order.

    Stops at the first failure; ``done`` is the caller's list so a failure part-way can report
    how far it got (the ranks before the first one that failed). With many ranks a thread pool
    does only the I/O (each file's fsync overlaps the others'); encoding happens before and
    checking after, in this thread. Workers that also ran Python code fought over the GIL,
    which cost more kernel time than the fsyncs themselves.
    """
    total = len(plan.ranks)
    workers = workers or _default_workers(total)
    jobs = []
    for cursor in plan.ranks:
        payload = plan.sidecar_payload(cursor.rank)
        jobs.append((cursor.rank, sidecar_name(cursor.rank), payload, torch_zip.dumps(payload)))
    if workers <= 1:
        for rank, name, payload, data in jobs:
            done.append(_checked(rank, name, payload, data, _store(staging, name, data), torch_check))
            progress(len(done), total, f"wrote {name}")
        return
    stored: dict[int, bytes] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fvconsole-sidecar") as pool:
        futures = {pool.submit(_store, staging, job[1], job[3]): i for i, job in enumerate(jobs)}
        try:
            for future in as_completed(futures):
                stored[futures[future]] = future.result()
                progress(len(stored), total, f"wrote {jobs[futures[future]][1]}")
        except BaseException:
            for future in futures:
                future.cancel()
            wait(futures)  # the ones already running finish; count those that succeeded
            for future, i in futures.items():
                if not future.cancelled() and future.exception() is None:
                    stored[i] = future.result()
            for i, (rank, name, payload, data) in enumerate(jobs):
                if i not in stored:
                    break
                done.append(_checked(rank, name, payload, data, stored[i], torch_check))
            raise
    for i, (rank, name, payload, data) in enumerate(jobs):
        done.append(_checked(rank, name, payload, data, stored[i], torch_check))


# --------------------------------------------------------------------------- receipt


def build_receipt(plan: MigrationPlan, written: Sequence[_Written]) -> dict[str, Any]:
    """The FORMATS.md §3 receipt (all upstream fields) plus fvconsole extras."""
    from fvconsole import __version__

    by_rank = {c.rank: c for c in plan.ranks}
    sidecars = []
    for item in written:
        cursor = by_rank[item.rank]
        sidecars.append(
            {
                "rank": item.rank,
                "path": item.name,
                "sha256": item.sha256,
                "row_group_position": cursor.row_group_position,
                "row_offset": cursor.row_offset,
                "yielded_samples": cursor.yielded_samples,
            }
        )
    return {
        "schema": RECEIPT_SCHEMA,
        "created_at_utc": datetime.now(timezone.utc).isoformat(),
        "source_checkpoint": os.path.realpath(plan.checkpoint),
        "source_checkpoint_metadata_sha256": plan.checkpoint_metadata_sha256,
        "source_config": os.path.realpath(plan.config_path) if plan.config_path else None,
        "source_config_sha256": plan.config_sha256,
        "manifest": os.path.realpath(plan.manifest_path),
        "manifest_fingerprint": plan.manifest_fingerprint,
        "step": plan.step,
        "world_size": plan.world_size,
        "sp_world_size": plan.sp_world_size,
        "batch_size": plan.batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "consumed_batches_per_rank": plan.consumed_batches_per_rank,
        "yielded_samples_per_rank": plan.yielded_samples_per_rank,
        "sidecars": sidecars,
        # fvconsole extras (allowed by the format; the fields above must stay)
        "tool": "fvconsole",
        "fvconsole_version": __version__,
        "sidecar_version": SIDECAR_VERSION,
        "overrides": list(plan.request.overrides),
        "samples_per_worker": plan.samples_per_worker,
        "read_batch_size": plan.read_batch_size,
        "seed": plan.seed,
        "shuffle_row_groups": plan.shuffle_row_groups,
        "dataset_root": plan.dataset_root,
        "num_row_groups": plan.num_row_groups,
        "total_rows": plan.total_rows,
        "output_dir": os.path.abspath(plan.output_dir),
    }


def receipt_bytes(receipt: Mapping[str, Any]) -> bytes:
    return (json.dumps(receipt, indent=2, sort_keys=True) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- publish


def _publish(staging: str, out: str, parent: str, outname: str, checkpoint: str, overwrite: bool) -> str | None:
    """Move the complete staging dir to ``out`` (renames only); returns where the old set went.

    On failure the output dir is as before; if even restoring it fails, PartialFailure says
    exactly where both sets are.
    """
    state = check_output_dir(out, checkpoint, overwrite)  # re-check right before the swap
    if not state.exists:
        _fault_point(f"rename {staging} -> {out}")
        os.rename(staging, out)
        return None
    from fvconsole.core.atomic import exchange_paths

    _fault_point(f"exchange {staging} <-> {out}")
    if exchange_paths(staging, out):
        return staging  # the old set now lives under the staging name
    aside = os.path.join(parent, staging_name(outname))
    _fault_point(f"rename {out} -> {aside}")
    os.rename(out, aside)
    try:
        _fault_point(f"rename {staging} -> {out}")
        os.rename(staging, out)
    except OSError as exc:
        try:
            os.rename(aside, out)
        except OSError:
            raise PartialFailure(
                f"{out}: publishing failed ({exc.strerror}) and the previous set could not be moved back: "
                f"previous set at {aside}, new set at {staging}",
                report={"stage": "publishing", "output_dir": out, "previous_set": aside, "new_set": staging,
                        "output_dir_changed": True},
            ) from None
        raise
    return aside


# --------------------------------------------------------------------------- execute


def _precheck(plan: MigrationPlan) -> tuple[str, str, str]:
    """Everything that can refuse, before the first write. Returns (out, parent, outname)."""
    out = os.path.abspath(os.path.expanduser(plan.output_dir))
    outname = os.path.basename(out)
    if not outname or outname in (".", ".."):
        raise FvError(f"{plan.output_dir}: not a usable output dir name (--output-dir)")
    if len(os.fsencode(staging_name(outname))) > NAME_MAX:
        raise FvError(f"{plan.output_dir}: output dir name is too long for its staging dir beside it "
                      f"(at most {NAME_MAX - len(os.fsencode(staging_name('')))} bytes; --output-dir)")
    parent = os.path.dirname(out)
    check_output_dir(out, plan.checkpoint, plan.request.overwrite)
    _recheck_sources(plan)
    if not plan.ranks or len(plan.ranks) != plan.world_size:
        raise FvError(f"plan: field 'ranks' has {len(plan.ranks)} entries for world size {plan.world_size}")
    probe = parent
    while not os.path.isdir(probe):
        probe = os.path.dirname(probe)
    if not os.access(probe, os.W_OK | os.X_OK):
        raise FvError(f"{probe}: no write permission for the output dir's parent (--output-dir)")
    return out, parent, outname


def execute_plan(
    plan: MigrationPlan,
    progress: Progress | None = None,
    workers: int | None = None,
    *,
    break_lock: bool = False,
    on_warning: Callable[[str], None] | None = None,
    torch_check: bool = False,
) -> dict:
    """Write exactly ``plan``'s sidecars and receipt to ``plan.output_dir``; returns the receipt.

    Refusals (FvError) happen before anything is written, including "another migration holds
    the output dir's lock" (``break_lock``: first remove a lock whose holder is provably dead
    on this host). A failure after the first write removes the staging dir, leaves any
    previous set untouched and raises PartialFailure; so does a published set that does not
    read back as written. ``on_warning`` receives what the operator should know (staging
    dirs of other hosts left alone, a stale lock removed). ``torch_check``: each staged sidecar
    is also read back with real torch before publishing.
    """
    progress = progress or no_progress
    warn = on_warning or (lambda message: None)
    _reset_fault_counter()
    out, parent, outname = _precheck(plan)
    if not os.path.isdir(parent):  # the lock lives in the parent
        try:
            _fault_point(f"makedirs {parent}")
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise _unchanged_failure(out, "creating the output dir's parent", exc, None, True, 0,
                                     len(plan.ranks)) from None
    lock = migration_lock(out, step=lambda label: _fault_point(f"lock: {label}"))
    for note in lock.acquire(break_stale=break_lock):
        warn(note)
    try:
        return _execute_locked(plan, out, parent, outname, progress, workers, warn, torch_check)
    finally:
        problem = lock.release()
        if problem:
            warn(problem)


def _execute_locked(
    plan: MigrationPlan, out: str, parent: str, outname: str, progress: Progress,
    workers: int | None, warn: Callable[[str], None], torch_check: bool,
) -> dict:
    """Stage, publish and re-verify, holding the output dir's lock."""
    check_output_dir(out, plan.checkpoint, plan.request.overwrite)  # as it is now that we hold the lock
    staging = os.path.join(parent, staging_name(outname))
    written: list[_Written] = []
    stage = "removing stale staging dirs"
    try:
        for message in cleanup_stale_staging(parent, outname)[1]:
            warn(message)
        stage = "creating the staging dir"
        _fault_point(f"mkdir {staging}")
        os.mkdir(staging, 0o755)
        staged = os.lstat(staging)
        stage = "writing sidecars"
        _write_all(staging, plan, progress, workers, written, torch_check)
        _fsync_dir(staging, f"fsync {staging}")
        stage = "writing the receipt"
        receipt = build_receipt(plan, written)
        data = receipt_bytes(receipt)
        _write_file_atomic(staging, RECEIPT_NAME, data)
        _fsync_dir(staging, f"fsync {staging}")
        stage = "publishing"
        old = _publish(staging, out, parent, outname, plan.checkpoint, plan.request.overwrite)
    except PartialFailure:
        raise
    except BaseException as exc:
        removed = _remove_set_dir(staging) if os.path.lexists(staging) else True
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _unchanged_failure(out, stage, exc, staging, removed, len(written), len(plan.ranks)) from None
    expected = {w.name: w.sha256 for w in written}
    expected[RECEIPT_NAME] = sha256_bytes(data)
    _after_publish(out, parent, old, (staged.st_dev, staged.st_ino), expected)
    progress(len(plan.ranks), len(plan.ranks), f"published {out}")
    return receipt


def _unchanged_failure(
    out: str, stage: str, exc: BaseException, staging: str | None, removed: bool, written: int, total: int
) -> PartialFailure:
    """The exit-3 error for a failure before the output dir was touched."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    left = "" if staging is None else f"; staging dir {'removed' if removed else 'left at ' + staging}"
    return PartialFailure(
        f"{out}: migration failed while {stage}: {reason}{left}; the output dir was not changed",
        report={
            "stage": stage,
            "output_dir": out,
            "sidecars_written": written,
            "sidecars_total": total,
            "staging_dir": staging,
            "staging_removed": removed,
            "output_dir_changed": False,
        },
    )


def _after_publish(
    out: str, parent: str, old: str | None, published: tuple[int, int], expected: Mapping[str, str]
) -> None:
    """Make the publishing rename durable, re-verify the set, then delete the previous set (if any).

    The new set is already visible here, so a failure is reported as exit 3 naming what is
    wrong and what is left, never by undoing the publish. A set that does not read back as
    written keeps the previous set where it is (the operator may want it back).
    """
    try:
        _fsync_dir(parent, f"fsync {parent}")
    except OSError as exc:
        raise PartialFailure(
            f"{out}: new set published but syncing {parent} failed ({exc.strerror}); re-run verify",
            report={"stage": "syncing the parent dir", "output_dir": out, "output_dir_changed": True,
                    "previous_set": old},
        ) from None
    problems = verify_published(out, published, expected)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        kept = f"; the previous set is kept at {old} (until the next migrate on this host)" if old else ""
        raise PartialFailure(
            f"{out}: the published set does not read back as written: {problems[0]}{more}{kept}; "
            "do not resume from it (re-run with --overwrite)",
            report={"stage": "verifying the published set", "output_dir": out, "output_dir_changed": True,
                    "problems": problems, "previous_set": old},
        )
    if old is not None and _remove_set_dir(old):  # a leftover is cleaned by the next execute
        with contextlib.suppress(OSError):
            _fsync_dir(parent, f"fsync {parent}")


def verify_published(out: str, published: tuple[int, int], expected: Mapping[str, str]) -> list[str]:
    """Problems with the set at ``out``: not the dir published, extra/missing entries, other bytes.

    ``published`` is the (st_dev, st_ino) of the staging dir that was renamed to ``out``;
    ``expected`` maps every file name of the set to the sha256 of the bytes written.
    Reads through a directory fd without following symlinks, each file at most
    MAX_PUBLISHED_BYTES.
    """
    try:
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        return [f"{out}: cannot open the published dir ({exc.strerror})"]
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != published:
            return [f"{out}: is no longer the directory that was published (replaced after publishing)"]
        names = set(os.listdir(fd))
        problems = [f"{name}: unexpected entry in the published set" for name in sorted(names - set(expected))]
        for name in sorted(expected):
            if name not in names:
                problems.append(f"{name}: missing from the published set")
                continue
            digest = _sha256_at(fd, name)
            if digest != expected[name]:
                problems.append(f"{name}: sha256 {digest[:12]} is not what was written ({expected[name][:12]})")
        return problems
    finally:
        os.close(fd)


def _sha256_at(dir_fd: int, name: str) -> str:
    """sha256 of regular file ``name`` in ``dir_fd`` (bounded; a description if unreadable)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        return f"<unreadable: {exc.strerror}>"
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "<not a regular file>"
        data = handle.read(MAX_PUBLISHED_BYTES + 1)
    if len(data) > MAX_PUBLISHED_BYTES:
        return f"<larger than {MAX_PUBLISHED_BYTES} bytes>"
    return sha256_bytes(data)


# --------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of checking a sidecar dir against a freshly recomputed plan."""

    ok: bool
    problems: tuple[str, ...]
    ranks: tuple[dict, ...]
    warnings: tuple[str, ...] = ()
    sidecar_dir: str = ""
    step: int | None = None
    world_size: int | None = None

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "problems": list(self.problems),
            "ranks": [dict(r) for r in self.ranks],
            "warnings": list(self.warnings),
            "sidecar_dir": self.sidecar_dir,
            "step": self.step,
            "world_size": self.world_size,
        }


def diff_payload(actual: Any, expected: Any, prefix: str = "") -> list[str]:
    """Field-by-field differences, named by dotted path (``state.row_offset: 3 != 5``)."""
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        out = []
        for key in expected:
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in actual:
                out.append(f"{path}: missing")
            else:
                out.extend(diff_payload(actual[key], expected[key], path))
        for key in actual:
            if key not in expected:
                out.append(f"{prefix + '.' if prefix else ''}{key}: unexpected field")
        return out
    if type(actual) is not type(expected) or actual != expected:
        return [f"{prefix or 'payload'}: sidecar has {_short_repr(actual)}, expected {_short_repr(expected)}"]
    return []


#: A sidecar is ~1.3 KB; anything near this is not one (and is not read into memory).
MAX_SIDECAR_BYTES = 16 * 2**20


def _short_repr(value: Any, limit: int = 120) -> str:
    """repr for a problem line: a damaged sidecar may hold a million-item list."""
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 20:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def read_sidecar_bytes(path: str) -> bytes:
    """A sidecar's bytes: regular files only (a FIFO cannot hang us), at most MAX_SIDECAR_BYTES."""
    return read_regular_file(path, "sidecar", MAX_SIDECAR_BYTES)


def load_sidecar(path: str) -> Any:
    """A sidecar's payload read without torch; the inert reader runs nothing from the file."""
    return torch_zip.loads(read_sidecar_bytes(path))


def _checkpoint_step(checkpoint: str) -> int:
    """The step FastVideo compares with: parsed from the directory name, else metadata.json."""
    match = re.match(r"^checkpoint-(\d+)$", os.path.basename(os.path.abspath(checkpoint)))
    if match:
        return int(match.group(1))
    from fvconsole.core.checkpoints import read_metadata

    step = read_metadata(checkpoint).get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        raise FvError(f"{checkpoint}/metadata.json: field 'step' must be an integer (got {step!r})")
    return step


def recompute_plan(
    config_path: str, checkpoint: str, overrides: Sequence[str] = ()
) -> tuple[MigrationPlan | None, list[str], list[str]]:
    """Plan the migration again from config + checkpoint; returns (plan, problems, warnings).

    The request targets a path that cannot exist so that refusals about the output dir
    (existing sidecars, overwrite) never block verification.
    """
    from fvconsole.core.migration import MigrationRequest, preview_migration
    from fvconsole.core.runconfig import load_run_config

    cfg = load_run_config(config_path, overrides)
    step = _checkpoint_step(checkpoint)
    world = _int_field(cfg, config_path, "training.distributed.num_gpus")
    accum = _int_field(cfg, config_path, "training.loop.gradient_accumulation_steps")
    dummy = os.path.join(tempfile.gettempdir(), f".fvconsole-verify-{os.getpid()}-{secrets.token_hex(6)}")
    request = MigrationRequest(
        config_path=config_path,
        checkpoint=checkpoint,
        output_dir=dummy,
        expected_step=step,
        expected_world_size=world,
        consumed_batches_per_rank=step * accum,
        overrides=tuple(overrides),
        overwrite=True,
        skip_source_check=True,
    )
    preview = preview_migration(request)
    problems = [f"cannot recompute the plan: {r.message}" for r in preview.refusals]
    return preview.plan, problems, list(preview.warnings)


def _int_field(cfg: Any, path: str, dotted: str) -> int:
    value = cfg.get(dotted, None)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FvError(f"{path}: field '{dotted}' must be an integer (got {value!r})")
    return value


def verify_sidecars(
    config_path: str,
    checkpoint: str,
    sidecar_dir: str,
    *,
    overrides: Sequence[str] = (),
    deep: bool = False,
    progress: Progress | None = None,
    torch_check: bool = False,
) -> VerifyResult:
    """Check every sidecar and the receipt in ``sidecar_dir`` against a recomputed plan.

    Sidecars are read without torch; ``torch_check`` also loads each with real torch.
    """
    progress = progress or no_progress
    plan, problems, warnings = recompute_plan(config_path, checkpoint, overrides)
    if plan is None:
        return VerifyResult(False, tuple(problems), (), tuple(warnings), sidecar_dir)
    if not os.path.isdir(sidecar_dir):
        problems.append(f"{sidecar_dir}: sidecar dir does not exist")
        return VerifyResult(False, tuple(problems), (), tuple(warnings), sidecar_dir, plan.step, plan.world_size)
    listing = _list_dir(sidecar_dir, plan.world_size, problems, warnings)
    receipt_rows = _check_receipt(sidecar_dir, plan, problems)
    rows = []
    for cursor in plan.ranks:
        rows.append(_verify_rank(sidecar_dir, plan, cursor, listing, receipt_rows, torch_check))
        progress(len(rows), plan.world_size, f"checked rank {cursor.rank}")
    if deep:
        add_next_sample_ids(plan, rows, problems)
    for row in rows:
        problems.extend(f"rank {row['rank']}: {p}" for p in row["problems"])
    return VerifyResult(
        not problems, tuple(problems), tuple(rows), tuple(warnings), sidecar_dir, plan.step, plan.world_size
    )


def _list_dir(directory: str, world: int, problems: list[str], warnings: list[str]) -> set[str]:
    """Names of regular sidecar files present; extra/foreign/temp files become problems."""
    present = set()
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            kind = classify_entry(entry.name)
            if kind == "sidecar":
                rank = int(SIDECAR_RE.match(entry.name).group(1))  # type: ignore[union-attr]
                if entry.is_symlink():
                    problems.append(f"{entry.name}: is a symlink (sidecars must be regular files)")
                elif not entry.is_file(follow_symlinks=False):
                    # A FIFO would block every later open; a device would never end.
                    kind_text = file_kind(entry.stat(follow_symlinks=False).st_mode)
                    problems.append(f"{entry.name}: is {kind_text} (sidecars must be regular files)")
                elif rank >= world or entry.name != sidecar_name(rank):
                    problems.append(f"{entry.name}: extra sidecar (world size is {world})")
                else:
                    present.add(entry.name)
            elif kind == "temp":
                problems.append(f"{entry.name}: leftover temp file from an interrupted write")
            elif kind == "foreign":
                problems.append(f"{entry.name}: foreign file in the sidecar dir")
    parent = os.path.dirname(os.path.abspath(directory))
    pattern = staging_pattern(os.path.basename(os.path.abspath(directory)))
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            if pattern.match(entry.name):
                warnings.append(f"{os.path.join(parent, entry.name)}: staging leftover (a migration is running or crashed)")
    return present


def _check_receipt(directory: str, plan: MigrationPlan, problems: list[str]) -> dict[int, dict]:
    """Receipt presence, schema and headline fields; returns its sidecar rows by rank."""
    path = os.path.join(directory, RECEIPT_NAME)
    try:
        # Bounded: regular files only (a FIFO or /dev/zero symlink is refused), size and depth capped.
        receipt = load_json(path, "receipt", MAX_RECEIPT_BYTES)
    except FileNotFoundError:
        problems.append(f"{RECEIPT_NAME}: missing")
        return {}
    except OSError as exc:
        problems.append(f"{RECEIPT_NAME}: unreadable ({exc.strerror or exc})")
        return {}
    except FvError as exc:
        problems.append(str(exc))
        return {}
    if not isinstance(receipt, dict):
        problems.append(f"{RECEIPT_NAME}: not a JSON object")
        return {}
    expect = {
        "schema": RECEIPT_SCHEMA,
        "step": plan.step,
        "world_size": plan.world_size,
        "sp_world_size": plan.sp_world_size,
        "manifest_fingerprint": plan.manifest_fingerprint,
        "source_checkpoint_metadata_sha256": plan.checkpoint_metadata_sha256,
        "yielded_samples_per_rank": plan.yielded_samples_per_rank,
    }
    for key, want in expect.items():
        if receipt.get(key) != want:
            problems.append(f"{RECEIPT_NAME}: field '{key}' is {short_repr(receipt.get(key))}, expected {want!r}")
    rows: dict[int, dict] = {}
    sidecars = receipt.get("sidecars")
    if not isinstance(sidecars, list):
        problems.append(f"{RECEIPT_NAME}: field 'sidecars' missing or not a list")
        return rows
    for item in sidecars:
        if isinstance(item, dict) and isinstance(item.get("rank"), int):
            rows[item["rank"]] = item
        else:
            problems.append(f"{RECEIPT_NAME}: field 'sidecars' has a malformed entry")
    extra = sorted(set(rows) - {c.rank for c in plan.ranks})
    if extra:
        shown = ", ".join(short_repr(rank) for rank in extra[:5])
        problems.append(f"{RECEIPT_NAME}: field 'sidecars' lists ranks outside the world size: [{shown}]")
    return rows


def _verify_rank(
    directory: str, plan: MigrationPlan, cursor: Any, present: set[str], receipt_rows: dict[int, dict],
    torch_check: bool = False,
) -> dict:
    """One rank's row: file present, loads safely, payload equal, sha256 as in the receipt.

    The file is read once (bounded, regular files only); its hash and payload come from
    those bytes. ``torch_check`` also loads them with real torch (``weights_only=True``).
    """
    name = sidecar_name(cursor.rank)
    row: dict[str, Any] = {
        "rank": cursor.rank,
        "ok": False,
        "problems": [],
        "row_group_position": cursor.row_group_position,
        "row_offset": cursor.row_offset,
        "yielded_samples": cursor.yielded_samples,
        "next_sample_index": cursor.next_sample_index,
    }
    problems: list[str] = row["problems"]
    entry = receipt_rows.get(cursor.rank)
    if entry is None and receipt_rows:
        problems.append(f"{RECEIPT_NAME}: no entry for rank {cursor.rank}")
    if name not in present:
        problems.append(f"{name}: missing")
        return row
    path = os.path.join(directory, name)
    try:
        data = read_sidecar_bytes(path)
    except (OSError, FvError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).removeprefix(f"{path}: ")
        problems.append(f"{name}: unreadable ({reason})")
        return row
    digest = sha256_bytes(data)
    if entry is not None:
        if entry.get("sha256") != digest:
            problems.append(f"{name}: sha256 {digest[:12]} does not match the receipt ({str(entry.get('sha256'))[:12]})")
        if entry.get("path") not in (name, path):
            problems.append(f"{RECEIPT_NAME}: rank {cursor.rank} path is {entry.get('path')!r}, expected {name!r}")
        for key in ("row_group_position", "row_offset", "yielded_samples"):
            if entry.get(key) != getattr(cursor, key):
                problems.append(f"{RECEIPT_NAME}: rank {cursor.rank} field '{key}' is {entry.get(key)!r}, expected {getattr(cursor, key)!r}")
    try:
        payload = torch_zip.loads(data)
    except torch_zip.TorchFileError as exc:
        problems.append(f"{name}: refused: {exc}")
        return row
    if torch_check:
        problems.extend(f"{name}: {p}" for p in _torch_check(data, payload))
    problems.extend(f"{name}: {d}" for d in diff_payload(payload, plan.sidecar_payload(cursor.rank)))
    row["ok"] = not problems
    return row


def _torch_check(data: bytes, payload: Any) -> list[str]:
    """What real torch (``weights_only=True``) reads differently from the torch-free reader."""
    try:
        loaded = torch_zip.load_with_torch(data)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a verification problem
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [f"refused by torch.load(weights_only=True): {first[:200]}"]
    if loaded != payload:
        return ["torch.load(weights_only=True) reads a different payload than the torch-free reader"]
    return []


def add_next_sample_ids(plan: MigrationPlan, rows: list[dict], problems: list[str]) -> None:
    """Add ``next_sample_id`` to each ``{"rank": r, ...}`` row (verify --deep, the console).

    Reads only the row groups ranks read next, each distinct file once; read problems
    (including a Parquet file whose row groups disagree with the manifest, which would make
    every id wrong) are appended to ``problems`` rather than raised.
    """
    from fvconsole.core.manifest import load_manifest

    manifest = load_manifest(plan.manifest_path)
    if manifest.fingerprint != plan.manifest_fingerprint:
        problems.append(f"deep check: {manifest.path}: field 'fingerprint' changed since the plan was made")
        for row in rows:
            row["next_sample_id"] = None
        return
    by_rank = {c.rank: c for c in plan.ranks}
    wanted = sorted({c.next_row_group for c in plan.ranks if c.next_row_group is not None and c.next_row_group >= 0})
    by_file: dict[int, list[int]] = {}
    for index in wanted:
        by_file.setdefault(manifest.file_index[index], []).append(index)
    # Every row group the manifest lists for those files, in one pass (not one per file).
    listed: dict[int, list[int]] = {k: [] for k in by_file}
    for i, k in enumerate(manifest.file_index):
        if k in listed:
            listed[k].append(i)
    columns: dict[int, Any] = {}
    failed: dict[int, str] = {}
    for file_k, indices in by_file.items():
        try:
            columns.update(_read_id_columns(manifest, file_k, indices, listed[file_k]))
        except Exception as exc:  # noqa: BLE001 - dataset read problems are reported, not raised
            reason = str(exc) if isinstance(exc, FvError) else f"{type(exc).__name__}: {exc}"
            message = f"deep check: {' '.join(reason.split())[:300]}"
            failed.update(dict.fromkeys(indices, message))
            if message not in problems:
                problems.append(message)
    for row in rows:
        cursor = by_rank[row["rank"]]
        index = cursor.next_row_group
        row["next_sample_id"] = None
        if index is None or index < 0 or index in failed:
            continue
        offset = cursor.next_sample_index - manifest.sample_starts[index]
        row["next_sample_id"] = _plain(columns[index][offset].as_py())


def _plain(value: Any) -> Any:
    """A JSON-ready id: scalars as they are, anything else (bytes, structs) as a short repr."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    return short_repr(value)


#: An id column chunk is a few dozen bytes per sample; one far larger is not decompressed.
MAX_ID_COLUMN_BYTES = 256 * 2**20


def _read_id_columns(manifest: Any, file_k: int, indices: Sequence[int], listed: Sequence[int]) -> dict[int, Any]:
    """The ``id`` column (or the first one) of manifest row groups ``indices``, all in file ``file_k``.

    The file is opened by us (non-blocking, regular files only: a FIFO or device in the
    dataset cannot hang or flood the read) and the open file handed to pyarrow. Its footer
    must agree with the manifest on every row group the manifest lists for this file
    (``listed``, manifest indices): a
    row group shorter or longer than the manifest says shifts every later sample, so the
    ids would be wrong. Raises FvError naming the file and row group.
    """
    import pyarrow.parquet as pq

    path = os.path.join(manifest.dataset_root, manifest.file_names[file_k])
    out: dict[int, Any] = {}
    with open_regular(path, "Parquet file") as handle:
        pf = pq.ParquetFile(handle)
        meta = pf.metadata
        for i in listed:
            _check_row_group(path, meta, i, manifest.row_group_ids[i], manifest.rows[i])
        names = pf.schema_arrow.names
        if not names:
            raise FvError(f"{path}: Parquet file has no columns")
        column = "id" if "id" in names else names[0]
        for i in indices:
            group = manifest.row_group_ids[i]
            _check_column_size(path, meta.row_group(group), group, column)
            table = pf.read_row_group(group, columns=[column])
            if table.num_rows != manifest.rows[i]:
                raise FvError(
                    f"{path}: row group {group} read {table.num_rows} rows but the manifest says "
                    f"{manifest.rows[i]} (row_groups[{i}])"
                )
            out[i] = table.column(0)
    return out


def _check_row_group(path: str, meta: Any, index: int, group: int, rows: int) -> None:
    """The footer's row count of ``group`` equals the manifest's (row_groups[index])."""
    if not 0 <= group < meta.num_row_groups:
        raise FvError(
            f"{path}: row group {group} does not exist (the file has {meta.num_row_groups}; "
            f"manifest row_groups[{index}])"
        )
    actual = meta.row_group(group).num_rows
    if actual != rows:
        raise FvError(
            f"{path}: row group {group} has {actual} rows but the manifest says {rows} (row_groups[{index}]); "
            "the dataset changed since the manifest was built"
        )


def _check_column_size(path: str, group_meta: Any, group: int, column: str) -> None:
    """Refuse to decompress an id column chunk the footer says is absurdly large."""
    size = 0
    for j in range(group_meta.num_columns):
        chunk = group_meta.column(j)
        if chunk.path_in_schema == column or chunk.path_in_schema.startswith(column + "."):
            size += max(chunk.total_uncompressed_size, chunk.total_compressed_size)
    if size > MAX_ID_COLUMN_BYTES:
        raise FvError(f"{path}: row group {group} column {column!r} is {size} bytes (more than {MAX_ID_COLUMN_BYTES})")
