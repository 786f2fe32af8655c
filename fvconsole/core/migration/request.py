"""What an operator asks a migration for, and the refusals a preview collects (data only).

Below both :mod:`.inputs` (which checks the request's sources) and :mod:`.plan` (which
assembles the preview), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fvconsole.core.shared.reasons import INVALID, Reason, reason


@dataclass(frozen=True)
class MigrationRequest:
    """What the operator asks for; the three expected/consumed numbers are confirmations."""

    config_path: str
    checkpoint: str
    output_dir: str
    expected_step: int
    expected_world_size: int
    consumed_batches_per_rank: int
    overrides: tuple[str, ...] = ()
    overwrite: bool = False
    skip_source_check: bool = False
    #: The elastic-resume mode (``next-epoch``, ``epoch-start``, ``nearest``; None: no reshard chosen).
    reshard: str | None = None

    def to_json(self) -> dict:
        # ``reshard`` only when chosen: a migration on the checkpoint's own topology prints as it always has.
        extra = {} if self.reshard is None else {"reshard": self.reshard}
        return {
            "config_path": self.config_path,
            "checkpoint": self.checkpoint,
            "output_dir": self.output_dir,
            "expected_step": self.expected_step,
            "expected_world_size": self.expected_world_size,
            "consumed_batches_per_rank": self.consumed_batches_per_rank,
            "overrides": list(self.overrides),
            "overwrite": self.overwrite,
            "skip_source_check": self.skip_source_check,
            **extra,
        }


@dataclass(frozen=True)
class Refusal:
    """One reason not to migrate (``why``: code, values, flag-free detail, remedy) that each front end words.

    ``message``, the command line's wording, starts with the field and names both values;
    ``to_json`` is the field and that message.
    """

    why: Reason

    @property
    def field(self) -> str:
        return self.why.field

    @property
    def message(self) -> str:
        return f"{self.why.field}: {self.why.cli}"

    @property
    def reason(self) -> Reason:
        """``why`` under the name :class:`~fvconsole.core.shared.errors.FvError` gives it."""
        return self.why

    @property
    def code(self) -> str:
        return self.why.code

    def to_json(self) -> dict:
        return {"field": self.field, "message": self.message}


@dataclass(frozen=True)
class Finding:
    """A refusal or a warning as data: the catalogue's ``code``, the ``field`` and the ``values`` it names.

    The checks record findings and the preview words them once, at the end (:meth:`Collector.refusals`),
    so a check hands its values down to the catalogue in one place instead of wording each on the spot.
    """

    code: str
    field: str
    values: tuple[tuple[str, Any], ...] = ()

    def reason(self) -> Reason:
        return reason(self.code, self.field, **dict(self.values))


def _worded(item: Reason | Finding) -> Reason:
    return item.reason() if isinstance(item, Finding) else item


class Collector:
    """Accumulates refusals and warnings as data (:class:`Finding`, or a :class:`Reason` another module worded)."""

    def __init__(self) -> None:
        self._refusals: list[Reason | Finding] = []
        self._notes: list[Reason | Finding] = []

    @property
    def refusals(self) -> list[Refusal]:
        """Every refusal so far, worded."""
        return [Refusal(_worded(item)) for item in self._refusals]

    @property
    def notes(self) -> list[Reason]:
        """Every warning so far, worded."""
        return [_worded(item) for item in self._notes]

    @property
    def refusing(self) -> bool:
        return bool(self._refusals)

    @property
    def count(self) -> int:
        """How many refusals so far (where a later one is to be placed among them)."""
        return len(self._refusals)

    def refuse(self, field_name: str, message: str, *, at: int | None = None) -> None:
        """A refusal with no code of its own: ``message`` names no flag and no remedy (``at``: its place)."""
        finding = Finding(INVALID, field_name, (("text", message),))
        if at is None:
            self._put(finding)
        else:
            self._refusals.insert(at, finding)

    def refused(self, code: str, field_name: str, **values: Any) -> None:
        """The catalogue's refusal ``code`` about ``field_name`` naming ``values``, worded at the end."""
        self._put(Finding(code, field_name, tuple(values.items())))

    def add(self, why: Reason) -> None:
        """A refusal another module already worded."""
        self._put(why)

    def _put(self, item: Reason | Finding) -> None:
        """Keep ``item``; a key's own value refused (``training.distributed.num_gpus: must be an integer``)
        goes before the config's mismatch report, which that bad value also shows up in: the real cause first."""
        if item.field.startswith("training."):
            mismatch = next((i for i, r in enumerate(self._refusals) if r.field == "config"), None)
            if mismatch is not None:
                self._refusals.insert(mismatch, item)
                return
        self._refusals.append(item)

    def warn(self, message: str) -> None:
        """A warning with no code of its own: ``message`` names no flag."""
        self._notes.append(Finding(INVALID, "warning", (("text", message),)))

    def note(self, why: Reason) -> None:
        """A warning another module already worded."""
        self._notes.append(why)
