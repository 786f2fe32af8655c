"""The Parquet columns FastVideo's streaming loader projects, per ``training.data.preprocessed_data_type``.

Why: the loader keeps a streaming manifest only while its ``columns`` equal the projection
of the run's schema, name for name and in order; otherwise it rebuilds the manifest at
resume, reading every Parquet footer, and fails on a file that lacks a projected column
(docs/formats.md §4, "Which columns the loader projects"). fvconsole says beforehand which
will happen, so it needs the column names of each schema.

The facts come from FastVideo's branch ``motion-stream/causal-kernel`` (the newest training
branch, the one with the streaming loader and this key):

- ``fastvideo/dataset/dataloader/schema.py``: ``pyarrow_schema_t2v``,
  ``pyarrow_schema_i2v_track``, ``pyarrow_schema_text_only`` (the names below, in order);
- ``fastvideo/train/utils/config.py``: the key's value is
  ``str(value or "t2v").strip().lower()`` and must be one of the three;
- ``fastvideo/train/models/wan/wan.py`` (``t2v``, ``text_only``) and
  ``fastvideo/train/models/wantrack/wantrack.py`` (``i2v_track``): which schema each value projects;
- ``fastvideo/dataset/parquet_dataset_streaming_style.py``: ``columns = tuple(schema.names)``,
  compared with the manifest's ``columns`` as lists.

The table is fvconsole's own, typed from those files; no FastVideo code is used. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The run config key, dotted.
TYPE_PATH = "training.data.preprocessed_data_type"
#: What FastVideo takes when the key is absent, null or empty.
DEFAULT_TYPE = "t2v"

_VIDEO_METADATA = ("file_name", "caption", "media_type", "width", "height", "num_frames", "duration_sec", "fps")


def _tensor(name: str) -> tuple[str, str, str]:
    """A tensor stored as three columns: its raw bytes, its shape and its dtype."""
    return (f"{name}_bytes", f"{name}_shape", f"{name}_dtype")


#: The projected columns of each value, in the schema's order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "t2v": ("id", *_tensor("vae_latent"), *_tensor("text_embedding"), *_VIDEO_METADATA),
    "i2v_track": ("id", *_tensor("vae_latent"), *_tensor("text_embedding"), *_tensor("first_frame_latent"),
                  *_tensor("clip_feature"), *_tensor("track_points"), *_tensor("track_visibility"),
                  *_tensor("object_ids"), *_tensor("track_weights"), *_VIDEO_METADATA),
    "text_only": ("id", *_tensor("text_embedding"), "caption"),
}


@dataclass(frozen=True)
class DataType:
    """The value FastVideo will use, and how the run config spelled it (None: absent)."""

    name: str
    written: Any

    @property
    def columns(self) -> tuple[str, ...]:
        return COLUMNS[self.name]

    @property
    def defaulted(self) -> bool:
        """The run config does not set it (absent, null or empty): FastVideo takes ``t2v``."""
        return not self.written


def data_type(value: Any) -> DataType | None:
    """The type FastVideo makes of a run config's value (None or "" → ``t2v``); None when FastVideo refuses it.

    FastVideo takes ``str(value or "t2v").strip().lower()``: ``0`` and ``false`` are ``t2v`` too,
    and a number or a list is refused like an unknown name.
    """
    name = str(value or DEFAULT_TYPE).strip().lower() if isinstance(value, (str, int, float, bool)) or not value \
        else None
    return DataType(name, value) if name in COLUMNS else None
