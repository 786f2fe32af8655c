"""Execute a migration plan: write rank-local sidecars and the receipt, then publish them.

Why this shape: FastVideo reads ``$FASTVIDEO_DATALOADER_STATE_DIR/dataloader_state_rank<r>.pt``
for every rank, so an output dir holding half a set (or a new receipt beside old sidecars)
would resume a run from the wrong samples. Everything is therefore staged in a sibling
directory on the same filesystem (:mod:`.output_dir` names it), each file written atomically
and verified, the receipt written last, and only then published (:mod:`.publish`). The source
checkpoint is only read (a reader's record says so); executions on one output dir take turns
through its lock (the runner takes both: :mod:`.locked`); every file-system step, the lock's
included, first calls the test-only fault hook (:mod:`.faults`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fvconsole.core.formats import torch_zip
from fvconsole.core.formats.sidecar_files import RECEIPT_NAME, read_sidecar_bytes, sha256_bytes
from fvconsole.core.migration import faults
from fvconsole.core.migration.failure import MigrationFailed, MigrationFailure
from fvconsole.core.migration.output_dir import (
    check_destination,
    free_space,
    migration_lock,
    resolve,
    room_rule,
    staging_dirs,
    staging_kept,
    staging_name,
)
from fvconsole.core.migration.publish import after_publish, fsync_dir, publish, remove_set_dir
from fvconsole.core.migration.receipt import WrittenSidecar, build_receipt, receipt_bytes, set_files
from fvconsole.core.shared import durable, interrupts
from fvconsole.core.shared.atomic import atomic_write_bytes
from fvconsole.core.shared.errors import FvError, PartialFailure
from fvconsole.core.shared.host import current_identity
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.locks import FileLock
from fvconsole.core.shared.operation import Stop
from fvconsole.core.shared.progress import Progress
from fvconsole.core.shared.reasons import Reason, invalid, reason
from fvconsole.core.shared.safe_read import sha256_regular_file

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration.model import MigrationPlan

#: Below this many ranks a thread pool costs more than it saves.
PARALLEL_THRESHOLD = 16


def _write_file_atomic(directory: str, name: str, data: bytes, sync_file: bool = True) -> str:
    """``core.shared.atomic`` write of one file of the set, each step through the fault hook; returns its path.

    The caller makes the directory durable once for many files: an fsync of the dir, or
    (``sync_file=False``) one syncfs covering every file's data too (:mod:`fvconsole.core.shared.durable`).
    """
    return atomic_write_bytes(os.path.join(directory, name), data, sync_dir=False, sync_file=sync_file,
                              step=faults.point)


def _recheck_source_still_there(plan: MigrationPlan) -> None:
    """Right before publishing: the source checkpoint is still the one planned (not pruned meanwhile)."""
    if not (os.path.isdir(plan.checkpoint) and os.path.isdir(os.path.join(plan.checkpoint, "dcp"))):
        raise FvError.of(reason("recheck.source_gone", "checkpoint", path=plan.checkpoint))
    _recheck_metadata(plan)


def _recheck_metadata(plan: MigrationPlan) -> None:
    meta = os.path.join(plan.checkpoint, "metadata.json")
    meta_sha = _sha256_now(meta, "metadata.json", "recheck.metadata_unreadable")
    if meta_sha != plan.checkpoint_metadata_sha256:
        raise FvError.of(reason("recheck.metadata_changed", "metadata.json", path=meta, now=meta_sha[:12],
                                planned=plan.checkpoint_metadata_sha256[:12]))


def _recheck_sources(plan: MigrationPlan) -> None:
    """The checkpoint metadata, config and manifest must still be what the plan was made from.

    Each refusal is a :class:`Reason` about the field the preview would name (``metadata.json``,
    ``config``, ``manifest``), so a front end words it as it words the preview's refusals.
    """
    _recheck_metadata(plan)
    if plan.config_path and plan.config_sha256:
        cfg_sha = _sha256_now(plan.config_path, "config", "recheck.config_unreadable")
        if cfg_sha != plan.config_sha256:
            raise FvError.of(reason("recheck.config_changed", "config", path=plan.config_path))
    if plan.manifest_sha256 and _manifest_bytes_unchanged(plan.manifest_path, plan.manifest_sha256):
        return
    fingerprint = _manifest_fingerprint_now(plan.manifest_path)
    if fingerprint != plan.manifest_fingerprint:
        raise FvError.of(reason("recheck.manifest_changed", "manifest", path=plan.manifest_path,
                                now=fingerprint[:12], planned=plan.manifest_fingerprint[:12]))


def _sha256_now(path: str, field: str, unreadable: str) -> str:
    """sha256 of the regular file ``path`` now; a refusal about ``field`` when it cannot be read."""
    try:
        return sha256_regular_file(path)
    except OSError as exc:
        raise FvError.of(reason(unreadable, field, path=path, why=exc.strerror or exc)) from None
    except FvError as exc:  # no longer a regular file, or grown past the cap
        raise FvError.of(exc.reason or invalid(field, exc.message)) from None


def _manifest_bytes_unchanged(path: str, planned_sha256: str) -> bool:
    """Whether the manifest holds the very bytes the plan parsed (and checked the fingerprint of).

    The same bytes parse to the same row groups, so their fingerprint is still the plan's:
    no need to parse and hash a manifest of up to a million row groups again. Any
    difference (or a read error) is judged by :func:`_manifest_fingerprint_now`.
    """
    from fvconsole.core.formats.manifest import manifest_bytes_sha256

    try:
        return manifest_bytes_sha256(path) == planned_sha256
    except OSError:
        return False


def _manifest_fingerprint_now(path: str) -> str:
    """The manifest's fingerprint now; recomputed from the row groups when the stored one agrees.

    A stored field that no longer matches its own row groups is reported as that mismatch.
    """
    from fvconsole.core.formats.manifest import compute_fingerprint, load_manifest

    try:
        manifest = load_manifest(path)
    except FvError as exc:  # the preview's refusal of an unusable manifest, under the same field
        raise FvError.of(exc.reason or invalid("training.data.streaming_manifest_path", exc.message)) from None
    stored = str(manifest.fingerprint)
    recomputed = compute_fingerprint(manifest.raw["row_groups"])
    return stored if recomputed == stored else recomputed


def cleanup_stale_staging(parent: str, outname: str) -> tuple[list[str], list[Reason]]:
    """Remove staging dirs of crashed runs of *this* host identity; returns (removed, warnings).

    Every other staging dir is reported in the warnings and never touched.
    """
    removed: list[str] = []
    warnings: list[Reason] = []
    me = current_identity()
    for found in staging_dirs(parent, outname):
        why = staging_kept(found, me)
        if why:
            warnings.append(why)
        elif remove_set_dir(found.path):
            removed.append(os.path.basename(found.path))
        else:
            warnings.append(reason("staging.unexpected", "output_dir", path=found.path))
    return removed, warnings


def _store(staging: str, name: str, data: bytes, sync_file: bool) -> bytes:
    """Write one sidecar atomically into the staging dir and read it back (I/O only)."""
    return read_sidecar_bytes(_write_file_atomic(staging, name, data, sync_file))


def _checked(rank: int, name: str, payload: Any, data: bytes, back: bytes, torch_check: bool) -> WrittenSidecar:
    """The bytes read back must be the bytes written and parse (without torch) to the payload.

    ``torch_check`` also loads them with real torch (``weights_only=True``).
    """
    if back != data or torch_zip.loads(back) != payload:
        raise RuntimeError(f"{name}: round-trip mismatch after write")
    if torch_check and torch_zip.load_with_torch(back) != payload:
        raise RuntimeError(f"{name}: torch.load(weights_only=True) reads a different payload")
    return WrittenSidecar(rank, name, sha256_bytes(back))


def _default_workers(ranks: int, per_file_fsync: bool) -> int:
    """Threads only overlap fsyncs: without one per file, a pool just fights over the GIL."""
    if ranks < PARALLEL_THRESHOLD or not per_file_fsync:
        return 1
    return max(2, min(16, (os.cpu_count() or 1) * 4))


def _write_all(
    staging: str, plan: MigrationPlan, jobs: Sequence[tuple[int, str, Any, bytes]], progress: Progress,
    workers: int | None, done: list[WrittenSidecar], torch_check: bool = False, per_file_fsync: bool = True,
) -> None:
    """Write every rank's sidecar (torch.save's format, no torch) into ``done``, in rank order.

    Stops at the first failure; ``done`` is the caller's list so a failure part-way can report
    how far it got (the ranks before the first one that failed). With many ranks and an fsync
    per file a thread pool does only the I/O (each file's fsync overlaps the others');
    encoding happens before and checking after, in this thread. Workers that also ran Python
    code fought over the GIL, which cost more kernel time than the fsyncs themselves. Without
    per-file fsyncs (``per_file_fsync=False``: the caller syncs the filesystem once) there is
    nothing to overlap and the files are written in this thread.
    """
    total = len(plan.ranks)
    workers = workers or _default_workers(total, per_file_fsync)
    if workers <= 1:
        for rank, name, payload, data in jobs:
            done.append(_checked(rank, name, payload, data, _store(staging, name, data, per_file_fsync), torch_check))
            progress(len(done), total, f"wrote {name}")
        return
    # Imported here: only per-file fsyncs have anything to overlap.
    from concurrent.futures import ThreadPoolExecutor, as_completed, wait

    stored: dict[int, bytes] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fvconsole-sidecar") as pool:
        futures = {pool.submit(_store, staging, job[1], job[3], per_file_fsync): i for i, job in enumerate(jobs)}
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


def _precheck(plan: MigrationPlan) -> tuple[str, str, str]:
    """Everything that can refuse, before the first write (the lock file included). Returns (out, parent, outname).

    The room the set needs is judged by the rule the dry run applies (:func:`room_rule`), so a
    full filesystem is refused here as there.
    """
    out = resolve(plan.output_dir)
    check_destination(out, plan.checkpoint, plan.dataset_root, plan.request.overwrite)
    _recheck_sources(plan)
    if not plan.ranks or len(plan.ranks) != plan.world_size:
        raise FvError.of(reason("recheck.plan_ranks", "plan", count=len(plan.ranks),
                                entries=plural(len(plan.ranks), "entry", "entries"), world_size=plan.world_size))
    room = room_rule(out, set_files(plan), free_space(out))
    if room is not None:
        raise FvError.of(room)
    return out, os.path.dirname(out), os.path.basename(out)


@dataclass(frozen=True)
class MigrationResult:
    """What an execution wrote: the plan, the receipt as written, and what the operator was told."""

    plan: MigrationPlan
    receipt: Mapping[str, Any]
    output_dir: str
    #: The plan's warnings, then what execution found (staging dirs left alone, a stale lock removed).
    notes: tuple[Reason, ...] = ()
    #: The lock of a dead (or, with break_lock, an unjudgeable) holder this run took over: journalled.
    lock_notes: tuple[Reason, ...] = ()

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warnings in the command line's words."""
        return tuple(n.cli for n in self.notes)

    @property
    def found_by_execution(self) -> tuple[Reason, ...]:
        """The warnings execution found that the plan did not carry (what ``on_warning`` was given)."""
        return self.notes[len(self.plan.notes) + len(self.plan.output_dir_notes):]

    @property
    def receipt_path(self) -> str:
        return os.path.join(self.output_dir, RECEIPT_NAME)

    @property
    def sidecars(self) -> int:
        return len(self.receipt["sidecars"])

    def to_json(self) -> dict:
        """``fvconsole migrate --yes --json``'s object."""
        return {
            "executed": True,
            "plan": self.plan.to_json(),
            "mismatches": [m.to_json() for m in self.plan.mismatches],
            "receipt": dict(self.receipt),
            "warnings": list(self.warnings),
            "receipt_path": self.receipt_path,
            "output_dir": self.output_dir,
        }


