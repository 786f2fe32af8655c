"""Fleet-wide views built from per-node ``cache ls`` / ``cache evict`` documents (pure functions).

Each node's document arrives read into typed records (``documents.py``: a :class:`NodeListing`
of ``CacheEntry``, a :class:`NodeEviction`), so the views here read attributes, never the
node's JSON. Everything is linear in the total number of (node, entry) pairs, so a thousand
nodes with thousands of entries each stays cheap; nothing here touches Slurm or disk.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from fvconsole.core.cache.gc_order import lru_walk
from fvconsole.core.cache.model import CacheEntry
from fvconsole.core.cache.selectors import RECLAIMABLE_STATUSES
from fvconsole.core.fleet.dispatch import FleetRun, NodeSelection
from fvconsole.core.fleet.documents import NodeEviction, NodeListing
from fvconsole.core.fleet.hostlist import compress_hostlist
from fvconsole.core.fleet.outcomes import KINDS, NodeOutcome
from fvconsole.core.fleet.slurm_state import SlurmJob, SlurmState
from fvconsole.core.shared.errors import EXIT_OK, EXIT_PARTIAL, EXIT_REFUSED
from fvconsole.core.shared.reasons import Reason
from fvconsole.core.shared.untrusted import UntrustedError

#: Statuses meaning "this node's copy has its manifest.json".
WITH_MANIFEST = ("complete", "partial")
#: Statuses an eviction with --invalid would take (what "reclaimable" means per node).
RECLAIMABLE = RECLAIMABLE_STATUSES

PER_NODE_MANIFEST = (
    "FastVideo writes manifest.json from global rank 0 only, so with a node-local cache "
    "(FASTVIDEO_WEIGHT_SHARD_CACHE_PER_NODE=1) only rank 0's node ever gets a usable entry; "
    "the other nodes keep shards without a manifest, never hit (the all-ranks vote then makes "
    "every launch a full load) and their copies look oldest to the built-in GC. Evicting the "
    "incomplete copies frees their space, but the next launch writes them again."
)


@dataclass(frozen=True)
class NodeCacheSummary:
    """One node's line in the fleet table."""

    node: str
    ok: bool
    error: str | None
    entries: int
    total_bytes: int
    statuses: tuple[tuple[str, int], ...]
    reclaimable_bytes: int  # invalid + incomplete + empty entries: what `evict --invalid` would free
    over_cap_bytes: int | None  # what `evict --max-gb` (the node's cap) would free; None: cap unknown
    fs_free: int | None
    fs_total: int | None
    root: str | None
    cap: int | None = None
    #: Why the node failed, as data (when it said): what the console words.
    reason: Reason | None = None
    #: Entries live processes on that node hold open or mapped (its `cache ls` ``in_use_by``).
    in_use: int = 0
    #: The cache's owners on that node: the root's uid and every entry's, as the node reports them.
    owners: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "error": self.error, "entries": self.entries, "total_bytes": self.total_bytes,
            "statuses": dict(self.statuses), "reclaimable_bytes": self.reclaimable_bytes,
            "over_cap_bytes": self.over_cap_bytes, "cap_bytes": self.cap, "fs_free_bytes": self.fs_free, "fs_total_bytes": self.fs_total, "root": self.root,
            "in_use_entries": self.in_use, "owner_uids": list(self.owners),
        }


@dataclass(frozen=True)
class KeyRow:
    """One cache key across the fleet: its status and size on each node that holds it."""

    key: str
    statuses: tuple[tuple[str, str], ...]  # (node, status)
    sizes: tuple[tuple[str, int], ...]  # (node, bytes)

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.sizes)

    def nodes_with(self, statuses: Iterable[str]) -> tuple[str, ...]:
        wanted = set(statuses)
        return tuple(node for node, status in self.statuses if status in wanted)


@dataclass(frozen=True)
class Finding:
    """Something an operator should know about one key across nodes."""

    key: str
    kind: str
    message: str
    nodes: tuple[str, ...]

    def to_json(self, sets: NodeSets) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "message": self.message, "nodes": sets.fold(self.nodes)}


