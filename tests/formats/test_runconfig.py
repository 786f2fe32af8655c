"""Run config loading, dotted overrides and the checkpoint-vs-config comparison."""

from __future__ import annotations

import copy
import json
import os

import pytest

from fvconsole.core.formats.runconfig import (
    CRITICAL_PATHS,
    MISSING,
    apply_overrides,
    compare_configs,
    get_path,
    load_run_config,
)
from fvconsole.core.shared.errors import FvError
from fvconsole.demo.builders import run_config, write_run_config


def _cfg(tmp_path, **kw):
    return run_config(data_path=str(tmp_path / "data"), manifest_path=str(tmp_path / "m.json"),
                      output_dir=str(tmp_path / "out"), **kw)


def test_critical_paths_are_the_eleven_of_formats_in_order() -> None:
    assert len(CRITICAL_PATHS) == 11
    assert CRITICAL_PATHS[0] == "training.distributed.num_gpus"
    assert CRITICAL_PATHS[-1] == "training.loop.gradient_accumulation_steps"
    assert CRITICAL_PATHS[2:4] == ("training.data.data_path", "training.data.dataloader_type")


def test_load_yaml_with_overrides_and_sha(tmp_path) -> None:
    path = write_run_config(tmp_path / "run.yaml", _cfg(tmp_path))
    cfg = load_run_config(path, ["training.distributed.num_gpus=32", "training.data.streaming_shuffle_row_groups=false",
                                 "new.section.key=[1, 2]", "--training.data.seed=7"])
    assert cfg.get("training.distributed.num_gpus") == 32
    assert cfg.get("training.data.streaming_shuffle_row_groups") is False
    assert cfg.get("new.section.key") == [1, 2]
    assert cfg.get("training.data.seed") == 7
    assert cfg.get("no.such.key") is MISSING
    assert cfg.overrides[0] == "training.distributed.num_gpus=32"
    assert len(cfg.sha256) == 64 and cfg.path == path
    # The file itself is untouched by overrides.
    assert load_run_config(path).get("training.distributed.num_gpus") == 8


def test_apply_overrides_deep_copies() -> None:
    data = {"a": {"b": 1}}
    out = apply_overrides(data, ["a.b=2", "a.c.d=x"])
    assert data == {"a": {"b": 1}} and out == {"a": {"b": 2, "c": {"d": "x"}}}


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("training.distributed.num_gpus", "expected dotted.key=value"),
        ("=5", "expected dotted.key=value"),
        ("a..b=1", "expected dotted.key=value"),
        ("training.loop=[1, 2", "not valid YAML"),
        ("training.distributed.num_gpus.x=1", "training.distributed.num_gpus is a int, not a mapping"),
    ],
)
def test_bad_override_names_the_override(tmp_path, override, fragment) -> None:
    path = write_run_config(tmp_path / "run.yaml", _cfg(tmp_path))
    with pytest.raises(FvError) as info:
        load_run_config(path, [override])
    assert override in str(info.value) and fragment in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, kind", [("- a\n- b\n", "got a list"), ("42\n", "got a number"),
                                        ("", "is empty")])
def test_non_mapping_yaml_is_refused_naming_the_file(tmp_path, text, kind) -> None:
    """In YAML's words, never a Python type name ("got NoneType" for an empty file: issue 38 item 14)."""
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(FvError) as info:
        load_run_config(path)
    assert str(path) in str(info.value) and "mapping" in str(info.value) and kind in str(info.value)
    assert "NoneType" not in str(info.value) and " int" not in str(info.value)


