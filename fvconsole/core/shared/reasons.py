"""Why something was refused or skipped, as data (a code and named values) that each front end words.

The core creates a :class:`Reason` where it refuses or skips: a stable ``code``, the request
``field`` it concerns, the ``values`` it names, a flag-free ``detail`` and the request option
that would lift it (``remedy``, a request-field name such as ``overwrite``, never a flag).
Each front end words a reason with its own controls: the console from the code, values and
remedy (``fvconsole.tui.wording``), the command line through :attr:`Reason.cli`.

Every code is declared once in :data:`KINDS` with both of its texts, so a rule is worded in
one place per front end and the console can be checked against every code the core can
produce. The command line's text stays in the core because it is part of the output
contract (``Refusal.message`` and ``SkippedEntry.reason`` in ``--json``, an error's one line),
which the node runner and the journal also read. Pure: no I/O.

Values come worded, as sizes and ages do (``human_bytes``, ``human_age``): a count a template
says with its noun is given twice, as its number (``count``, for whoever reads the values) and
as ``core/shared/humanize.py: plural``'s words (``foreign``: ``1 file``, ``3 files``), which the
template uses, so a template never spells a plural itself. (This module cannot word them:
``humanize`` imports ``errors``, which names :class:`Reason`, and the core has no import circle.)
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fvconsole.core.shared.fields_json import fields_json

#: Options that lift a refusal or a skip, named as request fields (not as flags).
OVERWRITE, SKIP_SOURCE_CHECK, FORCE, BREAK_LOCK, WAIT = "overwrite", "skip_source_check", "force", "break_lock", "wait"
REMEDIES = (OVERWRITE, SKIP_SOURCE_CHECK, FORCE, BREAK_LOCK, WAIT)


@dataclass(frozen=True)
class Kind:
    """One code: what lifts it, its flag-free text and the command line's text (``str.format`` templates)."""

    code: str
    detail: str
    #: Empty when the command line says exactly what the console says.
    cli: str = ""
    remedy: str | None = None

    def __post_init__(self) -> None:
        if not self.cli:
            object.__setattr__(self, "cli", self.detail)


@dataclass(frozen=True)
class Reason:
    """One refusal or skip: ``code`` says what kind, ``values`` name what the message names."""

    code: str
    field: str
    values: tuple[tuple[str, str], ...] = ()
    detail: str = ""
    remedy: str | None = None

    def value(self, name: str, default: str = "") -> str:
        return dict(self.values).get(name, default)

    @property
    def cli(self) -> str:
        """The command line's wording (flags and their advice included)."""
        kind = KINDS.get(self.code)
        return kind.cli.format_map(Words(self.values)) if kind else self.detail

    def words(self, missing: str | None = "") -> Words:
        """A ``str.format_map`` source: the values, the derived names, ``missing`` for any other name."""
        return Words(self.values, missing)

    def to_json(self) -> dict[str, Any]:
        """The reason as data for another process (the fleet's node runner sends it with an error)."""
        return fields_json(self, omit=("detail", "remedy"), values=dict(self.values))


MIN_FREE_GB, MIN_FREE_PERCENT = "min_free_gb", "min_free_percent"


def min_free_words(values: Mapping[str, str], *, flags: bool) -> str:
    """A free-space target from its values: ``min free 8 GiB and 30%`` or (``flags``) the command line's
    ``--min-free-gb 8 and --min-free-percent 30``. One place for both, so no front end parses the other's."""
    gb, percent = values.get(MIN_FREE_GB), values.get(MIN_FREE_PERCENT)
    if flags:
        parts = [f"--min-free-gb {gb}"] * (gb is not None) + [f"--min-free-percent {percent}"] * (percent is not None)
        return " and ".join(parts)
    parts = [f"{gb} GiB"] * (gb is not None) + [f"{percent}%"] * (percent is not None)
    return "min free " + " and ".join(parts)


