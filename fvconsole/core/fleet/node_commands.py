"""What each node of a fleet is asked to run, built in one place from typed values.

``fleet cache ls|evict|verify`` and the console's fleet view run the ordinary headless
commands on every node. Their command lines are built here only, from typed values (the
eviction's :class:`~fvconsole.core.cache.selectors.EvictionSelectors`, seconds, cache keys),
never from the login node's own command line: a node gets exactly what the login node
validated, each number written so that it parses back to the same value (``--grace 5m``
reaches a node as ``--grace 300s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fvconsole.core.cache.selectors import EvictionSelectors, exact_number
from fvconsole.core.shared import flags


def _seconds(value: float) -> str:
    return exact_number(value) + "s"


def _grace(grace: float | None) -> tuple[str, ...]:
    """``--grace Ns`` (None: the node's own default)."""
    return (flags.GRACE, _seconds(grace)) if grace is not None else ()


@dataclass(frozen=True)
class NodeEviction:
    """What each node's ``cache evict`` is asked: the selectors, and what changes its re-check.

    ``grace`` None is the node's default (10m); ``force`` also entries in use or being written;
    ``wait`` (execution only): how long a node waits for another evictor of its root.
    """

    selectors: EvictionSelectors
    grace: float | None = None
    force: bool = False
    wait: float | None = None

    @property
    def protections(self) -> tuple[str, ...]:
        """Flags that change each node's re-check, never what is selected."""
        return ((flags.FORCE,) if self.force else ()) + _grace(self.grace)

    def preview_args(self, root: str) -> tuple[str, ...]:
        """The dry run on a node: ``cache evict ROOT <selectors> <protections> --json``."""
        return ("cache", "evict", root, *self.selectors.argv(), *self.protections, flags.JSON)

    def execute_args(self, root: str, keys: Sequence[str]) -> tuple[str, ...]:
        """Exactly the keys a node's preview planned: ``cache evict ROOT --key K ... <protections> --yes``
        (the node writes no journal line: the login side records the fleet eviction once)."""
        wait = (flags.WAIT, exact_number(self.wait)) if self.wait is not None else ()
        return ("cache", "evict", root, *EvictionSelectors(keys=tuple(keys)).argv(), *self.protections, *wait,
                flags.YES, flags.JSON, flags.NO_JOURNAL)


def ls_args(root: str, grace: float | None = None) -> tuple[str, ...]:
    """``cache ls ROOT --json`` (with the login node's ``--grace``)."""
    return ("cache", "ls", root, flags.JSON, *_grace(grace))


def verify_args(root: str, keys: Sequence[str] = (), deep: bool = False) -> tuple[str, ...]:
    """``cache verify ROOT --json`` (``--key K`` ..., ``--deep``)."""
    picked = tuple(a for key in keys for a in (flags.KEY, key))
    return ("cache", "verify", root, flags.JSON, *picked, *((flags.DEEP,) if deep else ()))
