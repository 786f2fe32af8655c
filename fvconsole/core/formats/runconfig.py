"""Run configs (YAML), launch-time dotted overrides, and the checkpoint-vs-config mismatch report.

FastVideo embeds the config *after* launch overrides in ``metadata.json``; a YAML file on disk
can differ from it exactly by those overrides, so the same ``a.b.c=value`` syntax is accepted
here to reproduce what was launched.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.safe_read import read_regular_file

#: docs/formats.md §2: the keys that decide the streaming dataloader layout, in this order.
CRITICAL_PATHS: tuple[str, ...] = (
    "training.distributed.num_gpus",
    "training.distributed.sp_size",
    "training.data.data_path",
    "training.data.dataloader_type",
    "training.data.streaming_manifest_path",
    "training.data.streaming_read_batch_size",
    "training.data.streaming_shuffle_row_groups",
    "training.data.dataloader_num_workers",
    "training.data.train_batch_size",
    "training.data.seed",
    "training.loop.gradient_accumulation_steps",
)


#: Read limit: far above any real file, far below what would exhaust memory.
MAX_CONFIG_BYTES = 64 * 2**20


class _Missing:
    """Sentinel type for an absent key (prints as ``<missing>``)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def get_path(mapping: Any, dotted: str, default: Any = MISSING) -> Any:
    """Value at a dotted path, or ``default`` when any step is absent or not a mapping."""
    node = mapping
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return default
        node = node[key]
    return node


@dataclass(frozen=True)
class TrainingKeys:
    """The values of a run config that fvconsole reads (docs/formats.md §2), as found: MISSING where absent.

    Read in one walk of the ``training`` mapping (:meth:`of`); a reader checks each value's
    type and range where it uses it, naming it by :data:`KEY_PATHS` and its source by :meth:`where`.
    """

    num_gpus: Any = MISSING
    sp_size: Any = MISSING
    train_batch_size: Any = MISSING
    streaming_read_batch_size: Any = MISSING
    gradient_accumulation_steps: Any = MISSING
    seed: Any = MISSING
    dataloader_num_workers: Any = MISSING
    streaming_shuffle_row_groups: Any = MISSING
    dataloader_type: Any = MISSING
    streaming_manifest_path: Any = MISSING
    data_path: Any = MISSING
    preprocessed_data_type: Any = MISSING
    output_dir: Any = MISSING
    #: (field, the override that set its value): a value from an override, not from the file.
    sources: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, mapping: Any, overrides: Sequence[str] = ()) -> TrainingKeys:
        """The keys of ``mapping`` (a run config's tree after ``overrides``), each section looked up once."""
        training = mapping.get("training") if isinstance(mapping, Mapping) else None
        values: dict[str, Any] = {}
        for name, dotted in KEY_PATHS.items():
            section = training.get(dotted.split(".")[1]) if isinstance(training, Mapping) else None
            if isinstance(section, Mapping) and name in section:
                values[name] = section[name]
        sources = tuple((name, override) for name, dotted in KEY_PATHS.items()
                        if (override := override_source(overrides, dotted)) is not None)
        return cls(**values, sources=sources)

    def override(self, name: str) -> str | None:
        """The override that set a field's value (or replaced a mapping above it), as given; None: the file's."""
        return dict(self.sources).get(name)

    def where(self, name: str, config: str) -> str:
        """Where a field's value came from: ``the override KEY=VALUE`` that set it, else ``config`` (the file)."""
        override = self.override(name)
        return config if override is None else f"the override {override}"

    @staticmethod
    def path(name: str) -> str:
        """A field's dotted path in the run config (``num_gpus`` → ``training.distributed.num_gpus``)."""
        return KEY_PATHS[name]


#: Each :class:`TrainingKeys` field's dotted path (every one is ``training.<section>.<field>``).
KEY_PATHS: dict[str, str] = {
    "num_gpus": "training.distributed.num_gpus",
    "sp_size": "training.distributed.sp_size",
    "train_batch_size": "training.data.train_batch_size",
    "streaming_read_batch_size": "training.data.streaming_read_batch_size",
    "gradient_accumulation_steps": "training.loop.gradient_accumulation_steps",
    "seed": "training.data.seed",
    "dataloader_num_workers": "training.data.dataloader_num_workers",
    "streaming_shuffle_row_groups": "training.data.streaming_shuffle_row_groups",
    "dataloader_type": "training.data.dataloader_type",
    "streaming_manifest_path": "training.data.streaming_manifest_path",
    "data_path": "training.data.data_path",
    "preprocessed_data_type": "training.data.preprocessed_data_type",
    "output_dir": "training.checkpoint.output_dir",
}