def prepare_output(plan: MigrationPlan, *, torch_check: bool = False) -> tuple[str, str, str]:
    """Everything before the output dir's lock: the refusals, then the parent the lock lives in.

    Refusals (FvError, each carrying its ``reason``: the preview's codes for the output dir
    rules) happen before anything is written, the lock file included; ``torch_check`` needs
    torch. A parent that cannot be created is a failure (exit 3). Returns (out, parent, outname).
    """
    if torch_check:  # refused before anything is written
        torch_zip.require_torch()
    faults.reset()
    out, parent, outname = _precheck(plan)
    if not os.path.isdir(parent):  # the lock lives in the parent
        try:
            faults.point(f"makedirs {parent}")
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise _unchanged_failure(out, "creating the output dir's parent", exc, None, True, 0,
                                     len(plan.ranks)) from None
    return out, parent, outname


def output_lock(out: str) -> FileLock:
    """The output dir's lock, each of its file-system steps through the fault hook."""
    return migration_lock(out, step=lambda label: faults.point(f"lock: {label}"))


def completed(sidecars: int, out: str) -> str:
    """``the migration completed: N sidecars and the receipt in OUT``: what stands once the set is published."""
    return f"the migration completed: {plural(sidecars, 'sidecar')} and the receipt in {out}"