class NodeSets:
    """The node sets a document names per key (a key's nodes by status, its busy nodes, a finding's nodes):
    each folded once (a Slurm hostlist), and expanded once in the document's ``node_sets`` (hostlist -> names).

    Why: a node list beside every key's hostlist made the summary grow with nodes x keys (1,000 nodes with
    200 keys each: 2.2 MB of names); most keys share a few sets (every node complete), so the document grows
    with nodes + keys, and a script still reads the names without a hostlist expander.
    """

    def __init__(self) -> None:
        self._folded: dict[tuple[str, ...], str] = {}
        self.expanded: dict[str, list[str]] = {}

    def fold(self, nodes: Iterable[str]) -> str:
        """The set's hostlist (its names kept for ``node_sets``); a set seen before costs a hash, not a fold."""
        names = tuple(nodes)
        folded = self._folded.get(names)
        if folded is None:
            folded = self._folded[names] = compress_hostlist(names)
            self.expanded.setdefault(folded, list(names))
        return folded


def _grouped(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(node, label) pairs -> (label, its nodes in order), labels sorted."""
    grouped: dict[str, list[str]] = {}
    for node, label in pairs:
        grouped.setdefault(label, []).append(node)
    return sorted(grouped.items())


def nodes_by(pairs: Iterable[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """(node, label) pairs -> {label: {"count": n, "nodes": hostlist, "node_list": [node, ...]}}, labels sorted.

    For sets that together name each node once (the outcomes): each folded (a Slurm hostlist, short) and
    expanded (``node_list``: a script needs no hostlist expander). Per key, :func:`statuses_json`."""
    return {label: {"count": len(nodes), "nodes": compress_hostlist(nodes), "node_list": nodes}
            for label, nodes in _grouped(pairs)}


def statuses_json(pairs: Iterable[tuple[str, str]], sets: NodeSets) -> dict[str, dict[str, Any]]:
    """A key's (node, status) pairs -> {status: {"count": n, "nodes": hostlist}}; the names are in ``sets``."""
    return {label: {"count": len(nodes), "nodes": sets.fold(nodes)} for label, nodes in _grouped(pairs)}


@dataclass(frozen=True)
class FleetCacheView:
    """The aggregated ``fleet cache ls``."""

    selection: NodeSelection
    outcomes: tuple[NodeOutcome, ...]
    nodes: tuple[NodeCacheSummary, ...]
    keys: tuple[KeyRow, ...]
    findings: tuple[Finding, ...]
    fanout: str = ""
    job_steps: int = 0
    #: Slurm's state of the nodes (one squeue, one sinfo); None: not read.
    slurm: SlurmState | None = None

    @property
    def total_bytes(self) -> int:
        return sum(n.total_bytes for n in self.nodes)

    @cached_property
    def busy(self) -> dict[str, tuple[tuple[SlurmJob, ...], frozenset[str]]]:
        """node -> (jobs of the cache's owners running there, keys of the entries whose owner runs one).

        Only nodes that answered and run such a job; empty when Slurm's jobs are unknown.
        """
        if self.slurm is None or not self.slurm.jobs_known:
            return {}
        out = {}
        for n, outcome in zip(self.nodes, self.outcomes, strict=True):
            jobs = self.slurm.busy_jobs(n.node, n.owners) if n.ok else None
            if not jobs:
                continue
            uids = {j.uid for j in jobs}
            listing = outcome.listing
            out[n.node] = (jobs, frozenset(e.key for e in listing.entries if listing.owner(e) in uids))
        return out

    def node_busy(self, node: str) -> bool | None:
        """A job of the cache's owner runs on ``node``; None: unknown (Slurm not read, or the node failed)."""
        if node in self.busy:
            return True
        if self.slurm is None or not self.slurm.jobs_known:
            return None
        summary = self._summaries.get(node)
        return False if summary is not None and summary.ok else None

    @cached_property
    def _summaries(self) -> dict[str, NodeCacheSummary]:
        return {n.node: n for n in self.nodes}

    def slurm_json(self, node: str) -> dict[str, Any] | None:
        """One node's Slurm state, jobs and busy verdict (``--json``), or None when Slurm was not read."""
        if self.slurm is None:
            return None
        found = self.slurm.get(node)
        jobs, keys = self.busy.get(node, ((), frozenset()))
        return {"state": found.state if found else None,
                "jobs": [j.to_json() for j in found.jobs] if found else [],
                "busy": self.node_busy(node), "busy_jobs": [j.job_id for j in jobs], "busy_entries": sorted(keys)}

    def _slurm_doc(self) -> dict[str, Any] | None:
        if self.slurm is None:
            return None
        return {"ok": not self.slurm.unknown, "note": self.slurm.note, "problems": list(self.slurm.problems),
                "busy_nodes": compress_hostlist(self.busy), "busy_node_list": list(self.busy)}

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.outcomes)

    def outcome_counts(self) -> dict[str, dict[str, Any]]:
        """kind -> {count, nodes}, in KINDS order."""
        grouped = nodes_by((o.node, o.kind) for o in self.outcomes)
        return {kind: grouped[kind] for kind in KINDS if kind in grouped}

    def to_summary_json(self) -> dict[str, Any]:
        """The default ``--json``: sized by keys and statuses, not by nodes x entries.

        Per key: bytes fleet-wide and the nodes holding it by status (compressed hostlists);
        per node: its outcome and totals, or its error. ``--full`` gives every node's own
        document instead (about 1 KiB per cache entry per node). The per-key node sets are hostlists,
        each expanded once in ``node_sets`` (:class:`NodeSets`).
        """
        sets = NodeSets()
        nodes: dict[str, Any] = {}
        for n, outcome in zip(self.nodes, self.outcomes, strict=True):
            if not outcome.ok:
                nodes[n.node] = {"outcome": outcome.kind, "error": outcome.error}
                continue
            nodes[n.node] = {"outcome": outcome.kind, "entries": n.entries, "total_bytes": n.total_bytes,
                             "reclaimable_bytes": n.reclaimable_bytes, "over_cap_bytes": n.over_cap_bytes,
                             "fs_free_bytes": n.fs_free}
        if self.slurm is not None:
            for node, doc in nodes.items():
                doc["slurm"] = self.slurm_json(node)
        keys = {
            row.key: {"bytes": row.total_bytes, "nodes": len(row.statuses), "statuses": statuses_json(row.statuses, sets)}
            for row in self.keys
        }
        if self.slurm is not None and self.slurm.jobs_known:  # unknown is not "on no node"
            for row in self.keys:
                keys[row.key]["busy_nodes"] = sets.fold(n for n, _ in row.statuses if self.entry_busy(n, row.key))
        findings = [f.to_json(sets) for f in self.findings]
        return {
            "form": "summary",
            "outcomes": self.outcome_counts(),
            "nodes": nodes,
            "keys": keys,
            "node_sets": sets.expanded,
            "total_bytes": self.total_bytes,
            "findings": findings,
            "selection": self.selection.to_json(),
            "dispatch": {"fanout": self.fanout, "job_steps": self.job_steps},
            "slurm": self._slurm_doc(),
        }

    def entry_busy(self, node: str, key: str) -> bool:
        """The entry ``key`` on ``node`` is owned by a user whose job runs there ("node busy")."""
        found = self.busy.get(node)
        return found is not None and key in found[1]

    def to_json(self) -> dict[str, Any]:
        """The full form (``--full --json``): every node's own ``cache ls`` document.

        With Slurm's state read, each node's document gets ``slurm`` and each of its entries
        ``node_busy`` (the node's own keys are left as it sent them).
        """
        nodes = {o.node: o.to_json() for o in self.outcomes}
        summary = {n.node: n.to_json() for n in self.nodes}
        if self.slurm is not None:
            for o in self.outcomes:
                doc = nodes[o.node] = dict(nodes[o.node])
                doc["slurm"] = summary[o.node]["slurm"] = self.slurm_json(o.node)
                if o.ok and o.listing.entries:  # the node's own entries, each with its verdict added
                    doc["entries"] = [{**sent, "node_busy": self.entry_busy(o.node, entry.key)}
                                      for sent, entry in zip(doc["entries"], o.listing.entries, strict=True)]
        sets = NodeSets()
        findings = [f.to_json(sets) for f in self.findings]
        return {
            "nodes": nodes,
            "keys": {row.key: dict(row.statuses) for row in self.keys},
            "node_sets": sets.expanded,
            "total_bytes": self.total_bytes,
            "summary": summary,
            "findings": findings,
            "selection": self.selection.to_json(),
            "dispatch": {"fanout": self.fanout, "job_steps": self.job_steps},
            "slurm": self._slurm_doc(),
        }