#: Names a template may use that are worded from other values (a free-space target from its bounds).
DERIVED = {
    "min_free": lambda v: min_free_words(v, flags=False),
    "min_free_flags": lambda v: min_free_words(v, flags=True),
    "set_flags": lambda v: " ".join(f"--set {shlex.quote(o)}" for o in launch_overrides(v)),
    "the_overrides": lambda v: f"{'the override' if len(launch_overrides(v)) == 1 else 'the overrides'} "
                               f"{v.get('overrides', '')}",
}


def launch_overrides(values: Mapping[str, str]) -> list[str]:
    """The overrides named by ``values["overrides"]`` (shell words, each quoted by ``shlex.quote``), unquoted:
    ``key="a b"`` is one override, however many spaces its value holds."""
    text = values.get("overrides", "")
    try:
        return shlex.split(text)
    except ValueError:  # not quoted by shlex: its words as they stand
        return text.split()


class Words(dict):
    """A reason's values for ``str.format_map``, with :data:`DERIVED` names; ``missing`` (None: KeyError) else."""

    def __init__(self, values: Any, missing: str | None = None) -> None:
        super().__init__(values)
        self._missing = missing

    def __missing__(self, key: str) -> str:
        if key in DERIVED:
            return DERIVED[key](self)
        if self._missing is None:
            raise KeyError(key)
        return self._missing


def _kinds(*kinds: Kind) -> dict[str, Kind]:
    table: dict[str, Kind] = {}
    for kind in kinds:
        assert kind.code not in table, kind.code
        assert kind.remedy is None or kind.remedy in REMEDIES, kind
        table[kind.code] = kind
    return table


#: A refusal or skip with no code of its own: ``detail`` holds the whole text (and names no flag).
INVALID = "invalid"

