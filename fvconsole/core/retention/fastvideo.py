"""What FastVideo itself will do to an output dir: its cleanup after the next save, and ``latest``.

Why: FastVideo's ``CheckpointManager._cleanup_old_checkpoints`` runs on rank 0 after every save
with ``keep_last = int(training.checkpoint.checkpoints_total_limit or 0)``: it lists every
``checkpoint-<step>`` that ``is_dir()`` (symlinks followed, interrupted saves included), sorts
by step and ``rmtree``s all but the newest ``keep_last`` with ``ignore_errors=True``; a
symlink takes a slot but ``rmtree`` refuses it, so it stays. Its ``resume_from_checkpoint:
latest`` takes the highest step whose ``dcp/`` is a directory, complete or not. An operator
should see both before the next save, not after: interrupted saves take cleanup slots, so a
cleanup can leave fewer complete checkpoints than its limit, or delete the newest complete
one, and ``latest`` can pick an interrupted save.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fvconsole.core.checkpoints.listing import CheckpointInfo
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.reasons import Reason, reason
from fvconsole.core.shared.walk import listing

#: FastVideo's ``_CHECKPOINT_DIR_RE``.
FASTVIDEO_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
LIMIT_PATH = "training.checkpoint.checkpoints_total_limit"
_MISSING = object()


@dataclass(frozen=True)
class FastVideoOutlook:
    """FastVideo's cleanup after the next save, under its limit, and the checkpoint ``latest`` resumes from."""

    #: ``int(checkpoints_total_limit or 0)``; None when FastVideo could not read it (it would fail at start).
    cleanup_limit: int | None
    #: Where the limit was read: the run config given, or the newest checkpoint's embedded config (None: nowhere).
    limit_source: str | None
    #: Steps its cleanup removes right after the next save (symlinked ones take a slot but stay).
    cleanup_deletes: tuple[int, ...]
    #: Symlinked checkpoints the cleanup selects but cannot remove.
    cleanup_keeps_symlinks: tuple[int, ...]
    latest: int | None
    warnings: tuple[Reason, ...] = ()

    def to_json(self) -> dict[str, Any]:
        # The shape; the text line words the rest (source, symlinks) and `warnings` join ls's own.
        return {"cleanup_limit": self.cleanup_limit, "cleanup_deletes": list(self.cleanup_deletes),
                "latest": self.latest}


def fastvideo_limit(value: Any) -> int:
    """``int(value or 0)`` as FastVideo computes it; ValueError/TypeError/OverflowError as Python raises them."""
    if isinstance(value, float) and not math.isfinite(value):
        raise OverflowError(f"cannot convert float {value} to integer") if math.isinf(value) else ValueError(
            "cannot convert float NaN to integer")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if not re.fullmatch(r"[+-]?\d{1,30}", text):
            raise ValueError(f"invalid literal for int() with base 10: {value[:40]!r}")
        return int(text)
    if value is None or value is False or value == 0 or value == "":
        return 0
    if isinstance(value, (bool, int, float)):
        return int(value)
    raise TypeError(f"int() argument must be a string or a number, not '{type(value).__name__}'")


def _entries(output_dir: str) -> list[tuple[int, str, bool, bool]]:
    """(step, name, is a symlink, has a dcp/ dir) of every ``checkpoint-<step>`` that is a directory (followed)."""
    found = []
    with listing(output_dir) as entries:
        for entry in entries:
            match = FASTVIDEO_CHECKPOINT_RE.match(entry.name)
            if not match:
                continue
            try:
                if not entry.is_dir():  # follows a symlink, as pathlib's is_dir()
                    continue
            except OSError:
                continue
            path = os.path.join(output_dir, entry.name)
            found.append((int(match.group(1)), entry.name, entry.is_symlink(), os.path.isdir(os.path.join(path, "dcp"))))
    return sorted(found, key=lambda item: (item[0], item[1]))


def configured_limit(config: Any, infos: Sequence[CheckpointInfo]) -> tuple[Any, str | None]:
    """The raw ``checkpoints_total_limit``: from ``config`` (a loaded ``--config``), else the newest
    checkpoint's embedded config; (value, where) with value ``_MISSING`` when absent everywhere."""
    if config is not None:
        return config.get(LIMIT_PATH, None), "the run config"
    for info in sorted(infos, key=lambda i: -i.step):
        if info.has_config:
            return info.total_limit, f"the embedded config of {info.name}"
    return _MISSING, None


def fastvideo_outlook(output_dir: str, infos: Sequence[CheckpointInfo], config: Any = None) -> FastVideoOutlook:
    """What FastVideo's cleanup (after the next save) and ``latest`` will do in ``output_dir`` (reads only)."""
    try:
        entries = _entries(output_dir)
    except OSError as exc:
        raise FvError(f"{output_dir}: cannot list ({exc.strerror or exc})") from None
    raw, source = configured_limit(config, infos)
    warnings: list[Reason] = []
    limit: int | None
    try:
        limit = fastvideo_limit(None if raw is _MISSING else raw)
    except (ValueError, TypeError, OverflowError) as exc:
        limit = None
        warnings.append(reason("fastvideo.limit_unreadable", "config", path=LIMIT_PATH, source=source, why=exc))
    with_next = [(step, name, symlink) for step, name, symlink, _ in entries] + [(math.inf, "", False)]
    doomed = with_next[:-limit] if limit and limit > 0 and len(with_next) > limit else []
    deletes = tuple(int(step) for step, _, symlink in doomed if not symlink)
    symlinks = tuple(int(step) for step, _, symlink in doomed if symlink)
    latest = max(((step, name) for step, name, _, dcp in entries if dcp), default=None)
    complete = {i.step for i in infos if i.complete}
    if doomed and limit:
        survivors = {int(step) for step, _, _ in with_next[-limit:] if step != math.inf} | set(symlinks)
        left = len(survivors & complete) + 1
        if left < limit:
            warnings.append(reason("fastvideo.fewer_complete", "checkpoints", left=left, limit=limit,
                                   kept=plural(left, "complete checkpoint")))
        newest_complete = max(complete, default=None)
        if newest_complete is not None and newest_complete in deletes:
            warnings.append(reason("fastvideo.deletes_newest_complete", "checkpoints", step=newest_complete))
    return FastVideoOutlook(limit, source, deletes, symlinks, latest[0] if latest else None, tuple(warnings))
