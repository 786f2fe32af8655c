"""Published migration sets, found through their receipts.

A migration publishes ``dataloader_state_rank<r>.pt`` files and ``migration_receipt.json``
(written last: its presence marks a complete set) into an output dir outside the checkpoint,
by default ``<output_dir>/dataloader-state/checkpoint-<step>``. Listing checkpoints looks there,
so a migrated legacy checkpoint is shown as migrated, and the console can offer the last
migration again after a restart. Reads are bounded (regular files only, size and depth caps);
the sidecars themselves are only counted, never opened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from fvconsole.core.formats.sidecar_files import RECEIPT_NAME, SIDECAR_RE
from fvconsole.core.migration.defaults import MigrationDefaults, suggest_output_dir
from fvconsole.core.migration.receipt import MAX_RECEIPT_BYTES, RECEIPT_SCHEMA
from fvconsole.core.migration.upstream_receipt import named_sidecar_dirs
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fsutil import is_within, real
from fvconsole.core.shared.untrusted import Fields, load_file
from fvconsole.core.shared.walk import listing


@dataclass(frozen=True)
class PublishedSet:
    """One output dir's receipt and how many of the sidecars it lists are there."""

    output_dir: str
    receipt_path: str
    checkpoint: str
    config_path: str | None
    step: int
    world_size: int
    consumed_batches_per_rank: int
    overrides: tuple[str, ...]
    created_at_utc: str
    sidecars_listed: int
    sidecars_present: int

    @property
    def complete(self) -> bool:
        """Every rank's sidecar the receipt lists is in the output dir."""
        return self.sidecars_listed == self.world_size == self.sidecars_present