#: Every code the core produces. ``{value}`` names a value of the reason.
KINDS: Mapping[str, Kind] = _kinds(
    Kind(INVALID, "{text}"),
    # migration: a run config that differs where a launch override would make it agree
    Kind("config.critical_override",
         "{differs}; if the run was launched with the checkpoint's values, add {the_overrides}",
         "{differs}; if the run was launched with the checkpoint's values, repeat them: {set_flags}"),
    # migration: the operator's confirmations
    Kind("expected_step.metadata", "expected step is {given} but metadata.json step is {actual} ({path})",
         "--expected-step is {given} but metadata.json step is {actual} ({path})"),
    Kind("expected_step.directory",
         "expected step is {given} but the directory name says step {actual} "
         "({name}; FastVideo checks sidecars against this one)",
         "--expected-step is {given} but the directory name says step {actual} "
         "({name}; FastVideo checks sidecars against this one)"),
    Kind("expected_world_size.config", "expected world size is {given} but training.distributed.num_gpus is {actual}",
         "--expected-world-size is {given} but training.distributed.num_gpus is {actual}"),
    Kind("consumed_batches_per_rank.config",
         "consumed batches per rank is {given} but step {step} x training.loop.gradient_accumulation_steps "
         "{accum} is {actual}",
         "--consumed-batches-per-rank is {given} but step {step} x training.loop.gradient_accumulation_steps "
         "{accum} is {actual}"),
    Kind("expected_world_size.source",
         "expected world size is {given} but the checkpoint's world size is {actual} (its embedded "
         "training.distributed.num_gpus: a reshard confirms the source's)",
         "--expected-world-size is {given} but the checkpoint's world size is {actual} (its embedded "
         "training.distributed.num_gpus: a reshard confirms the source's)"),
    Kind("consumed_batches_per_rank.source",
         "consumed batches per rank is {given} but the checkpoint's loader state says {actual} "
         "(epoch {epoch} x {per_epoch} batches + {yielded} samples / batch {batch})",
         "--consumed-batches-per-rank is {given} but the checkpoint's loader state says {actual} "
         "(epoch {epoch} x {per_epoch} batches + {yielded} samples / batch {batch})"),
    Kind("reshard.required",
         "the run config changes the world size {source_world} -> {target_world} (sp size {source_sp} -> "
         "{target_sp}): the loader state must be resharded; choose a mode ({modes})",
         "the run config changes the world size {source_world} -> {target_world} (sp size {source_sp} -> "
         "{target_sp}): the loader state must be resharded; choose --reshard MODE ({modes}; the accounting "
         "of each is shown)"),
    Kind("world_size.max",
         "{world} ranks in {where}: fvconsole plans and writes at most {max} ranks (a sidecar per rank)"),
    Kind("manifest.source", "{problem}", "{problem} (--skip-source-check to proceed anyway)", SKIP_SOURCE_CHECK),
    # migration: the output dir (preview and execution)
    Kind("output_dir.has_sidecars",
         "{path} already contains {sidecars}{receipt} (e.g. {example})",
         "{path} already contains {sidecars}{receipt} (e.g. {example}); "
         "use --overwrite to replace them", OVERWRITE),
    Kind("output_dir.in_checkpoint",
         "{path}: output dir resolves to {real}, inside the legacy checkpoint {checkpoint} "
         "(it must be outside it; the checkpoint is never modified)",
         "{path}: output dir resolves to {real}, inside the legacy checkpoint {checkpoint} "
         "(--output-dir must be outside it; the checkpoint is never modified)"),
    Kind("output_dir.in_dataset",
         "{path}: output dir resolves to {real}, inside the dataset root {root} (training.data.data_path), "
         "which must stay read-only",
         "{path}: output dir resolves to {real}, inside the dataset root {root} (training.data.data_path), "
         "which must stay read-only (--output-dir)"),
    Kind("output_dir.holds_checkpoint", "{path}: output dir contains the checkpoint {checkpoint}",
         "{path}: output dir contains the checkpoint {checkpoint} (--output-dir)"),
    Kind("output_dir.symlink", "{path}: output dir is a symlink; pass the real directory",
         "{path}: output dir is a symlink; pass the real directory (--output-dir)"),
    Kind("output_dir.not_dir", "{path}: output dir exists and is not a directory",
         "{path}: output dir exists and is not a directory (--output-dir)"),
    Kind("output_dir.foreign",
         "{path}: output dir contains {foreign} other than fvconsole sidecars ({shown}); refusing to replace it",
         "{path}: output dir contains {foreign} other than fvconsole sidecars ({shown}); "
         "refusing to replace it (--output-dir)"),
    Kind("output_dir.mount_point", "{path}: output dir is a mount point ({why}); a mount point cannot be renamed or "
         "swapped, so no set can be published there: use a directory inside it",
         "{path}: output dir is a mount point ({why}); a mount point cannot be renamed or swapped, so no set can be "
         "published there: use a directory inside it (--output-dir)"),
    Kind("output_dir.bad_name", "{path}: not a usable output dir name", "{path}: not a usable output dir name (--output-dir)"),
    Kind("output_dir.name_too_long",
         "{path}: output dir name is too long for its staging dir beside it (at most {limit} bytes)",
         "{path}: output dir name is too long for its staging dir beside it (at most {limit} bytes; --output-dir)"),
    Kind("output_dir.no_room",
         "{path}: not enough free space on the filesystem of {where}: the lock, the staging dir and {files} files "
         "need {need} and {need_inodes} inodes; {free} and {free_inodes} inodes are free"),
    # migration: execution's re-check that the plan's sources are still what it was made from
    Kind("recheck.source_gone", "{path}: the source checkpoint is gone since the plan was made (pruned?); "
         "nothing was published"),
    Kind("recheck.metadata_unreadable", "{path}: cannot read checkpoint metadata ({why})"),
    Kind("recheck.metadata_changed", "{path}: changed since the plan was made (sha256 {now} != {planned})"),
    Kind("recheck.config_unreadable", "{path}: cannot read run config ({why})"),
    Kind("recheck.config_changed", "{path}: run config changed since the plan was made (sha256)"),
    Kind("recheck.manifest_changed",
         "{path}: field 'fingerprint' changed since the plan was made ({now} != {planned})"),
    Kind("recheck.plan_ranks", "plan: field 'ranks' has {entries} for world size {world_size}"),
    # a package of an extra is not installed (the demo, the Parquet readers, the torch cross-check)
    Kind("extra.missing", "{purpose} needs {package}: pip install 'fvconsole[{extra}]'"),
    # locks (a migration's output dir, a cache root); {who} is " (holder; lock file F)" or empty
    Kind("lock.alive", "{subject}: {what}{who}"),
    Kind("lock.alive_not_broken", "{subject}: {what}{who}; it is still running, so it is not broken",
         "{subject}: {what}{who}; it is still running, so --break-lock leaves it"),
    Kind("lock.unknown", "{subject}: {what}{who}; {why}, so it is not taken over from here: if that run is gone, "
         "remove the lock by hand (rm {file})",
         "{subject}: {what}{who}; {why}, so it is not taken over from here: if that run is gone, re-run with "
         "--break-lock (or run again there, which takes it over)", BREAK_LOCK),
    Kind("lock.damaged", "{subject}: {what} (lock file {file} is unreadable: {why}; once no run is using it, "
         "remove it by hand: rm {file})"),
    Kind("lock.changing", "{subject}: {what}{who}; the lock file keeps changing"),
    Kind("lock.cannot_take", "{subject}: cannot take the lock {file}: {why}"),
    Kind("lock.moved", "{subject}: the lock changed while breaking it; it is now at {aside} "
         "(move it back to {file} if its holder still runs)"),
    Kind("lock.evicting", "{subject}: {what}{who}", "{subject}: {what}{who}; re-run with --wait SECONDS to wait for it",
         WAIT),
    Kind("lock.evicting_waited", "{subject}: {what}{who}; it did not finish within {wait}s",
         "{subject}: {what}{who}; it did not finish within --wait {wait}s"),
    # locks: a root that cannot be locked, a lock file that is not ours to take (the evictor's OFD lock)
    Kind("lock.root_missing", "{subject}: {noun} does not exist"),
    Kind("lock.root_not_dir", "{subject}: {noun} is not a directory"),
    Kind("lock.root_unopenable", "{subject}: cannot open {noun} ({why})"),
    Kind("lock.root_unlockable", "{subject}: cannot lock {noun} ({why})"),
    Kind("lock.file_read_only", "{subject}: cannot create the lock file {file}: read-only filesystem"),
    Kind("lock.file_symlink", "{subject}: the lock file {file} is a symlink; remove it once no fvconsole run uses it"),
    Kind("lock.file_not_regular", "{subject}: the lock file {file} is not a regular file; remove it once no "
         "fvconsole run uses it"),
    Kind("lock.file_foreign", "{subject}: the lock file {file} belongs to {owner} and is not writable by {user}: "
         "only who can write it may take the lock; its owner (or root) can remove it"),
    Kind("lock.file_uncreatable", "{subject}: cannot create the lock file {file} ({why}): only a user who can "
         "write there may take the lock"),
    # locks: what holding or giving one up left for the operator (warnings, never refusals)
    Kind("lock.unsupported", "cannot lock the root on this filesystem ({why}; NFS?): {unguarded}"),
    Kind("lock.record_unwritten", "{file}: cannot write the holder record ({why}); the lock still holds"),
    Kind("lock.record_taken_over", "{file}: took over from {holder}: {why}"),
    Kind("lock.record_not_removed", "{file}: cannot remove the holder record ({why}); it is ignored once this "
         "process is gone"),
    Kind("lock.gone_at_release", "{file}: the lock file had already been removed (by hand?)"),
    Kind("lock.unreadable_at_release", "{file}: cannot read the lock file before removing it ({why}); remove it "
         "by hand"),
    Kind("lock.taken_at_release", "{file}: the lock file now belongs to {holder}; left in place"),
    Kind("lock.not_removed", "{file}: cannot remove the lock file ({why}); remove it by hand"),
    # locks: a reader's record beside a run it reads (shared holding)
    Kind("lock.reader_unwritten", "{file}: cannot write the reader's record ({why}): a prune of {directory} "
         "will not see that {operation} reads {item}"),
    Kind("lock.reader_damaged", "{file}: a reader's record that cannot be read ({why}); what it reads is not known"),
    Kind("lock.readers_beyond_cap", "{directory}: {records} beside it; only the first {limit} are judged"),
    # cache: where eviction may run
    Kind("cache_root.mount_point", "{root}: is the root of a mounted filesystem; use a subdirectory",
         "{root}: is the root of a mounted filesystem; use a subdirectory, or --force if it really is the cache root",
         FORCE),
    Kind("cache_root.no_entries", "{root}: contains no cache-looking entries (16 lowercase hex directories); "
         "is this the right root?",
         "{root}: contains no cache-looking entries (16 lowercase hex directories); is this the right root? "
         "--force to proceed", FORCE),
    # cache: why a selected entry is left in place
    Kind("skip.missing", "no such entry in the cache"),
    Kind("skip.kept", "kept", "kept (--keep)"),
    Kind("skip.mounted", "{prefix}{why}"),
    Kind("skip.in_use", "{why}", "{why}; --force to evict anyway", FORCE),
    Kind("skip.in_use_process", "in use: {how} by pid {pid} ({command}){more}",
         "in use: {how} by pid {pid} ({command}){more}; --force to evict anyway", FORCE),
    Kind("skip.leftover_busy", "{name}: {why}"),
    Kind("skip.symlink_not_sized", "symlinked entry: never evicted to make room under a size or free-space target",
         "symlinked entry: never evicted by --max-gb or a free-space target (select it with --key or --invalid)"),
    Kind("skip.changed", "{text}"),
    Kind("skip.not_removable", "not removable by {user}: {path} ({why})"),
    Kind("evict.nothing_selected", "nothing selected: give a cap, a free-space target, keys, invalid entries or an age",
         "nothing selected: give --max-gb, --min-free-gb, --min-free-percent, --key, --invalid or --older-than"),
    # cache: why a planned entry is evicted (one per selector that chose it)
    Kind("evict.key", "selected by key", "selected by --key"),
    Kind("evict.invalid", "{status}: {explanation}"),
    Kind("evict.failed_verify", "fails verification: {problem}"),
    Kind("evict.never_used", "never used (no manifest): counts as oldest"),
    Kind("evict.older_than", "last used {age} ago (older than {limit})"),
    Kind("evict.over_cap", "LRU #{rank}: total over the {cap} GiB cap"),
    Kind("evict.over_cap_next", "LRU: next in line for the {cap} GiB cap"),
    Kind("evict.min_free", "free space #{rank}: {short} short of the {need} free-space target ({min_free})",
         "free space #{rank}: {short} short of the {need} free-space target ({min_free_flags})"),
    Kind("evict.min_free_next", "free space: next in line for the {need} free-space target ({min_free})",
         "free space: next in line for the {need} free-space target ({min_free_flags})"),
    Kind("evict.leftover", "leftover of an interrupted eviction ({name})"),
    # cache: a plan's free-space target ({min_free}: the target's bounds)
    Kind("free.already", "target {need} free ({min_free}): already {before} free; nothing to evict for it",
         "target {need} free ({min_free_flags}): already {before} free; nothing to evict for it"),
    Kind("free.reached", "target {need} free ({min_free}): {before} free now, about {after} after",
         "target {need} free ({min_free_flags}): {before} free now, about {after} after"),
    Kind("free.unreachable", "target {need} free ({min_free}) cannot be reached: {before} free now, about {after} "
         "after evicting every entry that may be evicted ({short} short; kept, in-use and mounted entries stay); "
         "best effort: evicting toward it anyway",
         "target {need} free ({min_free_flags}) cannot be reached: {before} free now, about {after} "
         "after evicting every entry that may be evicted ({short} short; kept, in-use and mounted entries stay); "
         "--best-effort: evicting toward it anyway"),
    Kind("free.unreachable_held", "target {need} free ({min_free}) cannot be reached: {before} free now, at most "
         "{possible} after evicting every entry that may be evicted; nothing is evicted for it ({short} short; "
         "tick best effort to free what can be freed toward it)",
         "target {need} free ({min_free_flags}) cannot be reached: {before} free now, at most "
         "{possible} after evicting every entry that may be evicted; nothing is evicted for it ({short} short; "
         "--best-effort frees what it can toward it)"),
    # migration: what the preview found beside the output dir (warnings)
    Kind("staging.crashed_here", "{path}: staging dir of a crashed migration on this host (pid {pid}); "
         "executing the migration removes it",
         "{path}: staging dir of a crashed migration on this host (pid {pid}); --yes removes it"),
    Kind("staging.no_identity", "{path}: staging dir without a host identity (older fvconsole, pid {pid}); "
         "left untouched: remove it by hand once no migration is running"),
    Kind("staging.other_host", "{path}: staging dir of another host or container ({host}, pid {pid}); "
         "left untouched: a migration there is running or crashed, remove it by hand once it is gone"),
    Kind("staging.running", "{path}: staging dir of a running migration on this host (pid {pid}); left untouched"),
    Kind("staging.unexpected", "{path}: staging dir of a crashed migration holds unexpected entries; left untouched"),
    Kind("lock.will_take_over", "{file}: stale lock of {holder} will be taken over: {why}"),
    Kind("lock.will_break", "{file}: lock of {holder} will be broken: {why}",
         "{file}: lock of {holder} will be broken (--break-lock): {why}"),
    Kind("lock.took_over", "{file}: took over the stale lock of {holder}: {why}"),
    Kind("lock.broke", "{file}: broke the lock of {holder}: {why}",
         "{file}: broke the lock of {holder} (--break-lock): {why}"),
    # migration: publishing failed part-way (exit 3)
    Kind("publish.not_restored", "{path}: publishing failed ({why}) and the previous set could not be moved back: "
         "previous set at {previous}, new set at {new}"),
    Kind("publish.not_synced", "{path}: new set published but syncing {parent} failed ({why}); verify the set "
         "before resuming from it",
         "{path}: new set published but syncing {parent} failed ({why}); re-run verify"),
    Kind("publish.not_as_written", "{path}: the published set does not read back as written: {problem}{more}{kept}; "
         "do not resume from it",
         "{path}: the published set does not read back as written: {problem}{more}{kept}; "
         "do not resume from it (re-run with --overwrite)", OVERWRITE),
    # retention (``checkpoints prune``): why a checkpoint stays
    Kind("keep.newest_complete", "the newest complete checkpoint: never deleted"),
    Kind("keep.in_use", "in use: {how} by pid {pid} ({command}){more}: never deleted"),
    Kind("keep.published", "its published sidecar set ({path}) is the newest resumable state: never deleted"),
    Kind("keep.read", "read by pid {pid} on host {host} ({operation}): never deleted while it reads{more}"),
    Kind("keep.unreadable", "{why}: never deleted (what cannot be read is not judged)"),
    Kind("keep.symlink", "a symlink, not a checkpoint directory of this output dir: never deleted"),
    Kind("keep.mounted", "{where}: never deleted (removal never crosses a mount)"),
    Kind("keep.not_removable", "not removable by {user}: {path} ({why})"),
    Kind("keep.last", "one of the {count} newest complete checkpoints", "one of the {count} newest complete "
         "checkpoints (--keep-last {count})"),
    Kind("keep.every", "step is a multiple of {every}", "step is a multiple of {every} (--keep-every {every})"),
    Kind("keep.step", "kept by its step", "kept (--keep {step})"),
    Kind("keep.recent", "modified {age} ago, not older than {limit}",
         "modified {age} ago, not older than {limit} (--older-than)"),
    Kind("keep.age_unknown", "age unknown ({why}): never deleted by age"),
    Kind("keep.unselected", "complete; no rule selects complete checkpoints",
         "complete; no rule selects it (--keep-last N or --older-than D select complete checkpoints)"),
    # {gaps}: the checkpoint's gaps in core/checkpoints/gaps.py's words (gap_brief: "interrupted save" or what else)
    Kind("keep.incomplete_unselected", "{gaps}; not selected", "{gaps}; --incomplete would select it"),
    Kind("keep.grace", "{gaps}, newer than the newest complete one, modified {age} ago "
         "(within the {grace} grace: it may still be being written)",
         "{gaps}, newer than the newest complete one, modified {age} ago "
         "(within --grace {grace}: it may still be being written)"),
    # retention: why a checkpoint goes
    Kind("prune.beyond_last", "beyond the {count} newest complete checkpoints",
         "beyond the {count} newest complete checkpoints (--keep-last {count})"),
    Kind("prune.older_than", "modified {age} ago, older than {limit}",
         "modified {age} ago, older than {limit} (--older-than)"),
    Kind("prune.incomplete", "{gaps} ({why}), modified {age} ago", "{gaps} ({why}), modified {age} ago (--incomplete)"),
    Kind("prune.marked", "marked for pruning in the console", "selected by its step (--step {step})"),
    Kind("prune.leftover", "leftover of an interrupted prune ({name}): finished first"),
    Kind("prune.leftover_running", "{path}: {name} being pruned by pid {pid}, which still runs on this host: "
         "left alone"),
    Kind("prune.orphans_set", "its sidecar set {path} is left without its checkpoint"),
    Kind("prune.changed", "{path}: {why} since the plan; left as it was"),
    # what FastVideo's own cleanup and "latest" resume will do (``checkpoints ls``)
    Kind("fastvideo.limit_unreadable", "FastVideo will refuse to start: {path} ({source}) is {value}, and "
         "its int({path} or 0) raises {why}"),
    Kind("fastvideo.fewer_complete", "FastVideo's cleanup after the next save keeps {kept} "
         "of its limit {limit}: interrupted saves take its slots (prune them first)",
         "FastVideo's cleanup after the next save keeps {kept} of its limit {limit}: "
         "interrupted saves take its slots (`checkpoints prune --incomplete` removes them)"),
    Kind("fastvideo.deletes_newest_complete", "FastVideo's cleanup after the next save deletes checkpoint-{step}, "
         "the newest complete checkpoint: if that save is interrupted too, nothing complete is left"),
    # fleet: which nodes
    Kind("fleet.no_selection", "give a node list or a job id to select nodes",
         "give --nodes NODELIST or --job JOBID to select nodes"),
    Kind("fleet.job_id", "job {shown} is not a Slurm job id", "--job: {shown} is not a Slurm job id"),
    Kind("fleet.squeue_timeout", "job {job}: squeue did not answer within {timeout}s",
         "--job {job}: squeue did not answer within {timeout}s"),
    Kind("fleet.squeue_failed", "job {job}: squeue failed: {why}", "--job {job}: squeue failed: {why}"),
    Kind("fleet.no_such_job", "job {job}: no such job in squeue (finished, or never existed)",
         "--job {job}: no such job in squeue (finished, or never existed)"),
    Kind("fleet.job_without_nodes", "job {job}: job holds no nodes (state {states})",
         "--job {job}: job holds no nodes (state {states})"),
    Kind("fleet.nodes_outside_job", "nodes: {outside} not in job {job} ({held})",
         "--nodes: {outside} not in job {job} ({held})"),
    Kind("fleet.nodes_empty", "nodes: the node selection is empty", "--nodes: the node selection is empty"),
    Kind("fleet.nodes_bad", "nodes: {problem}", "--nodes: {problem}"),
    Kind("fleet.no_root", "no cache root: give one or set {env}", "no cache root: give --cache-root or set {env}"),
)


def reason(code: str, field: str, **values: Any) -> Reason:
    """The reason ``code`` about ``field`` naming ``values`` (KeyError for an undeclared code)."""
    kind = KINDS[code]
    named = tuple((k, str(v)) for k, v in values.items())
    return Reason(code, field, named, kind.detail.format_map(Words(named)), kind.remedy)


def invalid(field: str, text: str) -> Reason:
    """A reason with no code of its own: ``text`` (which names no flag) is both texts."""
    return reason(INVALID, field, text=text)