def exit_code_for(outcomes: Iterable[NodeOutcome], executing: bool = False) -> int:
    """0 all ok; 3 when a node failed while others succeeded (or a failed node may have acted); 1 otherwise."""
    outcomes = tuple(outcomes)
    failed = [o for o in outcomes if not o.ok]
    if not failed:
        return EXIT_OK
    if len(failed) < len(outcomes) or (executing and any(o.may_have_acted for o in failed)):
        return EXIT_PARTIAL
    return EXIT_REFUSED


def over_cap_bytes(entries: Sequence[CacheEntry], cap: int | None) -> int | None:
    """Bytes FastVideo's GC order would delete to bring the total to <= ``cap``.

    The walk of ``cache evict --max-gb`` (:func:`lru_walk`) over the node's entries;
    symlinked entries are never part of the size policy.
    """
    if cap is None:
        return None
    victims, _passed = lru_walk([e for e in entries if not e.is_symlink], cap)
    return sum(v.bytes for v in victims)


#: A node that did not answer: nothing listed.
_NOTHING = NodeListing(None, None, None, None, None, None, ())


def summarize_node(outcome: NodeOutcome) -> NodeCacheSummary:
    """Per-node totals from its ``cache ls`` document (zeros for a failed node)."""
    listing = outcome.listing if outcome.ok else _NOTHING
    entries = listing.entries
    return NodeCacheSummary(
        node=outcome.node, ok=outcome.ok, error=outcome.error, entries=len(entries),
        total_bytes=sum(e.bytes for e in entries),
        statuses=tuple(sorted(Counter(e.status for e in entries).items())),
        reclaimable_bytes=sum(e.bytes for e in entries if e.status in RECLAIMABLE),
        over_cap_bytes=over_cap_bytes(entries, listing.cap), fs_free=listing.fs_free, fs_total=listing.fs_total,
        root=listing.root, cap=listing.cap, reason=outcome.reason, in_use=sum(1 for e in entries if e.in_use_by),
        owners=listing.owners,
    )