def read_published_set(output_dir: str) -> PublishedSet | None:
    """The set published in ``output_dir`` (None: no receipt). FvError when the receipt is unusable."""
    path = os.path.join(output_dir, RECEIPT_NAME)
    try:
        receipt = load_file(path, "migration receipt", MAX_RECEIPT_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FvError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not isinstance(receipt, dict) or receipt.get("schema") != RECEIPT_SCHEMA:
        raise FvError(f"{path}: field 'schema': not a {RECEIPT_SCHEMA} receipt")
    # Typed and range-checked by the untrusted-document door (a sidecar "path" that is a list
    # made the set below raise TypeError; a world size of 10**400 reached the console).
    f = Fields(receipt, path, "migration receipt")
    fields = {"source_checkpoint": f.str("source_checkpoint"), "step": f.int("step"),
              "world_size": f.int("world_size"), "consumed_batches_per_rank": f.int("consumed_batches_per_rank"),
              "created_at_utc": f.str("created_at_utc"), "sidecars": f.list("sidecars")}
    names = [item.get("path") for item in fields["sidecars"] if isinstance(item, dict)]
    listed = {name for name in names if isinstance(name, str) and SIDECAR_RE.match(name)}
    try:
        with listing(output_dir) as entries:
            present = sum(1 for e in entries if e.name in listed and e.is_file(follow_symlinks=False))
    except OSError as exc:
        raise FvError(f"{output_dir}: cannot list ({exc.strerror or exc})") from None
    config = receipt.get("source_config")
    overrides = receipt.get("overrides")
    return PublishedSet(
        output_dir=os.path.abspath(output_dir),
        receipt_path=path,
        checkpoint=fields["source_checkpoint"],
        config_path=config if isinstance(config, str) else None,
        step=fields["step"],
        world_size=fields["world_size"],
        consumed_batches_per_rank=fields["consumed_batches_per_rank"],
        overrides=tuple(o for o in overrides if isinstance(o, str)) if isinstance(overrides, list) else (),
        created_at_utc=fields["created_at_utc"],
        sidecars_listed=len(listed),
        sidecars_present=present,
    )


def published_for(checkpoint: str, step: int | None) -> PublishedSet | None:
    """The set published for ``checkpoint`` in its suggested output dir, if its receipt names it.

    A receipt there for another checkpoint (a copied tree, a reused name) does not count.
    """
    found = read_published_set(suggest_output_dir(checkpoint, step))
    if found is None or os.path.realpath(found.checkpoint) != os.path.realpath(checkpoint):
        return None
    return found


#: Directories of an output dir looked into for receipts (its children and theirs, checkpoints
#: excluded): a run's sidecar sets sit there (``dataloader-state/checkpoint-<step>``, ``sidecars-600``).
MAX_SET_DIRS = 10_000
#: FastVideo validation receipts read in an output dir (itself and the directories looked into) for
#: the ``sidecar_dir`` they name: a set outside the output dir that a receipt inside it vouches for.
MAX_NAMED_RECEIPTS = 256
_CHECKPOINT_NAME = re.compile(r"checkpoint-[0-9]+\n?")


@dataclass(frozen=True)
class RunSets:
    """The sidecar sets published inside an output dir, and what of it was not looked at."""

    sets: tuple[PublishedSet, ...]
    #: Receipts that could not be read, a bound reached: scan-level notes.
    notes: tuple[str, ...] = ()
    #: Sets outside the output dir that a FastVideo validation receipt inside it names (``sidecar_dir``).
    named: tuple[PublishedSet, ...] = ()

    def made_for(self, include_named: bool = False) -> dict[str, tuple[PublishedSet, ...]]:
        """The sets by the real path of the checkpoint each receipt names (with ``include_named``, the
        sets outside the output dir too)."""
        found: dict[str, list[PublishedSet]] = {}
        for item in (*self.sets, *self.named) if include_named else self.sets:
            found.setdefault(os.path.realpath(item.checkpoint), []).append(item)
        return {k: tuple(v) for k, v in found.items()}


def run_sets(output_dir: str, max_dirs: int = MAX_SET_DIRS) -> RunSets:
    """Every set published inside ``output_dir``: a receipt in one of its subdirectories or theirs (two
    levels; never inside a ``checkpoint-<step>`` tree, a hidden dir or through a symlink), at most
    ``max_dirs`` directories looked into."""
    sets: list[PublishedSet] = []
    notes: list[str] = []
    budget = [max_dirs]
    named: list[str] = []
    receipts = [MAX_NAMED_RECEIPTS]

    def receipts_in(directory: str) -> None:
        if receipts[0] <= 0:
            return
        found, more = named_sidecar_dirs(directory, receipts[0])
        receipts[0] -= len(found)
        named.extend(found)
        if more:
            receipts[0] = 0

    def look(directory: str, depth: int) -> None:
        receipts_in(directory)
        try:
            with listing(directory) as entries:
                children = [e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
                            and not (depth == 1 and _CHECKPOINT_NAME.fullmatch(e.name))]
        except OSError:
            return
        for name in sorted(children):
            if budget[0] <= 0:
                return
            budget[0] -= 1
            path = os.path.join(directory, name)
            try:
                found = read_published_set(path)
            except FvError as exc:
                notes.append(str(exc))
                found = None
            if found is not None:
                sets.append(found)
            elif depth == 1:
                look(path, 2)

    look(output_dir, 1)
    if budget[0] <= 0:
        notes.append(f"{output_dir}: looked for published sidecar sets in {max_dirs} directories and stopped; "
                     "sets beyond them are not seen")
    if receipts[0] <= 0:
        notes.append(f"{output_dir}: read {MAX_NAMED_RECEIPTS} FastVideo validation receipts for the sidecar "
                     "dirs they name and stopped; sets named beyond them are not seen")
    return RunSets(tuple(sets), tuple(notes), _named_sets(output_dir, named, sets, notes))


def _named_sets(output_dir: str, named: list[str], inside: list[PublishedSet],
                notes: list[str]) -> tuple[PublishedSet, ...]:
    """The published sets at the ``sidecar_dir`` paths receipts name, outside ``output_dir`` (inside
    ones were found by the walk), each once."""
    root = os.path.realpath(output_dir)
    seen = {os.path.realpath(item.output_dir) for item in inside}
    found: list[PublishedSet] = []
    for path in named:
        where = real(path)
        if where in seen or is_within(where, root):
            continue
        seen.add(where)
        try:
            item = read_published_set(where)
        except FvError as exc:
            notes.append(str(exc))
            continue
        if item is not None:
            found.append(item)
    return tuple(found)


def latest(sets: Iterable[PublishedSet | None]) -> PublishedSet | None:
    """The most recently created set (receipts carry an ISO-8601 UTC time, so strings sort)."""
    return max((s for s in sets if s is not None), key=lambda s: s.created_at_utc, default=None)


def defaults_from_published(found: PublishedSet) -> MigrationDefaults:
    """The migration form as it was for ``found``: what the receipt recorded."""
    return MigrationDefaults(
        checkpoint=found.checkpoint,
        config_path=found.config_path or "",
        output_dir=found.output_dir,
        expected_step=found.step,
        expected_world_size=found.world_size,
        consumed_batches_per_rank=found.consumed_batches_per_rank,
        derivation=(f"from the receipt {found.receipt_path} ({found.created_at_utc})",),
        overrides=found.overrides,
    )
