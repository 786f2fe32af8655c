"""Every ``to_json`` covers its dataclass's fields: a new field is emitted, or said why not.

The plain ``to_json`` methods derive their JSON from the fields (``core/shared/fields_json.py``:
every field unless ``omit`` names it); the others are written by hand (their keys are the
documented JSON of the CLI, not the field names), so they drift: a field added to a record
and never emitted, a constant key that no longer says anything. This reads every class of
``fvconsole/`` that has a ``to_json`` (AST, no import) and checks that each dataclass field
is read by it, directly (``self.field``), through ``fields_json(self, ...)`` or through a
property or method of the class it calls, unless :data:`NOT_EMITTED` names the field with
the reason; and that a key with a constant value is one of :data:`CONSTANT_KEYS`.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "fvconsole"

#: "module path:Class" -> field -> why its ``to_json`` does not emit it.
NOT_EMITTED: dict[str, dict[str, str]] = {
    "core/preflight/model.py:Check": {
        "fix": "the text's `fix:` line and the console word it; the issue's JSON of a check is check, status, detail, ranks",
    },
    "core/formats/column_check.py:ColumnCheck": {
        "rebuilt_rows": "per-row-group rows of the predicted rebuild: what preflight lays the shards out with",
    },
    "core/cache/plan.py:EvictionPlan": {
        "real_root": "the resolved path execution re-checks against; `root` is the path as given",
    },
    "core/checkpoints/listing.py:CheckpointInfo": {
        "run_kind": "legacy checkpoints only: `checkpoints ls --json` adds it to each checkpoint as `run_kind`",
        "files": "what retention's scan judges by (`checkpoints prune`); `ls` shows the size",
        "newest_mtime": "what retention's scan judges ages by; `checkpoints prune` words the age in its reasons",
        "total_limit": "the embedded cleanup limit: `checkpoints ls --json` shows FastVideo's reading of it under `fastvideo`",
        "dcp_error": "the DCP metadata reader's line, which `problems` already holds; the migration warns it",
        "gaps": "why it is incomplete, typed, for the callers that decide by it (a prune's reason, a migration's "
                "warning); `complete` and `problems` say it",
    },
    "core/shared/locks/interface.py:LockState": {
        "mode": "`cache evict --yes --json`'s `lock` object predates shared holding: an eviction holds its root "
                "exclusively",
    },
    "core/retention/plan.py:PrunePlan": {
        "planned_at": "a monotonic clock reading: meaningless outside this process",
    },
    "core/retention/plan.py:KeptCheckpoint": {
        "complete": "the console's completeness column; the reason says it",
    },
    "core/retention/fastvideo.py:FastVideoOutlook": {
        "limit_source": "the text line names it; the issue's JSON shape is cleanup_limit, cleanup_deletes, latest",
        "cleanup_keeps_symlinks": "the text line names them; they are not in cleanup_deletes (rmtree refuses them)",
        "warnings": "`checkpoints ls --json` joins them to its own `warnings`",
    },
    "core/retention/plan.py:DoomedCheckpoint": {
        "files": "the progress line's count; `bytes` is the JSON's measure",
        "identity": "(st_dev, st_ino) execution re-checks against; meaningless to another process",
        "complete": "the reason says it (an interrupted save is selected by --incomplete only)",
        "leftover": "the reason says it (a leftover of an interrupted prune)",
    },
    "core/fleet/aggregate.py:NodeCacheSummary": {
        "node": "the key of its object in the parent's `summary`",
        "reason": "`error` as data for the console; the JSON carries its text as `error`",
    },
    "core/fleet/eviction.py:FleetEvictionPlan": {
        "root": "each node's own document (under `nodes`) names its root",
        "request": "what every node was asked (selectors, --grace, --force, --wait): the user's own command line",
        "requests": "the argv each node is sent; its planned keys are in that node's document",
    },
    "core/fleet/slurm_state.py:NodeSlurm": {
        "node": "the key of its object in the parent's `nodes`",
    },
    "core/fleet/outcomes.py:NodeOutcome": {
        "node": "the key of its object in the parent's `nodes`",
        "srun_exit": "srun's own status: the node's verdict is `failure` and the command's `exit_code`",
        "document": "`output` read into typed records for the fleet's views; the JSON is `output` as the node sent it",
    },
    "core/formats/manifest.py:Manifest": {
        "sample_starts": "per-row-group array: summarised as num_row_groups",
        "files": "per-row-group array: summarised as num_files",
        "row_group_ids": "per-row-group array: summarised as num_row_groups",
        "file_index": "per-row-group array: summarised as num_files",
        "columns": "per-row-group columns: summarised as num_row_groups",
        "raw": "the decoded document itself (up to 2 GiB)",
        "content_sha256": "the bytes' hash the migration plan re-checks; the plan's JSON emits it",
    },
    "core/migration/reshard.py:Reshard": {
        "batch_size": "the plan's `batch_size`; the global batch before and after is in the plan's `warnings`",
        "starts": "each target rank's `epoch` and `yielded_samples` are in the plan's `ranks`",
    },
    "core/migration/model.py:MigrationPlan": {
        "request": "MigrationPreview.to_json emits the request once, beside the plan",
        "mismatches": "MigrationPreview.to_json emits the mismatch report once, beside the plan",
        "output_dir_notes": "the preview's `warnings` carry them (they describe the dir, not the plan)",
    },
    "core/migration/write.py:MigrationResult": {
        "lock_notes": "each note is said when found (on_lock_note / on_warning); the journal line records them",
    },
    "core/shared/reasons.py:Reason": {
        "detail": "the wire form is code + values: the receiver words them (parse_reason)",
        "remedy": "the wire form is code + values: the receiver words them (parse_reason)",
    },
    "core/formats/runconfig.py:RunConfig": {
        "data": "the whole run config; `path` and `sha256` identify it",
    },
}

#: (Class, key) -> why a key's value is a constant.
CONSTANT_KEYS: dict[tuple[str, str], str] = {
    ("EvictionPlan", "executed"): "tells a dry run's object from an execution's (docs/cli.md)",
    ("EvictionResult", "executed"): "tells a dry run's object from an execution's (docs/cli.md)",
    ("FleetEvictionPlan", "executed"): "tells a dry run's object from an execution's (docs/cli.md)",
    ("FleetEvictionResult", "executed"): "tells a dry run's object from an execution's (docs/cli.md)",
    ("PrunePlan", "executed"): "tells a dry run's object from an execution's (docs/cli.md)",
    ("PruneResult", "executed"): "tells a dry run's object from an execution's (docs/cli.md)",
    ("MigrationResult", "executed"): "tells a dry run's object from an execution's (docs/cli.md)",
    ("EvictionPlan", "errors"): "a dry run has the execution's shape (docs/cli.md: `\"errors\": [...]`); "
                                "scripts read it in both modes, so it stays although a plan has none",
}


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for deco in cls.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if (getattr(target, "id", None) or getattr(target, "attr", None)) == "dataclass":
            return True
    return False


def _fields(cls: ast.ClassDef) -> list[str]:
    return [node.target.id for node in cls.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and "ClassVar" not in ast.unparse(node.annotation)]


def _self_attrs(node: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(node)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}


def _fields_json_calls(node: ast.AST) -> list[ast.Call]:
    """The ``fields_json(self, ...)`` calls in ``node``."""
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "fields_json"
            and n.args and getattr(n.args[0], "id", None) == "self"]


def _omitted(call: ast.Call) -> set[str]:
    return {name for k in call.keywords if k.arg == "omit" for name in ast.literal_eval(k.value)}


def _read_by_to_json(cls: ast.ClassDef) -> set[str]:
    """``self.X`` read by to_json, following the class's own properties and methods it uses."""
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    followed: set[str] = set()
    read: set[str] = set()
    todo = ["to_json"]
    while todo:
        name = todo.pop()
        if name in followed:
            continue
        followed.add(name)
        reads = _self_attrs(methods[name])
        if "__dict__" in reads:  # the whole instance
            return set(_fields(cls))
        for call in _fields_json_calls(methods[name]):  # every field it does not omit
            reads |= set(_fields(cls)) - _omitted(call)
        todo += [r for r in reads if r in methods]
        read |= reads
    return read