def test_yaml_syntax_error_names_file_and_line(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("training:\n  data:\n    seed: 1\n  loop: [1, 2\n  other: 3\n")
    with pytest.raises(FvError) as info:
        load_run_config(path)
    message = str(info.value)
    assert str(path) in message and "line " in message and "\n" not in message


def test_missing_file_is_fv_error(tmp_path) -> None:
    with pytest.raises(FvError, match="cannot read run config"):
        load_run_config(tmp_path / "absent.yaml")


def test_identical_configs_have_no_rows(tmp_path) -> None:
    cfg = _cfg(tmp_path)
    assert compare_configs(cfg, copy.deepcopy(cfg)) == ()


def test_the_resume_key_is_no_mismatch(tmp_path) -> None:
    """A resumed job's resume_from_checkpoint always differs from the job that saved (which had none or
    another): it says where the launch starts, not how the run trains, so it is no row either way."""
    cfg = _cfg(tmp_path)
    resumed = copy.deepcopy(cfg)
    resumed["training"]["checkpoint"]["resume_from_checkpoint"] = "latest"
    assert compare_configs(cfg, resumed) == ()
    other = copy.deepcopy(resumed)
    other["training"]["checkpoint"]["resume_from_checkpoint"] = "/elsewhere/checkpoint-100"
    assert compare_configs(other, resumed) == ()


def test_critical_rows_first_then_sorted_non_critical(tmp_path) -> None:
    old = _cfg(tmp_path)
    new = _cfg(tmp_path, seed=7, num_gpus=16, max_train_steps=5)
    new["training"]["tracker"]["project_name"] = "other"
    rows = compare_configs(old, new)
    assert [r.path for r in rows if r.critical] == ["training.distributed.num_gpus", "training.data.seed"]
    non = [r.path for r in rows if not r.critical]
    assert non == sorted(non)
    assert "training.loop.max_train_steps" in non and "training.tracker.project_name" in non
    assert "training.distributed.hsdp_shard_dim" in non  # derived from num_gpus by the builder
    seed = next(r for r in rows if r.path == "training.data.seed")
    assert seed.to_json() == {"path": "training.data.seed", "checkpoint": 42, "config": 7, "critical": True,
                              "config_set_by": None}
    assert "checkpoint=42" in seed.describe() and "config=7" in seed.describe()
    json.dumps([r.to_json() for r in rows])


def test_each_row_names_the_override_that_set_its_config_value(tmp_path) -> None:
    """A row an override made names it (the last that set the key or a mapping above it); the file's rows none."""
    old = _cfg(tmp_path)
    overrides = ("training.data.seed=8", "training.data.seed=7", "training.loop={max_train_steps: 5}")
    new = apply_overrides(_cfg(tmp_path, num_gpus=16), overrides)
    rows = {r.path: r for r in compare_configs(old, new, overrides)}
    assert rows["training.data.seed"].set_by == "training.data.seed=7"
    assert rows["training.loop.max_train_steps"].set_by == "training.loop={max_train_steps: 5}"
    assert rows["training.distributed.num_gpus"].set_by is None  # the file's 16
    assert rows["training.data.seed"].describe("run.yaml") == (
        "training.data.seed: checkpoint=42, config=7 (in the override training.data.seed=7)")
    assert rows["training.distributed.num_gpus"].describe("run.yaml") == (
        "training.distributed.num_gpus: checkpoint=8, config=16 (in run.yaml)")
    assert rows["training.distributed.num_gpus"].to_json()["config_set_by"] is None


def test_missing_on_either_side_is_a_row_not_a_crash(tmp_path) -> None:
    old = _cfg(tmp_path)
    new = copy.deepcopy(old)
    del new["training"]["data"]["seed"]
    del old["training"]["loop"]["gradient_accumulation_steps"]
    new["training"]["distributed"] = "not a mapping"
    rows = {r.path: r for r in compare_configs(old, new)}
    assert rows["training.data.seed"].to_json()["missing"] == "config"
    assert rows["training.data.seed"].to_json()["config"] is None
    assert rows["training.loop.gradient_accumulation_steps"].to_json()["missing"] == "checkpoint"
    assert rows["training.distributed.num_gpus"].missing == "config"
    assert rows["training.distributed.sp_size"].critical
    # Both sides missing a critical key is still reported (it cannot be shown equal).
    both = compare_configs({}, {})
    assert [r.path for r in both] == list(CRITICAL_PATHS) and both[0].missing == "both"


def test_data_path_compared_after_realpath_and_type_case_insensitive(tmp_path, monkeypatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    monkeypatch.setenv("HOME", str(tmp_path))
    old = _cfg(tmp_path)
    new = copy.deepcopy(old)
    new["training"]["data"]["data_path"] = "~/link/"
    new["training"]["data"]["dataloader_type"] = " Streaming "
    assert [r for r in compare_configs(old, new) if r.critical] == []
    new["training"]["data"]["data_path"] = str(tmp_path / "elsewhere")
    assert [r.path for r in compare_configs(old, new) if r.critical] == ["training.data.data_path"]


def test_bool_is_not_int(tmp_path) -> None:
    old = _cfg(tmp_path)
    new = copy.deepcopy(old)
    new["training"]["data"]["streaming_shuffle_row_groups"] = 1
    assert [r.path for r in compare_configs(old, new)] == ["training.data.streaming_shuffle_row_groups"]


def test_get_path_through_non_mapping() -> None:
    assert get_path({"a": [1]}, "a.b") is MISSING
    assert get_path({"a": {"b": None}}, "a.b") is None
    assert get_path({"a": 1}, "a.b", default=3) == 3


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a: &x [*x]\n", "recursive YAML alias"),
        ("a: &x {b: *x}\n", "recursive YAML alias"),
        ("a: 2001-02-30\n", "day is out of range"),
        ("a: " + "1" * 5000 + "\n", "invalid YAML value"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 100 levels"),
    ],
)
def test_hostile_yaml_is_one_line_error_naming_the_file(tmp_path, text, fragment) -> None:
    # Regression: these raised ValueError/RecursionError (or looped in the diff) instead of FvError.
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(FvError) as info:
        load_run_config(path)
    assert str(path) in str(info.value) and fragment in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("override", ["a.b=2001-02-30", "a.b=&x [*x]"])
def test_hostile_override_values_are_refused(tmp_path, override) -> None:
    path = write_run_config(tmp_path / "run.yaml", _cfg(tmp_path))
    with pytest.raises(FvError) as info:
        load_run_config(path, [override])
    assert "override" in str(info.value) or str(path) in str(info.value)


def test_non_regular_config_is_refused_without_blocking(tmp_path) -> None:
    # Regression (reliability D3): a FIFO blocked open() forever; /dev/zero was read until OOM.
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    with pytest.raises(FvError, match="run config must be a regular file, but it is a FIFO"):
        load_run_config(fifo)
    with pytest.raises(FvError, match="a character device"):
        load_run_config("/dev/zero")
    with pytest.raises(FvError, match="a directory"):
        load_run_config(tmp_path)


def test_a_value_names_the_override_that_set_it(tmp_path) -> None:
    """The file-and-field rule for overrides: a value an override set (its key, or a mapping above it) names that
    override as its source; every other value names the file. The last override of a key wins, as when applied."""
    path = write_run_config(tmp_path / "run.yaml", _cfg(tmp_path))
    cfg = load_run_config(path, ["training.distributed.num_gpus=abc", " --training.data = {seed: x}",
                                 "training.data.seed=7"])
    assert cfg.source("training.distributed.num_gpus") == "the override training.distributed.num_gpus=abc"
    assert cfg.source("training.data.seed") == "the override training.data.seed=7"
    assert cfg.source("training.data.train_batch_size") == "the override  --training.data = {seed: x}"
    assert cfg.source("training.distributed.sp_size") == str(path)
    assert cfg.keys.where("num_gpus", "FILE") == "the override training.distributed.num_gpus=abc"
    assert cfg.keys.where("sp_size", "FILE") == "FILE"
    assert cfg.keys.override("sp_size") is None
    assert cfg.keys.override("seed") == "training.data.seed=7"
    assert load_run_config(path).keys.where("num_gpus", "FILE") == "FILE"
