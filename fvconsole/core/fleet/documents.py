"""What a node sends back, read into typed records: the runner's envelope and its command's JSON.

A node's answer is data from another machine (another fvconsole version, a broken install, a
hostile prolog). Its frames were decoded by the untrusted-document door (``core/shared/untrusted.py:
decode``: size, depth, strict numbers); here each part is read by type and range through that
door's ``Fields`` into the records the fleet aggregates: the runner's :class:`ResultEnvelope`; a
``cache ls --json`` as a :class:`NodeListing` of :class:`~fvconsole.core.cache.model.CacheEntry`
(the records the node's own listing is made of, read back by ``CacheEntry.from_json``); a
``cache evict --json`` as a :class:`NodeEviction`; a ``cache verify --json`` as a
:class:`NodeVerification` holding a :class:`~fvconsole.core.cache.verify.CacheVerification`.
A field of the wrong type or range makes *that node* ``invalid``, with one line naming the
node, the document and the field (``n3: cache ls JSON entries[3] field 'bytes' must be an
integer (got string)``), never a TypeError for the whole run or a silent zero. The document
itself is kept as the node sent it (``NodeOutcome.output``): ``--json`` passes it on untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.model import MAX_UID, CacheEntry
from fvconsole.core.cache.verify import CacheVerification
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.untrusted import Fields, parse_reason

LS = "cache-ls"
EVICT = "cache-evict"
VERIFY = "cache-verify"

#: Each kind's document as the messages name it (what the node ran).
DOCUMENTS = {LS: "cache ls JSON", EVICT: "cache evict JSON", VERIFY: "cache verify JSON"}
#: The runner's ``exit``: an exit status a process can have.
EXIT_MIN, EXIT_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True)
class ResultEnvelope:
    """The runner's envelope (``cli/node.py: envelope``): the command's exit code and JSON, or why there is none."""

    exit: int | None  # None: no exit code (the node's own time limit ran out first)
    output: dict[str, Any] | None  # the command's JSON document, as the node sent it
    invalid_output: str | None  # what the command printed instead, cut short
    reason: Reason | None  # its refusal as data; None also for a code this side does not know
    timeout: float | None  # set when the node's time limit ran out

    @classmethod
    def from_json(cls, payload: Any, node: str) -> ResultEnvelope:
        """UntrustedError naming ``node``, the envelope and the field when it does not fit."""
        f = Fields(payload, node, "result")
        code = f.int("exit", None, min=EXIT_MIN, max=EXIT_MAX)
        output, invalid = f.object("output", None), f.str("invalid_output", None)
        reason = f.object("reason", None)
        parsed = None if reason is None else parse_reason(reason, node, "result's reason")
        return cls(code, output, invalid, parsed, f.number("timeout", None))


@dataclass(frozen=True)
class NodeAnswer:
    """What any node's document may say: why its command failed (every failed command's JSON has ``error``).

    ``answered``: the command exited 0, so its main list must be there.
    """

    error: str | None

    @classmethod
    def from_json(cls, doc: Any, node: str, *, answered: bool) -> NodeAnswer:
        del answered  # a document of no known kind has no main list
        return cls(Fields(doc, node, "the command's JSON").str("error", None))


def _owner(uid: int | None, root_uid: int | None) -> int | None:
    """Whose entry it is on its node: the entry directory's owner, else the root's."""
    return uid if uid is not None else root_uid


@dataclass(frozen=True)
class NodeListing(NodeAnswer):
    """A node's ``cache ls --json``: its root, filesystem, cap and entries (``CacheScan.envelope``)."""

    root: str | None
    root_uid: int | None
    cap: int | None  # the cap FastVideo's GC applies there (None: unknown)
    fs_free: int | None
    fs_total: int | None
    entries: tuple[CacheEntry, ...]

    @classmethod
    def from_json(cls, doc: Any, node: str, *, answered: bool) -> NodeListing:
        what = DOCUMENTS[LS]
        f = Fields(doc, node, what)
        head = (f.str("error", None), f.str("root", None), f.int("root_uid", None, max=MAX_UID),
                f.int("cap_bytes", None), f.int("fs_free_bytes", None), f.int("fs_total_bytes", None))
        items = f.list("entries") if answered else f.list("entries", [])
        return cls(*head, tuple(CacheEntry.from_json(e, node, f"{what} entries[{i}]") for i, e in enumerate(items)))

    def owner(self, entry: CacheEntry) -> int | None:
        """Whose ``entry`` is on this node: the entry directory's owner, else the root's."""
        return _owner(entry.owner_uid, self.root_uid)

    @property
    def owners(self) -> tuple[int, ...]:
        """The root's uid and every entry's owner, sorted (an older node sends none)."""
        uids = {self.root_uid} | {e.owner_uid for e in self.entries}
        return tuple(sorted(u for u in uids if u is not None))


