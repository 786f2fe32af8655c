"""Why something was refused or skipped, as data (a code and named values) that each front end words.

The migration core and the cache planner word their refusals and skips for the command line:
``--expected-step is 301 but ...``, ``use --overwrite to replace them``, ``--force to evict
anyway``. The CLI prints those messages as they are. The console has no flags: it has form
fields, checkboxes and dialogs. So a message is turned here into a :class:`Reason`: a stable
``code``, the request ``field`` it concerns, the values it names, the message with the advice
clause taken out (``detail``), and the request option that would lift it (``remedy``). Each
front end words the code and the remedy with its own controls.

The mapping is keyed by the refusal's field (``Refusal.field``) and by the shapes the core
words its messages in; a message of an unknown shape keeps its text with any flag advice
removed and its code set to ``<field>.other``. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

#: Options that lift a refusal or a skip, named as request fields (not as flags).
OVERWRITE, SKIP_SOURCE_CHECK, FORCE, BREAK_LOCK = "overwrite", "skip_source_check", "force", "break_lock"


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


class HasFieldAndMessage(Protocol):
    """``core.migration.Refusal`` (and anything shaped like it)."""

    field: str
    message: str


class HasKeyAndReason(Protocol):
    """``core.cache.SkippedEntry`` (and anything shaped like it)."""

    key: str
    reason: str


# (field, code, pattern, remedy): the shapes core.migration / core.sidecars word refusals in.
_REFUSALS: tuple[tuple[str, str, re.Pattern[str], str | None], ...] = tuple(
    (field_name, code, re.compile(pattern, re.DOTALL), remedy)
    for field_name, code, pattern, remedy in (
        ("expected_step", "expected_step.metadata",
         r"--expected-step is (?P<given>-?\d+) but metadata\.json step is (?P<actual>-?\d+) \((?P<path>.*)\)", None),
        ("expected_step", "expected_step.directory",
         r"--expected-step is (?P<given>-?\d+) but the directory name says step (?P<actual>-?\d+) "
         r"\((?P<name>[^;]*);.*\)", None),
        ("expected_world_size", "expected_world_size.config",
         r"--expected-world-size is (?P<given>-?\d+) but training\.distributed\.num_gpus is (?P<actual>-?\d+)", None),
        ("consumed_batches_per_rank", "consumed_batches_per_rank.config",
         r"--consumed-batches-per-rank is (?P<given>-?\d+) but step (?P<step>-?\d+) x "
         r"training\.loop\.gradient_accumulation_steps (?P<accum>-?\d+) is (?P<actual>-?\d+)", None),
        ("output_dir", "output_dir.has_sidecars",
         r"(?P<path>.*) already contains (?P<count>\d+) dataloader_state_rank<r>\.pt sidecars "
         r"\(e\.g\. (?P<example>[^)]*)\); use --overwrite to replace them", OVERWRITE),
        ("output_dir", "output_dir.has_set",
         r"(?P<path>.*): output dir already holds (?P<count>\d+) sidecar\(s\)(?P<receipt> and a receipt)?; "
         r"pass --overwrite to replace the set", OVERWRITE),
        ("manifest.source", "manifest.source",
         r"(?P<problem>.*) \(--skip-source-check to proceed anyway\)", SKIP_SOURCE_CHECK),
    )
)

# Advice clauses of the CLI, removed from a detail (with the option they name, if it lifts the refusal).
_ADVICE: tuple[tuple[re.Pattern[str], str, str | None], ...] = tuple(
    (re.compile(pattern), replacement, remedy)
    for pattern, replacement, remedy in (
        (r"; (?:use|pass) --overwrite to replace (?:them|the set)", "", OVERWRITE),
        (r" \(--skip-source-check to proceed anyway\)", "", SKIP_SOURCE_CHECK),
        (r"; --force to evict anyway", "", FORCE),
        (r",? or --force if it really is the cache root", "", FORCE),
        (r"\?? --force to proceed", "?", FORCE),
        (r"[;:]? ?(?:re-run with|use) --break-lock[^;)]*", "", BREAK_LOCK),
        (r"; it is still running, so --break-lock leaves it", "", None),
        (r"; re-run with --wait SECONDS to wait for it", "; try again once it has finished", None),
        (r"; it did not finish within --wait ([\d.]+)s", r"; it did not finish within \1s", None),
        (r" \(--output-dir\)|; --output-dir\)", "", None),
        (r"\(--output-dir must be outside it; ", "(it must be outside it; ", None),
        (r"; --yes removes it", "", None),
        (r" \(select it with --key or --invalid\)", "", None),
        (r"never evicted by --max-gb", "never evicted to make room under the cap", None),
        (r"kept \(--keep\)", "kept", None),
        (r"selected by --key", "selected", None),
    )
)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def strip_advice(text: str) -> tuple[str, str | None]:
    """``text`` without the CLI's advice clauses, and the option the advice named (if any)."""
    remedy = None
    for pattern, replacement, lifts in _ADVICE:
        text, count = pattern.subn(replacement, text)
        if count and lifts is not None and remedy is None:
            remedy = lifts
    return text, remedy


