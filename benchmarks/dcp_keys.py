"""Prototype: read the state-dict keys of ``dcp/.metadata`` without importing torch.

Importing ``torch.distributed.checkpoint`` costs ~2 s of CPU, more than a third of the
4096-rank x 1M-row-group dry run. The file is a pickle of a few torch dataclasses; only the
keys of ``state_dict_metadata`` are needed to tell a legacy checkpoint (keys ``dataloader.*``)
from the others. This unpickler resolves every torch class to an inert stub (no torch import,
no code from the file is run: anything outside the allow-list is refused), then takes the keys
from the ``Metadata`` object's state. On any surprise it returns None and the caller uses torch
as before. Proposed for ``fvconsole/core/checkpoints.py::dcp_state_keys`` (see the README).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

_ALLOWED_PREFIXES = ("torch.", "pathlib.")
_ALLOWED_MODULES = ("torch", "pathlib", "collections", "copyreg")


class _Stub:
    """Stands in for any allowed class or function: records arguments and state, runs nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


def _stub_factory(name: str) -> Any:
    return type(name, (_Stub,), {})


class _StubUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module in _ALLOWED_MODULES or module.startswith(_ALLOWED_PREFIXES):
            if module == "collections" and name == "OrderedDict":
                return dict
            return _stub_factory(name)
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def _state_dict(obj: Any) -> dict | None:
    state = getattr(obj, "state", None)
    if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
        merged: dict = {}
        for part in state:
            if isinstance(part, dict):
                merged.update(part)
        state = merged
    return state if isinstance(state, dict) else None


def dcp_state_keys_without_torch(data: bytes) -> list[str] | None:
    """Sorted state-dict keys of a DCP ``.metadata`` pickle, or None if it is not the expected shape."""
    try:
        obj = _StubUnpickler(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - any surprise means "ask torch"
        return None
    if type(obj).__name__ != "Metadata":
        return None
    state = _state_dict(obj)
    if state is None or not isinstance(state.get("state_dict_metadata"), dict):
        return None
    keys = list(state["state_dict_metadata"])
    if not all(isinstance(k, str) for k in keys):
        return None
    return sorted(keys)
