"""A record's JSON from its dataclass fields: the one rule behind the plain ``to_json`` methods.

Why: hand-written methods listed each field and drifted (a field added, never emitted). Here
every field is emitted under its own name, a tuple as a list and a record as its own
``to_json`` (also inside a tuple); ``omit`` and ``rename`` say, explicitly, where the JSON
differs from the fields, and keyword arguments add (or replace) derived keys. A record whose
JSON has another shape keeps a hand-written method that says why (``tests/architecture/test_json_fields.py``
checks both kinds against the fields).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

_NAMES: dict[type, tuple[str, ...]] = {}


def fields_json(record: Any, *, omit: tuple[str, ...] = (), rename: Mapping[str, str] | None = None,
                **extra: Any) -> dict[str, Any]:
    """``record``'s fields as JSON data (declaration order), less ``omit``, keys per ``rename``, then ``extra``."""
    names = _NAMES.get(type(record))
    if names is None:
        names = _NAMES[type(record)] = tuple(f.name for f in dataclasses.fields(record))
    doc = {}
    for name in names:
        if name not in omit:
            doc[rename.get(name, name) if rename else name] = _plain(getattr(record, name))
    doc.update(extra)
    return doc


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    to_json = getattr(value, "to_json", None)
    return value if to_json is None else to_json()
