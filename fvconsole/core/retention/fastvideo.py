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
from fvconsole.core.formats.runconfig import apply_overrides, get_path
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.reasons import Reason, reason
from fvconsole.core.shared.safe_read import short_repr
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
        # latest_resume_step: `latest` named for what it is (the step `resume_from_checkpoint: latest`
        # resumes from); `latest` stays for the scripts that read it.
        return {"cleanup_limit": self.cleanup_limit, "cleanup_deletes": list(self.cleanup_deletes),
                "latest": self.latest, "latest_resume_step": self.latest}


#: The types a run config's value can have (YAML's safe loader, JSON): ``int()`` of these runs no
#: code of the value's own, so FastVideo's expression is evaluated as it is, never imitated.
_PLAIN = (str, bytes, int, bool, float)


def fastvideo_limit(value: Any) -> int:
    """``int(value or 0)`` exactly as FastVideo computes it (Python's own ``int``, on plain values only);
    ValueError/TypeError/OverflowError as Python raises them: ``[]``, ``{}`` and ``''`` are 0, ``'_3'``
    and ``'3__0'`` raise, a 40-digit string is that number, ``b'3'`` (``!!binary Mw==``) is 3."""
    value = value or 0
    if type(value) not in _PLAIN:
        raise TypeError(f"int() argument must be a string, a bytes-like object or a real number, "
                        f"not '{type(value).__name__}'")
    return int(value)


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


def configured_limit(config: Any, infos: Sequence[CheckpointInfo],
                     overrides: Sequence[str] = ()) -> tuple[Any, str | None]:
    """The raw ``checkpoints_total_limit``: from ``config`` (a loaded ``--config``, its overrides
    applied), else the newest checkpoint's embedded config with ``overrides`` applied to it (as a run
    launched with them sees it); (value, where) with value ``_MISSING`` when absent everywhere."""
    if config is not None:
        return config.get(LIMIT_PATH, None), "the run config"
    for info in sorted(infos, key=lambda i: -i.step):
        if info.has_config:
            if overrides:
                return _overridden(info.total_limit, overrides), f"the embedded config of {info.name} with the overrides given"
            return info.total_limit, f"the embedded config of {info.name}"
    return _MISSING, None


def _overridden(raw: Any, overrides: Sequence[str]) -> Any:
    """The limit after ``overrides`` (FvError naming a malformed one), over the embedded value ``raw``."""
    base: dict = {} if raw is None else {"training": {"checkpoint": {"checkpoints_total_limit": raw}}}
    return get_path(apply_overrides(base, overrides), LIMIT_PATH, None)


def fastvideo_outlook(output_dir: str, infos: Sequence[CheckpointInfo], config: Any = None,
                      overrides: Sequence[str] = ()) -> FastVideoOutlook:
    """What FastVideo's cleanup (after the next save) and ``latest`` will do in ``output_dir`` (reads only).

    ``overrides``: the ``--set`` values, applied to the embedded config when there is no ``config``.
    """
    try:
        entries = _entries(output_dir)
    except OSError as exc:
        raise FvError(f"{output_dir}: cannot list ({exc.strerror or exc})") from None
    raw, source = configured_limit(config, infos, overrides)
    warnings: list[Reason] = []
    limit: int | None
    try:
        limit = fastvideo_limit(None if raw is _MISSING else raw)
    except (ValueError, TypeError, OverflowError) as exc:
        limit = None
        warnings.append(reason("fastvideo.limit_unreadable", "config", path=LIMIT_PATH, source=source,
                               value=short_repr(raw), why=f"{type(exc).__name__}: {exc}"))
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