@dataclass(frozen=True)
class RunConfig:
    """A loaded run config: the mapping after overrides, plus where it came from."""

    path: str | None
    data: dict = field(repr=False)
    sha256: str | None
    overrides: tuple[str, ...] = ()

    def get(self, dotted: str, default: Any = MISSING) -> Any:
        return get_path(self.data, dotted, default)

    def source(self, dotted: str) -> str:
        """Where the value at ``dotted`` came from, for a one-line error: the override that set it, else the file."""
        override = override_source(self.overrides, dotted)
        return f"the override {override}" if override is not None else (self.path or "the run config")

    @cached_property
    def keys(self) -> TrainingKeys:
        """The values fvconsole reads, read once."""
        return TrainingKeys.of(self.data, self.overrides)

    def to_json(self) -> dict:
        return fields_json(self, omit=("data",))


def _parse_override(text: str) -> tuple[list[str], Any]:
    from fvconsole.core.formats.bounded_yaml import (
        MAX_YAML_DEPTH,
        YamlBoundsError,
        load_yaml,
        yaml_error_line,
    )

    key, sep, raw = text.partition("=")
    parts = _override_parts(key)
    if not sep or any(not p for p in parts):
        raise FvError(f"override {text!r}: expected dotted.key=value")
    if len(parts) > MAX_YAML_DEPTH:
        raise FvError(f"override {text[:80]!r}...: key has more than {MAX_YAML_DEPTH} parts")
    import yaml

    try:
        value = load_yaml(raw) if raw.strip() else ""
    except YamlBoundsError as exc:
        raise FvError(f"override {text[:200]!r}: value refused ({yaml_error_line(exc)})") from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        # ValueError: a date like 2001-02-30 or an integer beyond Python's digit limit.
        reason = " ".join(str(getattr(exc, "problem", None) or exc).split())[:200]
        raise FvError(f"override {text!r}: value is not valid YAML ({reason})") from None
    return parts, value


def _override_parts(key: str) -> list[str]:
    """An override's dotted key as its parts (a leading ``--`` and the space around each part dropped)."""
    return [part.strip() for part in key.strip().removeprefix("--").split(".")]


def override_source(overrides: Sequence[str], dotted: str) -> str | None:
    """The last of ``overrides`` that set the value at ``dotted`` (its key, or a mapping above it), as given."""
    found = None
    for text in overrides:
        key = ".".join(_override_parts(text.partition("=")[0]))
        if dotted == key or dotted.startswith(key + "."):
            found = text
    return found


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict:
    """Deep copy of ``data`` with each ``a.b.c=yaml-value`` applied (intermediates created)."""
    result = copy.deepcopy(dict(data))
    for text in overrides:
        parts, value = _parse_override(text)
        node: Any = result
        for depth, key in enumerate(parts[:-1]):
            if key not in node:
                node[key] = {}
            node = node[key]
            if not isinstance(node, dict):
                prefix = ".".join(parts[: depth + 1])
                raise FvError(f"override {text!r}: {prefix} is a {type(node).__name__}, not a mapping")
        node[parts[-1]] = value
    return result


def _yaml_kind(value: Any) -> str:
    """What a YAML document holds instead of a mapping, in YAML's words (never a Python type name)."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a single value"


def load_run_config(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> RunConfig:
    """Read a YAML run config (must be a mapping) and apply dotted overrides.

    Alias expansion and nesting are bounded while composing (``core.formats.bounded_yaml``), and the
    result after overrides once more, so every later walk of the tree is bounded too.
    """
    import yaml

    from fvconsole.core.formats.bounded_yaml import (
        YamlBoundsError,
        load_yaml,
        require_bounded_tree,
        yaml_error_line,
    )

    shown = os.fspath(path)
    try:
        raw = read_regular_file(os.path.expanduser(shown), "run config", MAX_CONFIG_BYTES)
    except OSError as exc:
        raise FvError(f"{shown}: cannot read run config ({exc.strerror or exc})") from None
    try:
        data = load_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise FvError(f"{shown}: run config is not UTF-8 text") from None
    except YamlBoundsError as exc:
        raise FvError(f"{shown}: run config refused at {yaml_error_line(exc)}") from None
    except yaml.YAMLError as exc:
        raise FvError(f"{shown}: invalid YAML at {yaml_error_line(exc)}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        # PyYAML raises plain ValueError for e.g. an impossible date or a 5000-digit integer.
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise FvError(f"{shown}: invalid YAML value ({reason})") from None
    if data is None:
        raise FvError(f"{shown}: run config is empty (a YAML mapping of the run's settings was expected)")
    if not isinstance(data, dict):
        raise FvError(f"{shown}: run config must be a YAML mapping (key: value lines), got {_yaml_kind(data)}")
    data = apply_overrides(data, overrides)
    require_bounded_tree(data, shown, "run config" + (" with its overrides" if overrides else ""))
    return RunConfig(
        path=os.path.abspath(os.path.expanduser(shown)),
        data=data,
        sha256=hashlib.sha256(raw).hexdigest(),
        overrides=tuple(overrides),
    )


# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Mismatch:
    """One differing key between the checkpoint's embedded config and the run config."""

    path: str
    checkpoint: Any
    config: Any
    critical: bool
    #: The override (``KEY=VALUE``, as given) that set the config side's value or a mapping above it;
    #: None: the value (or its absence) is the run config file's.
    set_by: str | None = None

    @property
    def missing(self) -> str | None:
        """Which side lacks the key ("checkpoint", "config" or "both"), if any."""
        if self.checkpoint is MISSING and self.config is MISSING:
            return "both"
        if self.checkpoint is MISSING:
            return "checkpoint"
        if self.config is MISSING:
            return "config"
        return None

    @property
    def override(self) -> str | None:
        """``path=value`` that makes the run config say what the checkpoint says (the launch's
        override that was not repeated), or None when no one override can (a side lacks the key,
        or the checkpoint's value does not read back the same)."""
        import json

        if self.missing or isinstance(self.checkpoint, (dict, list)):
            return None
        try:
            text = f"{self.path}={json.dumps(self.checkpoint)}"
            return text if _parse_override(text)[1] == self.checkpoint else None
        except (TypeError, ValueError, FvError):
            return None

    def to_json(self) -> dict:
        # Hand-written: MISSING is emitted as null and `missing` only when a side lacks the key.
        out = {
            "path": self.path,
            "checkpoint": None if self.checkpoint is MISSING else _jsonable(self.checkpoint),
            "config": None if self.config is MISSING else _jsonable(self.config),
            "critical": self.critical,
            "config_set_by": self.set_by,
        }
        if self.missing:
            out["missing"] = self.missing
        return out

    def source(self, config_file: str | None) -> str | None:
        """Where the config side came from: ``the override KEY=VALUE`` that set it, else ``config_file``."""
        return config_file if self.set_by is None else f"the override {self.set_by}"

    def describe(self, config_file: str | None = None) -> str:
        """``path: checkpoint=..., config=... (in WHERE)`` for one-line messages: WHERE is :meth:`source`
        (left out when neither an override nor ``config_file`` names it)."""
        left = "<missing>" if self.checkpoint is MISSING else repr(self.checkpoint)
        right = "<missing>" if self.config is MISSING else repr(self.config)
        where = self.source(config_file)
        return f"{self.path}: checkpoint={left}, config={right}" + (f" (in {where})" if where else "")


