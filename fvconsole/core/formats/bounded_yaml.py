"""YAML loading with bounded alias expansion and nesting (PyYAML's SafeLoader underneath).

Why: an alias is cheap to write and cheap for PyYAML to compose (the node is shared), but
everything after loading (the override deep copy, the mismatch report, JSON output, and
PyYAML's own ``<<`` merge flattening) walks the *expanded* tree. A 1.4 KB file of nested
aliases expands to billions of values (minutes of CPU, gigabytes of memory). So while
composing, each node's expanded size and height are computed from its children (an alias
counts as the whole node it names) and the document is refused as soon as either bound is
exceeded, before anything is constructed. Plain anchors and aliases (``<<: *defaults``)
stay well within the bounds.

This module imports PyYAML at import time; import it lazily (PyYAML is not needed for
``--help`` or the cache commands).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

from fvconsole.core.shared.errors import FvError

#: Values in the expanded document (every scalar, list and mapping counted once per place it
#: appears). A real run config has a few hundred.
MAX_YAML_VALUES = 1_000_000
#: Nesting of the expanded document. A real run config is < 10 deep; Python's recursive
#: walkers (deepcopy, ==, repr, json.dumps) need it far below the recursion limit.
MAX_YAML_DEPTH = 100


class YamlBoundsError(ComposerError):
    """The document expands beyond ``MAX_YAML_VALUES`` or nests beyond ``MAX_YAML_DEPTH``."""


class _BoundedSafeLoader(yaml.SafeLoader):
    """SafeLoader whose composer tracks each node's expanded size and height."""

    def __init__(self, stream: str, max_values: int, max_depth: int) -> None:
        super().__init__(stream)
        self._max_values = max_values
        self._max_depth = max_depth
        self._depth = 0
        #: id(node) -> (expanded size, height); nodes stay alive while composing, so ids are stable.
        self._measure: dict[int, tuple[int, int]] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            if id(node) not in self._measure:
                raise YamlBoundsError(None, None, "recursive YAML alias (a value that contains itself)", mark)
            _, height = self._measure[id(node)]
            if self._depth + height > self._max_depth:
                raise YamlBoundsError(None, None, f"alias expands to nesting deeper than {self._max_depth} levels", mark)
            return node
        mark = self.peek_event().start_mark
        self._depth += 1
        if self._depth > self._max_depth:
            raise YamlBoundsError(None, None, f"nested deeper than {self._max_depth} levels", mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        size, height = self._size_of(node)
        if size > self._max_values:
            raise YamlBoundsError(
                None, None, f"aliases expand the document to more than {self._max_values} values (alias bomb?)", mark
            )
        self._measure[id(node)] = (size, height)
        return node

    def _size_of(self, node: Node) -> tuple[int, int]:
        """(expanded size, height) of a just-composed node from its children's measures."""
        if isinstance(node, SequenceNode):
            children = [self._measure[id(child)] for child in node.value]
        elif isinstance(node, MappingNode):
            children = [self._measure[id(part)] for pair in node.value for part in pair]
        else:
            return 1, 1
        return 1 + sum(size for size, _ in children), 1 + max((height for _, height in children), default=0)


def load_yaml(text: str, *, max_values: int = MAX_YAML_VALUES, max_depth: int = MAX_YAML_DEPTH) -> Any:
    """``yaml.safe_load(text)`` with bounded expansion and depth (``YamlBoundsError`` beyond them).

    Other PyYAML errors (``yaml.YAMLError``), ``ValueError`` (impossible dates, integers beyond
    Python's digit limit) and ``RecursionError`` propagate for the caller to word.
    """
    loader = _BoundedSafeLoader(text, max_values, max_depth)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_error_line(exc: BaseException) -> str:
    """``line L, column C: problem`` of a PyYAML error, on one line."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return problem


def require_bounded_tree(value: Any, shown: str, what: str, *, max_values: int = MAX_YAML_VALUES,
                         max_depth: int = MAX_YAML_DEPTH) -> None:
    """Refuse a loaded value (e.g. a config after overrides) that is too big or too deep.

    Iterative, and it stops as soon as a bound is passed, so shared (aliased) subtrees and
    even cycles cost at most ``max_values`` steps.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > max_values:
            raise FvError(f"{shown}: {what} expands to more than {max_values} values; refusing to load it")
        if depth > max_depth:
            raise FvError(f"{shown}: {what} is nested more than {max_depth} levels deep; refusing to load it")
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for pair in node.items() for child in pair)
        elif isinstance(node, (list, tuple, set, frozenset)):
            stack.extend((child, depth + 1) for child in node)