def write_set(
    plan: MigrationPlan, out: str, parent: str, outname: str, progress: Progress, workers: int | None,
    warn: Callable[[Reason], None], torch_check: bool, on_stop: Callable[[Stop], None],
) -> dict:
    """Stage, publish and re-verify, holding the output dir's lock (checked under it first); the receipt.

    Interrupted (Ctrl-C, SIGTERM, SIGHUP) while staging: the staging dir is removed and the
    output dir is unchanged. A signal once publishing has begun waits until the set is
    published, synced and verified (:func:`fvconsole.core.shared.interrupts.deferred`), then stops
    the run with the published set reported. Either way ``on_stop`` is told first.
    """
    check_destination(out, plan.checkpoint, plan.dataset_root, plan.request.overwrite)  # now that we hold the lock
    jobs = plan.encoded_sidecars
    staging = os.path.join(parent, staging_name(outname))
    written: list[WrittenSidecar] = []
    links = dict(plan.links)
    stage = "removing stale staging dirs"

    def cleanup_and_fail(exc: BaseException) -> BaseException:
        with interrupts.deferred():  # a second signal must not leave the staging dir half removed
            removed = remove_set_dir(staging, links) if os.path.lexists(staging) else True
        if isinstance(exc, KeyboardInterrupt):
            failure = MigrationFailure.unchanged(out, stage, staging, removed, len(written), len(plan.ranks))
            left = "staging dir removed" if removed else f"staging dir left at {staging}"
            stop = interrupts.as_interrupted(exc)
            on_stop(Stop(stop.signum, failure, note=f"stopped while {stage}; {left}; {out} was not changed"))
            return stop
        return _unchanged_failure(out, stage, exc, staging, removed, len(written), len(plan.ranks))

    try:
        for why in cleanup_stale_staging(parent, outname)[1]:
            warn(why)
        stage = "creating the staging dir"
        faults.point(f"mkdir {staging}")
        os.mkdir(staging, 0o755)
        # Opened before the first write: syncfs reports writeback errors since this open.
        staging_fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            staged = os.fstat(staging_fd)
            durability = durable.choose(staging_fd)
            stage = "writing sidecars"
            _write_all(staging, plan, jobs, progress, workers, written, torch_check, durability.per_file_fsync)
            stage = "linking the source checkpoint's entries"
            _link_all(staging, links)
            stage = "making the sidecars durable"
            _make_durable(staging, staging_fd, durability, [w.name for w in written])
        finally:
            os.close(staging_fd)
        stage = "writing the receipt"
        receipt = build_receipt(plan, written)
        data = receipt_bytes(receipt)
        _write_file_atomic(staging, RECEIPT_NAME, data)
        fsync_dir(staging, f"fsync {staging}")
        stage = "re-checking the source checkpoint"
        faults.point(f"recheck {plan.checkpoint}")
        _recheck_source_still_there(plan)
    except BaseException as exc:
        raise cleanup_and_fail(exc) from None
    stage = "publishing"
    # A signal from here on waits: the renames of publish() must not be cut apart, and a
    # published set is verified and reported as such before the run stops.
    with interrupts.deferred(reraise=False) as held:
        try:
            old = publish(staging, out, parent, outname, plan)
        except PartialFailure:
            raise
        except BaseException as exc:
            raise cleanup_and_fail(exc) from None
        expected = {w.name: w.sha256 for w in written}
        expected[RECEIPT_NAME] = sha256_bytes(data)
        after_publish(out, parent, old, (staged.st_dev, staged.st_ino), expected, links)
    progress(len(plan.ranks), len(plan.ranks), f"published {out}")
    if held.signum is not None:
        on_stop(Stop(held.signum, MigrationFailure.published(out, len(written)), done=completed(len(written), out)))
        raise interrupts.Interrupted(held.signum)
    return receipt