def has_flag(text: str) -> bool:
    """Whether a command-line flag (``--overwrite``) is still named in ``text``."""
    return _FLAG.search(text) is not None


def refusal_reason(refusal: HasFieldAndMessage) -> Reason:
    """A migration refusal (``core.migration.Refusal``) as a Reason."""
    message = refusal.message
    prefix = f"{refusal.field}: "
    body = message[len(prefix):] if message.startswith(prefix) else message
    for field_name, code, pattern, remedy in _REFUSALS:
        if field_name != refusal.field:
            continue
        match = pattern.fullmatch(body)
        if match:
            values = tuple((k, v) for k, v in match.groupdict().items() if v is not None)
            detail, _ = strip_advice(body)
            return Reason(code, refusal.field, values, detail, remedy)
    detail, remedy = strip_advice(body)
    return Reason(f"{refusal.field}.other", refusal.field, (), detail, remedy)


_SKIPS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("in_use", re.compile(r"(?P<why>.*); --force to evict anyway", re.DOTALL)),
    ("kept", re.compile(r"kept \(--keep\)")),
    ("missing", re.compile(r"no such entry in the cache")),
    ("symlink_not_sized", re.compile(r"symlinked entry: never evicted by --max-gb.*", re.DOTALL)),
    ("mounted", re.compile(r"(?:(?P<name>[^:]*): )?(?P<why>(?:is itself a mount point|contains a mount point).*)",
                           re.DOTALL)),
    ("leftover_busy", re.compile(r"(?P<name>[^:]*): (?P<why>eviction by pid (?P<pid>\d+) may still be running.*)",
                                 re.DOTALL)),
)


def skip_reason(skipped: HasKeyAndReason) -> Reason:
    """Why a selected cache entry is left in place (``core.cache.SkippedEntry``) as a Reason."""
    for code, pattern in _SKIPS:
        match = pattern.fullmatch(skipped.reason)
        if match:
            values = tuple((k, v) for k, v in match.groupdict().items() if v is not None)
            detail, remedy = strip_advice(skipped.reason)
            return Reason(code, "key", (("key", skipped.key), *values), detail, remedy)
    detail, remedy = strip_advice(skipped.reason)
    return Reason("other", "key", (("key", skipped.key),), detail, remedy)


def reasons_by_code(reasons: Mapping[str, Reason] | list[Reason]) -> dict[str, list[Reason]]:
    """Group reasons by code (a summary line per kind)."""
    items = reasons.values() if isinstance(reasons, Mapping) else reasons
    grouped: dict[str, list[Reason]] = {}
    for reason in items:
        grouped.setdefault(reason.code, []).append(reason)
    return grouped
