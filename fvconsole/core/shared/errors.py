"""Errors that front ends turn into exit codes and one-line messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fvconsole.core.shared.reasons import Reason

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3


class FvError(Exception):
    """A refusal caused by input the user controls: exit 1, one line, nothing written.

    The message must name the file and/or field at fault, e.g.
    ``"metadata.json: field 'step' must be an integer (got 'abc')"``.
    """

    exit_code = EXIT_REFUSED
    #: The error's stable code in JSON (``"code"``) when it carries no reason: one per error class.
    kind = "refused"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, reason: Reason | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = dict(details or {})
        #: The refusal as data (code, values, remedy) for front ends that word it themselves.
        self.reason = reason

    @classmethod
    def of(cls, reason: Reason, **kwargs: Any) -> FvError:
        """The error for ``reason``: its message is the command line's wording."""
        return cls(reason.cli, reason=reason, **kwargs)

    @property
    def error_code(self) -> str:
        """What a script tests instead of the message: the reason's code, else the error class's ``kind``."""
        return self.reason.code if self.reason is not None else self.kind

    def __str__(self) -> str:
        return self.message

    def with_details(self, details: dict[str, Any]) -> FvError:
        """The same error (message, reason, exit code) with a command's JSON fields: a new value, since an
        error that was raised is never changed."""
        if self.exit_code == EXIT_PARTIAL:
            return PartialFailure(self.message, report=details, reason=self.reason)
        kind = UsageError if self.exit_code == EXIT_USAGE else FvError
        return kind(self.message, details=details, reason=self.reason)


class UsageError(FvError):
    """The command line itself is wrong (exit 2)."""

    exit_code = EXIT_USAGE
    kind = "usage"


class PartialFailure(FvError):
    """Execution started, did part of its work, then failed (exit 3).

    ``report`` says what was done, for the JSON output and the operator.
    """

    exit_code = EXIT_PARTIAL
    kind = "partial_failure"

    def __init__(self, message: str, *, report: dict[str, Any] | None = None, reason: Reason | None = None) -> None:
        super().__init__(message, details=report, reason=reason)
        self.report = dict(report or {})