def _link_all(staging: str, links: Mapping[str, str]) -> None:
    """A checkpoint view's other entries: symlinks to the source checkpoint's (never a copy, never a change to it)."""
    for name, target in links.items():
        faults.point(f"symlink {staging}/{name}")
        os.symlink(target, os.path.join(staging, name))


def _make_durable(staging: str, staging_fd: int, durability: durable.Durability, names: list[str]) -> None:
    """Every sidecar's data and name in the staging dir on stable storage, before the receipt exists.

    Per-file fsync mode: the files are synced already, one fsync of the dir makes their names
    durable. syncfs mode: one syncfs of the filesystem does both (and fails if any writeback
    failed since the staging dir was opened). Where the call itself is unavailable (a seccomp
    filter or a sandbox kernel without it), every file ``names`` lists is fsynced instead.
    """
    if not durability.per_file_fsync:
        faults.point(f"syncfs {staging}")
        try:
            durable.syncfs(staging_fd)
            return
        except OSError as exc:
            if exc.errno not in durable.UNAVAILABLE:
                raise
        for name in names:
            faults.point(f"fsync {staging}/{name}")
            durable.fsync_at(staging_fd, name)
    fsync_dir(staging, f"fsync {staging}")


def _unchanged_failure(
    out: str, stage: str, exc: BaseException, staging: str | None, removed: bool, written: int, total: int
) -> MigrationFailed:
    """The exit-3 error for a failure before the output dir was touched."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    left = "" if staging is None else f"; staging dir {'removed' if removed else 'left at ' + staging}"
    return MigrationFailed(
        f"{out}: migration failed while {stage}: {reason}{left}; the output dir was not changed",
        failure=MigrationFailure.unchanged(out, stage, staging, removed, written, total),
    )


