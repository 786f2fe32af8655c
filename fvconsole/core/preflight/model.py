"""Preflight's records: one check's finding, the whole verdict, and how both are worded.

A check is one line (``ok``/``warn``/``fail``/``skip``, the check's name, a detail naming the
file, rank or config key); a per-rank finding carries its ranks, folded into ranges in the
detail (``ranks 0-7, 12``), never one line per rank. The verdict is ``go`` when no check fails
(with ``strict``, when none warns either); its last line is what an operator or a job script
reads: ``GO: resume checkpoint-300 (step 300) on 16 ranks`` or ``NO-GO: N blocking problems;
first: ...``. Both front ends lay these out; neither words them again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from fvconsole.core.migration.elastic import rank_ranges
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.humanize import plural

Status = Literal["ok", "warn", "fail", "skip"]
#: The checks in the order FastVideo meets them at resume (the cache is an optimisation, last).
CHECKS = ("resolve", "dcp", "config", "dataloader", "rng", "dataset", "room", "cache")
#: At most this many distinct per-rank findings of one check are shown; the rest are counted.
MAX_FINDINGS = 4


@dataclass(frozen=True)
class Check:
    """One finding of one check."""

    check: str
    status: Status
    detail: str
    #: The ranks this finding is about (None: not a per-rank finding).
    ranks: tuple[int, ...] | None = None
    #: The fvconsole command that fixes it, where one exists.
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        # Hand-written: the shape ("ranks" only where per rank); the fix is worded by `fix_line`.
        doc: dict[str, Any] = {"check": self.check, "status": self.status, "detail": self.detail}
        if self.ranks is not None:
            doc["ranks"] = list(self.ranks)
        return doc


def per_rank(check: str, findings: dict[tuple[Status, str, str | None], list[int]]) -> list[Check]:
    """Findings keyed by (status, message, fix) → their ranks, as folded lines: fails first, each
    message once with its rank ranges; past :data:`MAX_FINDINGS` of one status, one line counts the rest."""
    out: list[Check] = []
    for status in ("fail", "warn", "ok", "skip"):
        items = [(msg, fix, sorted(ranks)) for (s, msg, fix), ranks in findings.items() if s == status]
        items.sort(key=lambda item: item[2][0])
        for msg, fix, ranks in items[:MAX_FINDINGS]:
            out.append(Check(check, status, f"{rank_ranges(ranks)}: {msg}", tuple(ranks), fix))
        rest = items[MAX_FINDINGS:]
        if rest:
            ranks = sorted(r for _, _, rs in rest for r in rs)
            out.append(Check(check, status, f"{rank_ranges(ranks)}: {plural(len(rest), 'more finding')} "
                             f"like these (first: {rest[0][0]})", tuple(ranks), rest[0][1]))
    return out


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint FastVideo will resume from."""

    checkpoint: str
    step: int

    @property
    def name(self) -> str:
        return os.path.basename(self.checkpoint)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class PreflightReport:
    """The verdict on whether the next job resumes on every rank."""

    resume: ResumePoint | None
    world_size: int
    sp_size: int
    checks: tuple[Check, ...]
    strict: bool = False
    #: Where the inputs came from (the world size's source, the dataloader override dir as seen).
    notes: tuple[str, ...] = ()

    @property
    def blocking(self) -> tuple[Check, ...]:
        """The findings that make it a no-go: every fail, and with ``strict`` every warning."""
        stops = ("fail", "warn") if self.strict else ("fail",)
        return tuple(c for c in self.checks if c.status in stops)

    @property
    def go(self) -> bool:
        return not self.blocking

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(f"{c.check}: {c.detail}" for c in self.blocking)

    @property
    def verdict(self) -> str:
        """The last line: ``GO: ...`` or ``NO-GO: N blocking problems; first: ...``."""
        if self.go:
            ranks = plural(self.world_size, "rank")
            if self.resume is None:
                return f"GO: fresh start on {ranks} (no checkpoint to resume from)"
            return f"GO: resume {self.resume.name} (step {self.resume.step}) on {ranks}"
        first = self.blocking[0]
        return f"NO-GO: {plural(len(self.blocking), 'blocking problem')}; first: {first.check}: {first.detail}"

    @property
    def fix_line(self) -> str | None:
        """The command that fixes the first blocking problem, where one exists."""
        fix = next((c.fix for c in self.blocking if c.fix), None) if not self.go else None
        return None if fix is None else f"fix: {fix}"

    def statuses(self) -> dict[str, Status]:
        """Each check's worst status (fail > warn > ok > skip), in :data:`CHECKS` order."""
        rank = {"fail": 3, "warn": 2, "ok": 1, "skip": 0}
        worst: dict[str, Status] = {}
        for c in self.checks:
            if c.check not in worst or rank[c.status] > rank[worst[c.check]]:
                worst[c.check] = c.status
        return {name: worst[name] for name in CHECKS if name in worst}

    def to_json(self) -> dict[str, Any]:
        # Hand-written: the document (go, resume, world_size, sp_size, checks, problems); notes added.
        return {"go": self.go, "resume": None if self.resume is None else self.resume.to_json(),
                "world_size": self.world_size, "sp_size": self.sp_size, "strict": self.strict,
                "checks": [c.to_json() for c in self.checks], "problems": list(self.problems),
                "notes": list(self.notes)}


def ordered(checks: Iterable[Check]) -> tuple[Check, ...]:
    """Checks in :data:`CHECKS` order (stable within one check)."""
    return tuple(sorted(checks, key=lambda c: CHECKS.index(c.check)))
