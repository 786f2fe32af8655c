"""How the console words the core's refusals and skips: with its own controls, never CLI flags.

The core hands over :class:`~fvconsole.core.shared.reasons.Reason` values (a code, the values it
names, the option that would lift it); the command line words them with flags, the console
here from the code, the values and the remedy alone, with the names of its form fields,
checkboxes and dialogs. A code without a console text of its own is shown by its flag-free
``detail``.
"""

from __future__ import annotations

from collections.abc import Mapping

from fvconsole.core.cache import (
    SYMLINK_NOTE,
    CacheEntry,
    FreeSpacePlan,
    FreeTarget,
    PlannedEviction,
    protection_reason,
)
from fvconsole.core.shared import (
    BREAK_LOCK,
    FORCE,
    OVERWRITE,
    SKIP_SOURCE_CHECK,
    WAIT,
    Reason,
    min_free_words,
)

#: The migration form's names for request fields.
FIELD_LABELS = {
    "expected_step": "expected step",
    "expected_world_size": "expected world size",
    "consumed_batches_per_rank": "consumed batches/rank",
    "output_dir": "output dir",
    "checkpoint": "checkpoint",
    "config": "run config",
    "overrides": "overrides",
    "reshard": "reshard",
}

#: The console control that lifts a refusal or skip: remedy -> (widget id, its label).
CONTROLS = {
    OVERWRITE: ("mig-overwrite", "overwrite existing sidecars"),
    SKIP_SOURCE_CHECK: ("mig-skip-source", "skip source check"),
    FORCE: ("evict-force", "force"),
}

#: What to do in the console to lift a refusal or skip.
REMEDIES = {
    OVERWRITE: "tick “overwrite existing sidecars” to replace them",
    SKIP_SOURCE_CHECK: "tick “skip source check” to go ahead anyway",
    FORCE: "tick “force” in the eviction dialog to go ahead anyway",
    # Remedies the console deliberately has no control for: what to do instead.
    BREAK_LOCK: "the console never breaks a lock: make sure its holder is gone, then remove the lock file",
    WAIT: "try again once it has finished",
}

#: Console texts of codes whose flag-free detail does not read well in the console.
_TEXTS = {
    "expected_step.metadata": "the form says {given}, but metadata.json says step {actual} ({path})",
    "expected_step.directory": "the form says {given}, but the directory name says step {actual} "
                               "({name}; FastVideo checks sidecars against this one)",
    "expected_world_size.config": "the form says {given}, but training.distributed.num_gpus is {actual}",
    "consumed_batches_per_rank.config": "the form says {given}, but step {step} × "
                                        "training.loop.gradient_accumulation_steps {accum} is {actual}",
    "reshard.required": "the run config changes the world size {source_world} → {target_world} (sp size "
                        "{source_sp} → {target_sp}): choose a reshard mode in the form; the panel below shows "
                        "what each one reads twice or skips",
    "expected_world_size.source": "the form says {given}, but the checkpoint's world size is {actual} "
                                  "(a reshard confirms the source's)",
    "consumed_batches_per_rank.source": "the form says {given}, but the checkpoint's loader state says {actual} "
                                        "(epoch {epoch} × {per_epoch} batches + {yielded} samples / batch {batch})",
    "output_dir.has_sidecars": "{path} already holds {sidecars} (e.g. {example})",
    "skip.kept": "kept",
    "skip.missing": "no longer in the cache",
    "skip.symlink_not_sized": "a symlinked entry: never evicted to make room under the cap (mark it and press e)",
    # why a planned entry goes: the eviction dialog's names for its selectors
    "evict.key": "marked",
    "evict.nothing_selected": "nothing selected: mark entries, or choose invalid, a cap or a free-space target",
    # execution re-checked the preview's sources: the console's way on is a new preview
    "recheck.metadata_changed": "{path}: changed since the preview (sha256 {now} ≠ {planned}); "
                                "Preview (ctrl+r) again",
    "recheck.config_changed": "{path}: run config changed since the preview; Preview (ctrl+r) again",
    "recheck.manifest_changed": "{path}: the manifest's fingerprint changed since the preview "
                                "({now} ≠ {planned}); Preview (ctrl+r) again",
    "staging.crashed_here": "{path}: staging dir of a crashed migration on this host (pid {pid}); Execute removes it",
    "publish.not_synced": "{path}: new set published but syncing {parent} failed ({why}); check the set "
                          "(Checkpoints view) before resuming from it",
    "config.critical_override": "{differs}; if the run was launched with the checkpoint's values, "
                                "type {overrides} into “overrides”",
    "fleet.no_selection": "fill in job or nodes to select nodes",
    "fleet.no_root": "no cache root: fill in “cache root” or set {env}",
}


def with_remedy(text: str, remedy: str | None, remedies: Mapping[str, str] = REMEDIES) -> str:
    return f"{text}; {remedies[remedy]}" if remedy in remedies else text


def reason_text(reason: Reason, remedies: Mapping[str, str] = REMEDIES) -> str:
    """What a reason says in the console, with what to do here (its remedy, if ``remedies`` has it)."""
    template = _TEXTS.get(reason.code)
    what = template.format_map(reason.words()) if template else reason.detail
    return with_remedy(what, reason.remedy, remedies)


def refusal_text(reason: Reason) -> str:
    """``<field>: <what>; <what to do here>`` for the migration banner."""
    return f"{FIELD_LABELS.get(reason.field, reason.field)}: {reason_text(reason)}"


def skip_text(reason: Reason, entry: CacheEntry | None = None, now: float | None = None,
              grace: float | None = None) -> str:
    """Why a cache entry is left in place; an in-use reason is worded with the time *now*."""
    if reason.code == "skip.in_use":
        live = None
        if entry is not None and now is not None and grace is not None:
            live = protection_reason(entry, now, grace)
            if live is None:
                live = "no longer looks in use (plan again to include it)"
        text = f"in use: {live or reason.value('why')}"
        return f"{text}; tick “force” to evict it anyway" if reason.remedy == FORCE else text
    return reason_text(reason)


def evict_reason_text(planned: PlannedEviction) -> str:
    """Why an entry is planned for eviction, from its selectors' reasons (``evict.key`` → marked,
    a free-space target → the dialog's min free field)."""
    text = "; ".join(reason_text(r) for r in planned.why)
    return f"{text} ({SYMLINK_NOTE})" if planned.is_symlink else text


def free_space_text(free: FreeSpacePlan) -> str:
    """The plan's free-space line, the target named by the eviction dialog's fields."""
    return reason_text(free.why)


def free_target_text(target: FreeTarget) -> str:
    """A free-space target as the eviction dialog's fields name it: ``min free 8 GiB and 30%`` (``, best effort``)."""
    return min_free_words(target.values(), flags=False) + (", best effort" if target.best_effort else "")