def key_rows(outcomes: Iterable[NodeOutcome]) -> tuple[KeyRow, ...]:
    """Invert node -> entries into key -> node -> status, keys sorted."""
    statuses: dict[str, list[tuple[str, str]]] = {}
    sizes: dict[str, list[tuple[str, int]]] = {}
    for outcome in outcomes:
        if not outcome.ok:
            continue
        for entry in outcome.listing.entries:
            statuses.setdefault(entry.key, []).append((outcome.node, entry.status))
            sizes.setdefault(entry.key, []).append((outcome.node, entry.bytes))
    return tuple(KeyRow(k, tuple(statuses[k]), tuple(sizes[k])) for k in sorted(statuses))


def per_node_manifest_finding(row: KeyRow) -> Finding | None:
    """Complete/partial on some nodes and incomplete (no manifest) on others: the per-node pathology."""
    with_manifest = row.nodes_with(WITH_MANIFEST)
    without = row.nodes_with(("incomplete",))
    if not with_manifest or not without:
        return None
    have = ", ".join(f"{status} on {node}" for node, status in row.statuses if status in WITH_MANIFEST)
    if len(with_manifest) > 3:
        have = f"a manifest on {compress_hostlist(with_manifest)}"
    message = (
        f"{row.key}: {have}; incomplete (shards, no manifest.json) on {compress_hostlist(without)}. "
        + PER_NODE_MANIFEST
    )
    return Finding(row.key, "per-node-manifest", message, without)


def _listed(outcome: NodeOutcome) -> NodeOutcome:
    """``outcome`` with its listing read once (classification has read it; an outcome built by hand is read here)."""
    if not outcome.ok or isinstance(outcome.document, NodeListing):
        return outcome
    return replace(outcome, document=outcome.listing)


def aggregate_ls(run: FleetRun, slurm: SlurmState | None = None) -> FleetCacheView:
    """The fleet view of one ``cache ls`` run (with Slurm's state of its nodes, when read)."""
    outcomes = tuple(_listed(o) for o in run.outcomes)
    rows = key_rows(outcomes)
    findings = tuple(f for f in (per_node_manifest_finding(r) for r in rows) if f is not None)
    return FleetCacheView(
        selection=run.selection,
        outcomes=outcomes,
        nodes=tuple(summarize_node(o) for o in outcomes),
        keys=rows,
        findings=findings,
        fanout=run.steps.fanout,
        job_steps=run.job_steps,
        slurm=slurm,
    )


# --------------------------------------------------------------------------- eviction documents


def planned_keys(doc: NodeEviction | Mapping[str, Any]) -> tuple[str, ...]:
    """Keys a node's ``cache evict`` plans to remove (or removed), in plan order, each once.

    A document as the node sent it is read through :class:`NodeEviction` first; one that does
    not fit plans nothing (classification has made that node ``invalid``).
    """
    if not isinstance(doc, NodeEviction):
        try:
            doc = NodeEviction.from_json(doc, "node", answered=True)
        except UntrustedError:
            return ()
    return tuple(dict.fromkeys(i.key for i in doc.evict if i.key))
