"""Which dataloader state a legacy checkpoint holds: streaming (migratable) or map-style (not).

The migration computes per-rank cursors of FastVideo's streaming Parquet loader; a run whose
``training.data.dataloader_type`` is anything else (FastVideo's map-style loader) saved a
sampler's state instead, which has no cursor to split into rank-local sidecars. Listing says
so per checkpoint, from the config embedded in its ``metadata.json``, before anyone opens the
migration form and meets the refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fvconsole.core.shared.fields_json import fields_json

Loader = Literal["streaming", "map-style", "unknown"]
TYPE_PATH = "training.data.dataloader_type"


@dataclass(frozen=True)
class RunKind:
    """The loader a checkpoint's run used, and whether its legacy state can be migrated."""

    loader: Loader
    dataloader_type: str | None  # the embedded config's value as written (None: absent)
    migratable: bool
    why: str | None  # why not, when not migratable

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


def run_kind(config: Any) -> RunKind:
    """The run kind from an embedded config (``metadata.json``'s ``config``)."""
    data = config.get("training") if isinstance(config, dict) else None
    data = data.get("data") if isinstance(data, dict) else None
    value = data.get("dataloader_type") if isinstance(data, dict) else None
    if not isinstance(value, str):
        why = f"the embedded config has no {TYPE_PATH}" if value is None else f"{TYPE_PATH} is not a string"
        return RunKind("unknown", None, False, why)
    if value.strip().lower() == "streaming":
        return RunKind("streaming", value, True, None)
    return RunKind("map-style", value, False,
                   f"{TYPE_PATH} is {value!r}: a map-style loader saves a sampler's state, not the "
                   "streaming loader's cursor that rank-local sidecars carry")