@dataclass(frozen=True)
class EvictionItem:
    """One entry a node's ``cache evict`` planned (a dry run) or removed (``--yes``)."""

    key: str
    owner_uid: int | None  # the entry directory's owner (a plan's; an execution's items have none)


@dataclass(frozen=True)
class NodeEviction(NodeAnswer):
    """A node's ``cache evict --json`` (``EvictionPlan.envelope`` or ``LockedEviction.envelope``)."""

    note: str | None
    freed_bytes: int  # freed, or what the plan would free
    root_uid: int | None
    evict: tuple[EvictionItem, ...]
    #: The node's free-space target cannot be reached there, so its plan evicts nothing for it
    #: (its preview's ``free_target.evicted_for_target`` false; ``--best-effort`` would).
    target_held_back: bool = False

    @classmethod
    def from_json(cls, doc: Any, node: str, *, answered: bool) -> NodeEviction:
        what = DOCUMENTS[EVICT]
        f = Fields(doc, node, what)
        head = (f.str("error", None), f.str("note", None), f.int("freed_bytes", 0), f.int("root_uid", None, max=MAX_UID))
        items = f.list("evict") if answered else f.list("evict", [])
        target = f.object("free_target", None)
        held = target is not None and Fields(target, node, f"{what} free_target").bool("evicted_for_target", True) is False
        return cls(*head, tuple(_item(e, node, f"{what} evict[{i}]") for i, e in enumerate(items)), held)

    def owner(self, item: EvictionItem) -> int | None:
        return _owner(item.owner_uid, self.root_uid)


def _item(doc: Any, node: str, what: str) -> EvictionItem:
    f = Fields(doc, node, what)
    return EvictionItem(f.str("key"), f.int("owner_uid", None, max=MAX_UID))


@dataclass(frozen=True)
class NodeVerification(NodeAnswer):
    """A node's ``cache verify --json``: its verification (``CacheVerification.envelope``), or only why it failed."""

    verification: CacheVerification | None  # None: the command failed before verifying anything

    @classmethod
    def from_json(cls, doc: Any, node: str, *, answered: bool) -> NodeVerification:
        del answered  # a verification that found problems exits 1 with its full answer: ``entries`` decides
        what = DOCUMENTS[VERIFY]
        f = Fields(doc, node, what)
        error = f.str("error", None)
        checked = error is None or f.list("entries", None) is not None
        return cls(error, CacheVerification.from_json(doc, node, what) if checked else None)


#: The record each kind of document is read into.
READERS: dict[str, type[NodeAnswer]] = {LS: NodeListing, EVICT: NodeEviction, VERIFY: NodeVerification}


def read_document(kind: str | None, doc: Any, node: str, *, answered: bool) -> NodeAnswer:
    """``doc`` (node ``node``'s command JSON) as ``kind``'s record; UntrustedError naming node, document and field."""
    return READERS.get(kind or "", NodeAnswer).from_json(doc, node, answered=answered)