def _jsonable(value: Any) -> Any:
    """Plain JSON types (YAML may produce dates, sets, tuples...)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return str(value)


def _norm_path(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return os.path.realpath(os.path.expanduser(value))
        except ValueError:  # a NUL byte: no such path exists, so compare the raw text
            return value
    return value


def _norm_type(value: Any) -> Any:
    if isinstance(value, str):
        return "".join(value.split()).lower()
    return value


_NORMALIZERS = {
    "training.data.data_path": _norm_path,
    "training.data.dataloader_type": _norm_type,
}


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps bool apart from int (``True != 1`` for config purposes)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _leaves(mapping: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            _leaves(value, dotted + ".", out)
        else:
            out[dotted] = value


#: Keys that say where a launch starts, not how the run trains: a resumed job always differs from the
#: job that saved in them (FastVideo compares none of them), so the report leaves them out.
LAUNCH_ONLY_PATHS = frozenset({"training.checkpoint.resume_from_checkpoint"})


def compare_configs(checkpoint_cfg: Mapping[str, Any], run_cfg: Mapping[str, Any],
                    overrides: Sequence[str] = ()) -> tuple[Mismatch, ...]:
    """Critical mismatches (CRITICAL_PATHS order) then non-critical leaf differences (sorted), leaving
    out LAUNCH_ONLY_PATHS; ``overrides`` (those that made ``run_cfg``) name each row's ``set_by``."""
    rows = _compared(checkpoint_cfg, run_cfg)
    if not overrides:
        return rows
    return tuple(replace(m, set_by=override_source(overrides, m.path)) for m in rows)


def _compared(checkpoint_cfg: Mapping[str, Any], run_cfg: Mapping[str, Any]) -> tuple[Mismatch, ...]:
    rows: list[Mismatch] = []
    for path in CRITICAL_PATHS:
        old = get_path(checkpoint_cfg, path)
        new = get_path(run_cfg, path)
        if old is MISSING or new is MISSING:
            # Absent on either side (or both) cannot be shown equal: always a row.
            rows.append(Mismatch(path, old, new, True))
            continue
        norm = _NORMALIZERS.get(path, lambda v: v)
        if not _same(norm(old), norm(new)):
            rows.append(Mismatch(path, old, new, True))
    critical = set(CRITICAL_PATHS)
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    _leaves(checkpoint_cfg, "", left)
    _leaves(run_cfg, "", right)
    for path in sorted(set(left) | set(right)):
        if path in critical or path in LAUNCH_ONLY_PATHS or any(path.startswith(c + ".") for c in critical):
            continue
        old = left.get(path, MISSING)
        new = right.get(path, MISSING)
        if old is MISSING or new is MISSING or not _same(old, new):
            rows.append(Mismatch(path, old, new, False))
    return tuple(rows)
