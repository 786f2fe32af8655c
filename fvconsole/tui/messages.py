"""Every message of the console, in one place: what workers and widgets post up to a view.

Data flows down as reactive attributes (a view sets its own reactives; its widgets are bound
to them or watch them) and events flow up as these messages. A worker never touches a widget:
it calls the core in its thread and posts one of the messages below to the view that started
it (``BaseView.deliver``), and the view's handler (``on_<message name>``, from the class name:
``MigrationPreviewed`` → ``on_migration_previewed``) sets the view's state on the event loop.
Worker results never bubble (``ViewMessage``); a widget's own messages (``FormEdited``,
``FormSubmitted``) bubble to the view that holds it. ``FastTable.Sorted`` stays with its table,
as Textual's widgets keep theirs. The plain data a message carries that no module below this
one defines lives here too (``EvictSelection``, ``EvictOptions``: the eviction dialog's choice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

from fvconsole.core.cache import (
    CacheEntry,
    CacheEntryDetail,
    CacheScan,
    EntryVerification,
    EvictionPlan,
    EvictionResult,
    EvictionSelectors,
    LockedEviction,
)
from fvconsole.core.checkpoints import CheckpointDetail
from fvconsole.core.journal import JournalRead, JournalWrite
from fvconsole.core.migration import (
    MigrationPlan,
    MigrationPreview,
    MigrationResult,
    NextSampleIds,
    VerifyResult,
)
from fvconsole.core.preflight import PreflightReport
from fvconsole.core.retention import LockedPrune, PrunePlan

if TYPE_CHECKING:
    from fvconsole.tui.checkpoints.rows import CheckpointRow
    from fvconsole.tui.state import ConsoleState


class ViewMessage(Message, bubble=False):
    """A worker's result for the view that started it (never bubbles to the app)."""


@dataclass
class WorkFailed(ViewMessage):
    """A worker raised: ``error`` is shown as a notification unless the view handles it."""

    error: BaseException


@dataclass
class StateLoaded(Message):
    """The app's worker read the run config (or failed to) and resolved the paths."""

    state: ConsoleState


# ------------------------------------------------------------ view 1: checkpoints

@dataclass
class CheckpointsListed(ViewMessage):
    path: str
    rows: list[CheckpointRow]


@dataclass
class CheckpointsListFailed(ViewMessage):
    error: BaseException


@dataclass
class PrunePlanned(ViewMessage):
    """The marked checkpoints judged on a fresh scan: what the confirmation shows."""

    plan: PrunePlan


@dataclass
class CheckpointsPruned(ViewMessage):
    done: LockedPrune


@dataclass
class PruneFailed(ViewMessage):
    error: BaseException


@dataclass
class CheckpointDetailRead(ViewMessage):
    row: CheckpointRow
    detail: CheckpointDetail
    #: The detail pane's claim the read was started with (``tui/base.py: Claim``).
    claim: int


@dataclass
class PreflightJudged(ViewMessage):
    """A resume preflight's verdict: for the loaded config's resume, or (``selected``) the selected checkpoint."""

    report: PreflightReport
    selected: bool
    #: The claim on the pane it fills (``tui/base.py: Claim``): the panel's, or (``selected``) the detail pane's.
    claim: int


@dataclass
class PreflightFailed(ViewMessage):
    error: BaseException
    selected: bool
    claim: int


# ------------------------------------------------------------ view 2: migration

@dataclass
class MigrationPreviewed(ViewMessage):
    preview: MigrationPreview


@dataclass
class MigrationExecuted(ViewMessage):
    result: MigrationResult
    journal: JournalWrite | None = None


@dataclass
class MigrationVerified(ViewMessage):
    result: VerifyResult


@dataclass
class MigrationActionFailed(ViewMessage):
    error: BaseException
    journal: JournalWrite | None = None  # a migration that failed part-way is journaled too


@dataclass
class NextIdsRead(ViewMessage):
    plan: MigrationPlan
    result: NextSampleIds | None
    error: BaseException | None = None


class FormEdited(Message):
    """A field or box of the migration form changed (the shown plan no longer matches it)."""


class FormSubmitted(Message):
    """Enter in a field of a view's form (migration: preview; fleet: scan)."""


# ------------------------------------------------------------ view 3: shard cache

@dataclass
class CacheScanned(ViewMessage):
    scan: CacheScan


@dataclass
class CacheScanFailed(ViewMessage):
    error: BaseException


@dataclass
class CacheDetailRead(ViewMessage):
    entry: CacheEntry
    detail: CacheEntryDetail


@dataclass
class CacheVerified(ViewMessage):
    results: tuple[EntryVerification, ...]
    stamps: dict[str, int | None]


@dataclass(frozen=True)
class EvictSelection:
    """Which eviction dialog opened: what it selects before its fields are read (``to_cap``: the
    cap field selects; ``to_free``: the free-space target must be set)."""

    what: str  # "evict marked", "evict to cap", "evict invalid", "evict to free space"
    keys: tuple[str, ...] = ()
    invalid: bool = False
    to_cap: bool = False
    to_free: bool = False  # the free-space target is what selects (so it must be set)


@dataclass(frozen=True)
class EvictOptions:
    """What the eviction dialog (``tui/cache/evict_dialog.py``) hands back to the cache view: the
    selectors (the value ``cache evict`` builds) and whether to force. Plain data, here below
    both the dialog and the view (the planning worker's message carries it)."""

    selection: EvictSelection
    selectors: EvictionSelectors
    force: bool


@dataclass
class EvictionPlanned(ViewMessage):
    options: EvictOptions
    scan: CacheScan
    plan: EvictionPlan


@dataclass
class CacheEvicted(ViewMessage):
    done: LockedEviction

    @property
    def plan(self) -> EvictionPlan:
        return self.done.plan

    @property
    def result(self) -> EvictionResult:
        return self.done.result


@dataclass
class EvictionFailed(ViewMessage):
    error: BaseException


# ------------------------------------------------------------ view 4: fleet

@dataclass
class FleetScanned(ViewMessage):
    view: Any


@dataclass
class FleetPreviewed(ViewMessage):
    what: str
    root: str
    plan: Any


@dataclass
class FleetExecuted(ViewMessage):
    result: Any
    journal: JournalWrite | None = None  # the runner's journal line (None: nothing was asked of any node)


@dataclass
class FleetFailed(ViewMessage):
    error: BaseException


# ------------------------------------------------------------ view 5: history

@dataclass
class HistoryRead(ViewMessage):
    read: JournalRead


@dataclass
class HistoryReadFailed(ViewMessage):
    path: str
    error: BaseException
