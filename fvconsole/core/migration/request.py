"""What an operator asks a migration for, and the refusals a preview collects (data only).

Below both :mod:`.inputs` (which checks the request's sources) and :mod:`.plan` (which
assembles the preview), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from fvconsole.core.shared.reasons import Reason, invalid


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


class Collector:
    """Accumulates refusals and warnings, each a :class:`Reason`."""

    def __init__(self) -> None:
        self.refusals: list[Refusal] = []
        self.notes: list[Reason] = []

    def refuse(self, field_name: str, message: str) -> None:
        """A refusal with no code of its own: ``message`` names no flag and no remedy."""
        self.add(invalid(field_name, message))

    def add(self, why: Reason) -> None:
        """Keep ``why``; a key's own value refused (``training.distributed.num_gpus: must be an integer``)
        goes before the config's mismatch report, which that bad value also shows up in: the real cause first."""
        refusal = Refusal(why)
        if why.field.startswith("training."):
            mismatch = next((i for i, r in enumerate(self.refusals) if r.field == "config"), None)
            if mismatch is not None:
                self.refusals.insert(mismatch, refusal)
                return
        self.refusals.append(refusal)

    def warn(self, message: str) -> None:
        """A warning with no code of its own: ``message`` names no flag."""
        self.notes.append(invalid("warning", message))
