"""What an operator asks a migration for, and the refusals a preview finds (data only).

Below :mod:`.inputs` and :mod:`.sources` (which read and check the request's sources) and
:mod:`.plan` (which assembles the preview), so none imports another for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fvconsole.core.shared.reasons import Reason, reason


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

    The checks return findings and the preview words them once, at the end (:func:`refusals_of`),
    so a check hands its values down to the catalogue in one place instead of wording each on the spot.
    """

    code: str
    field: str
    values: tuple[tuple[str, Any], ...] = ()

    def reason(self) -> Reason:
        return reason(self.code, self.field, **dict(self.values))


#: A refusal as a check returns it: worded by another module (:class:`Reason`) or a :class:`Finding`.
Found = Reason | Finding


def _worded(item: Found) -> Reason:
    return item.reason() if isinstance(item, Finding) else item


def refusals_of(found: tuple[Found, ...]) -> tuple[Refusal, ...]:
    """Every refusal a preview found, worded, in the order an operator reads them.

    A key's own value refused (``training.distributed.num_gpus: must be an integer``) goes
    before the config's mismatch report found earlier, which that bad value also shows up in:
    the real cause first.
    """
    at = next((i for i, item in enumerate(found) if item.field == "config"), None)
    if at is not None:
        later = found[at + 1:]
        found = (*found[:at], *(item for item in later if item.field.startswith("training.")), found[at],
                 *(item for item in later if not item.field.startswith("training.")))
    return tuple(Refusal(_worded(item)) for item in found)