def _classes_with_to_json() -> dict[str, ast.ClassDef]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(f, ast.FunctionDef) and f.name == "to_json" for f in node.body):
                found[f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"] = node
    return found


CLASSES = _classes_with_to_json()


def test_the_scan_finds_the_json_records() -> None:
    # Independent anchors: records the CLI's --json is made of.
    for name in ("core/cache/plan.py:EvictionPlan", "core/cache/evict.py:EvictionResult",
                 "core/migration/model.py:MigrationPlan", "core/journal/log.py:JournalRecord",
                 "core/fleet/aggregate.py:FleetCacheView"):
        assert name in CLASSES
    assert len(CLASSES) >= 35


def test_every_to_json_reads_every_field_or_says_why_not() -> None:
    problems = []
    for name, cls in CLASSES.items():
        assert _is_dataclass(cls), f"{name}: a to_json on a class that is not a dataclass"
        read = _read_by_to_json(cls)
        excused = NOT_EMITTED.get(name, {})
        for field in _fields(cls):
            if field not in read and field not in excused:
                problems.append(f"{name}: field {field!r} is not in to_json (emit it, or add it to NOT_EMITTED "
                                "with the reason)")
    assert not problems, "\n".join(problems)


def test_no_stale_exclusions() -> None:
    for name, excused in NOT_EMITTED.items():
        assert name in CLASSES, f"{name}: no such class with a to_json"
        fields, read = _fields(CLASSES[name]), _read_by_to_json(CLASSES[name])
        for field, why in excused.items():
            assert field in fields, f"{name}: NOT_EMITTED names {field!r}, which is not a field"
            assert field not in read, f"{name}: {field!r} is emitted now; drop it from NOT_EMITTED"
            assert why.strip()


def test_constant_keys_are_the_documented_ones() -> None:
    found = set()
    for cls in CLASSES.values():
        to_json = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "to_json")
        renames = set()
        for call in _fields_json_calls(to_json):  # its keyword arguments are keys; `rename` maps field names
            for keyword in call.keywords:
                if keyword.arg == "rename":
                    renames.add(id(keyword.value))
                elif keyword.arg != "omit" and _is_constant(keyword.value):
                    found.add((cls.name, keyword.arg))
        for node in ast.walk(to_json):
            if not isinstance(node, ast.Dict) or id(node) in renames:
                continue
            for key, value in zip(node.keys, node.values, strict=True):
                if _is_constant(value) and isinstance(key, ast.Constant):
                    found.add((cls.name, key.value))
    assert found == set(CONSTANT_KEYS), (
        f"constant-valued keys not listed: {sorted(found - set(CONSTANT_KEYS))}; "
        f"listed but gone: {sorted(set(CONSTANT_KEYS) - found)}")


def _is_constant(value: ast.expr) -> bool:
    return (isinstance(value, ast.Constant)
            or (isinstance(value, (ast.List, ast.Tuple)) and not value.elts)
            or (isinstance(value, ast.Dict) and not value.keys))
