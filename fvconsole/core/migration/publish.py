"""Publishing a staged set: one rename (or an atomic swap), then read it back as written.

At any instant the output dir is absent, the previous complete set, or the new complete
set: the staging dir is renamed to ``out`` when there is none, and swapped with it by
``renameat2(RENAME_EXCHANGE)`` when there is (two renames where the filesystem cannot). The
published set is then re-read through a directory fd and compared with what was written;
only after that is the previous set removed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from fvconsole.core.formats.sidecar_files import classify_entry, sha256_bytes
from fvconsole.core.migration import faults
from fvconsole.core.migration.failure import MigrationFailed, MigrationFailure
from fvconsole.core.migration.output_dir import check_destination, staging_name
from fvconsole.core.migration.upstream_receipt import find_upstream_receipts
from fvconsole.core.shared import atomic
from fvconsole.core.shared.reasons import reason
from fvconsole.core.shared.removal import remove_flat_dir
from fvconsole.core.shared.safe_read import open_input

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.migration.model import MigrationPlan

#: Re-verification reads at most this much of a published file (a sidecar is a few KiB).
MAX_PUBLISHED_BYTES = 64 << 20


def fsync_dir(path: str, label: str) -> None:
    """``core.shared.atomic.fsync_dir`` as one step of the fault hook."""
    faults.point(label)
    atomic.fsync_dir(path)


def remove_set_dir(path: str, links: Collection[str] = ()) -> bool:
    """Delete a staging/old-set dir: only our file names, never following symlinks or crossing a mount.

    FastVideo's validation receipts of the old set go with it (they vouch for its files only);
    ``links``: a checkpoint view's links to its source's entries (unlinked, never followed).
    Returns False (and leaves the dir) if anything unexpected is inside (``core.shared.removal``).
    """
    upstream = set(find_upstream_receipts(path))
    return remove_flat_dir(path, lambda name: classify_entry(name) != "foreign" or name in upstream or name in links,
                           faults.point)


def publish(staging: str, out: str, parent: str, outname: str, plan: MigrationPlan) -> str | None:
    """Move the complete staging dir to ``out`` (renames only); returns where the old set went.

    On failure the output dir is as before; if even restoring it fails, PartialFailure says
    exactly where both sets are.
    """
    # Every output dir rule, re-checked right before the swap.
    state = check_destination(out, plan.checkpoint, plan.dataset_root, plan.request.overwrite)
    if not state.exists:
        faults.point(f"rename {staging} -> {out}")
        os.rename(staging, out)
        return None
    faults.point(f"exchange {staging} <-> {out}")
    if atomic.exchange_paths(staging, out):
        return staging  # the old set now lives under the staging name
    aside = os.path.join(parent, staging_name(outname))
    faults.point(f"rename {out} -> {aside}")
    os.rename(out, aside)
    try:
        faults.point(f"rename {staging} -> {out}")
        os.rename(staging, out)
    except OSError as exc:
        try:
            os.rename(aside, out)
        except OSError:
            raise MigrationFailed.of(
                reason("publish.not_restored", "output_dir", path=out, why=exc.strerror, previous=aside, new=staging),
                failure=MigrationFailure("publishing", out, True, previous_set=aside, new_set=staging),
            ) from None
        raise
    return aside


def after_publish(
    out: str, parent: str, old: str | None, published: tuple[int, int], expected: Mapping[str, str],
    links: Mapping[str, str] | None = None,
) -> None:
    """Make the publishing rename durable, re-verify the set, then delete the previous set (if any).

    The new set is already visible here, so a failure is reported as exit 3 naming what is
    wrong and what is left, never by undoing the publish. A set that does not read back as
    written keeps the previous set where it is (the operator may want it back).
    """
    try:
        fsync_dir(parent, f"fsync {parent}")
    except OSError as exc:
        raise MigrationFailed.of(
            reason("publish.not_synced", "output_dir", path=out, parent=parent, why=exc.strerror),
            failure=MigrationFailure("syncing the parent dir", out, True, previous_set=old),
        ) from None
    problems = verify_published(out, published, expected, links or {})
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        kept = f"; the previous set is kept at {old} (until the next migrate on this host)" if old else ""
        raise MigrationFailed.of(
            reason("publish.not_as_written", "output_dir", path=out, problem=problems[0], more=more, kept=kept),
            failure=MigrationFailure("verifying the published set", out, True, previous_set=old,
                                     problems=tuple(problems)),
        )
    if old is not None and remove_set_dir(old):  # a leftover is cleaned by the next execute
        with contextlib.suppress(OSError):
            fsync_dir(parent, f"fsync {parent}")


def verify_published(out: str, published: tuple[int, int], expected: Mapping[str, str],
                     links: Mapping[str, str] | None = None) -> list[str]:
    """Problems with the set at ``out``: not the dir published, extra/missing entries, other bytes.

    ``published`` is the (st_dev, st_ino) of the staging dir that was renamed to ``out``;
    ``expected`` maps every file name of the set to the sha256 of the bytes written.
    Reads through a directory fd without following symlinks, each file at most
    MAX_PUBLISHED_BYTES.
    """
    try:
        fd = open_input(out, directory=True)
    except OSError as exc:
        return [f"{out}: cannot open the published dir ({exc.strerror})"]
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != published:
            return [f"{out}: is no longer the directory that was published (replaced after publishing)"]
        names = set(os.listdir(fd))
        links = links or {}
        problems = [f"{name}: unexpected entry in the published set"
                    for name in sorted(names - set(expected) - set(links))]
        for name, target in sorted(links.items()):
            try:
                found = os.readlink(name, dir_fd=fd)
            except OSError as exc:
                problems.append(f"{name}: not the link to {target} that was made ({exc.strerror})")
                continue
            if found != target:
                problems.append(f"{name}: links to {found}, not to {target}")
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
        fd = open_input(name, dir_fd=dir_fd)
    except OSError as exc:
        return f"<unreadable: {exc.strerror}>"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "<not a regular file>"
        chunks: list[bytes] = []
        got = 0
        while got <= MAX_PUBLISHED_BYTES:
            chunk = os.read(fd, min(MAX_PUBLISHED_BYTES + 1 - got, st.st_size + 1, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        return f"<unreadable: {exc.strerror}>"
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_PUBLISHED_BYTES:
        return f"<larger than {MAX_PUBLISHED_BYTES} bytes>"
    return sha256_bytes(data)


