"""Acceptance 5: hostile and malformed inputs (hypothesis + hand-picked cases).

Invariant for every damaged input: the CLI exits 1 with exactly one stderr line starting
with ``error:`` that names the damaged file (or, for a config value, the field), never a
traceback, and nothing is written anywhere (even with ``--yes``). A mutation that happens
to leave the input valid may succeed (exit 0) — then it must really be valid.
The CLI runs in-process (``fvconsole.cli.main``) so hundreds of examples stay fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .harness import CliResult, assert_clean_error, digest_diff, run_cli, run_inproc, tree_digest
from .strategies import (
    BROKEN_YAML,
    corrupted_bytes,
    json_text,
    mutated_document,
    mutated_manifest,
    same_document,
    set_path,
)
from .workspace import MigrationWorkspace

EXAMPLES = 40
# derandomize: CI sees the same examples every run (hand-picked cases cover known defects);
# no shrink phase: a failure is reported at once instead of after minutes of shrinking.
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
)


@pytest.fixture(scope="module")
def ws(migration_workspace) -> MigrationWorkspace:
    """Its own: these tests change the workspace in place (restored after each)."""
    return migration_workspace(private=True)


@pytest.fixture(scope="module")
def good_set(ws: MigrationWorkspace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified sidecar set to damage copies of."""
    from fvconsole.cli import main

    out = tmp_path_factory.mktemp("good-set") / "state"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(ws.migrate_args(out))
    assert code == 0, stdout.getvalue()[-2000:] + stderr.getvalue()[-2000:]
    return out


@contextlib.contextmanager
def replaced(path: Path, data: bytes) -> Iterator[None]:
    """Temporarily give ``path`` new bytes (the original is restored, even on failure)."""
    original = path.read_bytes()
    path.write_bytes(data)
    try:
        yield
    finally:
        path.write_bytes(original)


def outcome(result: CliResult, names: list[str]) -> str:
    """Judge one run: a clean refusal naming the file, or a success. Returns a label."""
    if result.returncode == 0:
        return "accepted (mutation harmless)"
    assert_clean_error(result, codes=(1,), names=names)
    return "refused, exit 1"


def migrate_and_check(ws: MigrationWorkspace, out: Path, capsys, names: list[str]) -> str:
    """`migrate --yes` on damaged input: refusal writes nothing; acceptance is cleaned up."""
    before = tree_digest(ws.root)
    result = run_inproc(ws.migrate_args(out), capsys)
    label = outcome(result, names)
    if result.returncode == 0:
        shutil.rmtree(out)
    assert not out.exists(), "a refused migration created its output dir"
    assert [p.name for p in out.parent.iterdir() if ".fvconsole-staging-" in p.name] == []
    assert digest_diff(before, tree_digest(ws.root)) == []
    return label


# --------------------------------------------------------------------------- run config (YAML)


@pytest.mark.fault("hostile input", "run config YAML: structural mutation (missing keys, wrong types, hostile values)")
@SETTINGS
@given(data=st.data())
def test_run_config_mutations(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, data) -> None:
    config = yaml.safe_load(ws.config.read_text())
    path, doc = data.draw(mutated_document(config))
    text = yaml.safe_dump(doc, sort_keys=False).encode()
    names = [ws.config.name] + ([".".join(map(str, path))] if path else [])
    with replaced(ws.config, text):
        trials.add(migrate_and_check(ws, tmp_path / "out", capsys, names))


@pytest.mark.fault("hostile input", "run config YAML: truncation, bit flips, garbage bytes")
@SETTINGS
@given(data=st.data())
def test_run_config_bytes(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, data) -> None:
    original = ws.config.read_bytes()
    damaged = data.draw(corrupted_bytes(original))
    # A byte change can hit any value; the refusal then names that field instead of the file.
    names = [ws.config.name, "training.", "config"]
    with replaced(ws.config, damaged):
        trials.add(migrate_and_check(ws, tmp_path / "out", capsys, names))


@pytest.mark.fault("hostile input", "run config YAML: hand-picked broken texts (alias bomb, python tags, tabs, lists)")
@pytest.mark.parametrize("label,text", BROKEN_YAML, ids=[b[0] for b in BROKEN_YAML])
def test_run_config_broken_texts(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, label, text) -> None:
    with replaced(ws.config, text.encode("utf-8", "surrogateescape")):
        before = tree_digest(ws.root)
        result = run_inproc(ws.migrate_args(tmp_path / "out"), capsys)
        assert_clean_error(result, codes=(1,), names=[ws.config.name])
        assert digest_diff(before, tree_digest(ws.root)) == []
        assert not (tmp_path / "out").exists()
    trials.add("refused, exit 1")


CONFIG_VALUE_CASES = (
    ("training.data.data_path", "\x00"),
    ("training.data.streaming_manifest_path", "\x00"),
    ("training.data.data_path", "/a" * 3000),
    ("training.data.streaming_manifest_path", "/"),
    ("training.distributed.num_gpus", 10**40),
    ("training.distributed.num_gpus", -16),
    ("training.distributed.sp_size", 0),
    ("training.data.train_batch_size", 0),
    ("training.data.seed", "forty-two"),
    ("training.loop.gradient_accumulation_steps", 1.5),
    ("training.data.dataloader_type", ["streaming"]),
)


@pytest.mark.fault("hostile input", "run config YAML: hand-picked hostile values (NUL bytes, huge/zero/negative numbers)")
@pytest.mark.parametrize("dotted,value", CONFIG_VALUE_CASES, ids=[f"{d}={v!r:.12}" for d, v in CONFIG_VALUE_CASES])
def test_run_config_hostile_values(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, dotted, value) -> None:
    config = yaml.safe_load(ws.config.read_text())
    doc = set_path(config, tuple(dotted.split(".")), value)
    with replaced(ws.config, yaml.safe_dump(doc, sort_keys=False).encode()):
        label = migrate_and_check(ws, tmp_path / "out", capsys, [ws.config.name, dotted])
    assert label == "refused, exit 1"
    trials.add(label)


@pytest.mark.fault("hostile input", "run config points at a device or FIFO (/dev/zero manifest, FIFO config)")
@pytest.mark.parametrize("case", ["manifest is /dev/zero", "config is a FIFO"])
def test_non_regular_inputs_do_not_hang(ws: MigrationWorkspace, tmp_path: Path, trials, case: str) -> None:
    """Reading must refuse non-regular files instead of blocking or reading forever."""
    import os
    import subprocess

    if case == "config is a FIFO":
        config = tmp_path / "run-fifo.yaml"
        os.mkfifo(config)
        name = config.name
    else:
        doc = set_path(yaml.safe_load(ws.config.read_text()), ("training", "data", "streaming_manifest_path"), "/dev/zero")
        config = tmp_path / "run-zero.yaml"
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        name = "/dev/zero"
    args = ws.migrate_args(tmp_path / "out")
    args[args.index("--config") + 1] = str(config)
    try:
        result = run_cli(args, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: fvconsole migrate still running after 20 s (blocked or reading forever)")
    assert_clean_error(result, names=[name, "training.data.streaming_manifest_path"])
    assert not (tmp_path / "out").exists()
    trials.add("refused, exit 1")


# --------------------------------------------------------------------------- metadata.json


@pytest.mark.fault("hostile input", "checkpoint metadata.json: structural mutation")
@SETTINGS
@given(data=st.data())
def test_metadata_mutations(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, data) -> None:
    meta_path = ws.checkpoint / "metadata.json"
    meta = json.loads(meta_path.read_text())
    path, doc = data.draw(mutated_document(meta))
    names = ["metadata.json"] + ([".".join(map(str, path[1:]))] if len(path) > 1 else [])
    with replaced(meta_path, json_text(doc)):
        trials.add(migrate_and_check(ws, tmp_path / "out", capsys, names))
        listing = run_inproc(["checkpoints", "ls", str(ws.checkpoint.parent), "--json"], capsys)
        assert listing.returncode in (0, 1), listing.describe()
        if listing.returncode:
            assert_clean_error(listing, names=["metadata.json"])


@pytest.mark.fault("hostile input", "checkpoint metadata.json: truncation, bit flips, garbage bytes")
@SETTINGS
@given(data=st.data())
def test_metadata_bytes(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, data) -> None:
    meta_path = ws.checkpoint / "metadata.json"
    damaged = data.draw(corrupted_bytes(meta_path.read_bytes()))
    with replaced(meta_path, damaged):
        trials.add(migrate_and_check(ws, tmp_path / "out", capsys, ["metadata.json", "training.", "step"]))


# --------------------------------------------------------------------------- streaming manifest


@pytest.mark.fault("hostile input", "streaming manifest: invalid rows/starts/totals/paths, re-fingerprinted")
@SETTINGS
@given(data=st.data())
def test_manifest_mutations(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, data) -> None:
    manifest = json.loads(ws.manifest.read_text())
    description, doc = data.draw(mutated_manifest(manifest))
    if same_document(doc, manifest) or description == "row_groups[0].sample_start=0":
        return  # not a mutation
    with replaced(ws.manifest, json_text(doc)):
        result = run_inproc(ws.migrate_args(tmp_path / "out"), capsys)
        # Every mutation breaks a docs/formats.md invariant: it must be refused.
        assert result.returncode == 1, f"{description} accepted:\n{result.describe()}"
        trials.add(outcome(result, [ws.manifest.name]))
        assert not (tmp_path / "out").exists()


@pytest.mark.fault("hostile input", "streaming manifest: truncation, bit flips, garbage bytes")
@SETTINGS
@given(data=st.data())
def test_manifest_bytes(ws: MigrationWorkspace, tmp_path: Path, capsys, trials, data) -> None:
    damaged = data.draw(corrupted_bytes(ws.manifest.read_bytes()))
    with replaced(ws.manifest, damaged):
        trials.add(migrate_and_check(ws, tmp_path / "out", capsys, [ws.manifest.name]))


@pytest.mark.fault("hostile input", "streaming manifest: huge row group count with hostile entry at the end")
def test_manifest_long_with_bad_tail(ws: MigrationWorkspace, tmp_path: Path, capsys, trials) -> None:
    manifest = json.loads(ws.manifest.read_text())
    groups = manifest["row_groups"]
    tail = dict(groups[-1], file="../../../../etc/passwd")
    doc = dict(manifest, row_groups=[*groups[:-1], tail])
    from .strategies import fingerprint

    doc["fingerprint"] = fingerprint(doc["row_groups"])
    with replaced(ws.manifest, json_text(doc)):
        result = run_inproc(ws.migrate_args(tmp_path / "out"), capsys)
        line = assert_clean_error(result, names=[ws.manifest.name])
        assert "file" in line
    trials.add("refused, exit 1")


# --------------------------------------------------------------------------- sidecars and receipts


def _fresh_copy(good_set: Path, tmp_path: Path) -> Path:
    target = tmp_path / "state"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(good_set, target)
    return target


def verify_damaged(ws: MigrationWorkspace, target: Path, capsys, names: list[str]) -> str:
    before = tree_digest(target)
    result = run_inproc(ws.verify_args(target), capsys)
    assert result.returncode == 1, f"damaged set accepted:\n{result.describe()}"
    line = assert_clean_error(result, names=names)
    assert "internal error" not in line
    assert tree_digest(target) == before, "verify wrote into the sidecar dir"
    return "refused, exit 1"


@pytest.mark.fault("hostile input", "sidecar .pt: truncation, bit flips, garbage bytes")
@SETTINGS
@given(data=st.data())
def test_sidecar_bytes(ws, good_set: Path, tmp_path: Path, capsys, trials, data) -> None:
    target = _fresh_copy(good_set, tmp_path)
    rank = data.draw(st.integers(0, ws.world - 1))
    victim = target / f"dataloader_state_rank{rank}.pt"
    original = victim.read_bytes()
    damaged = data.draw(corrupted_bytes(original))
    if damaged == original:
        return
    victim.write_bytes(damaged)
    trials.add(verify_damaged(ws, target, capsys, [victim.name]))


@pytest.mark.fault("hostile input", "migration receipt: structural mutation of a required field")
@SETTINGS
@given(data=st.data())
def test_receipt_mutations(ws, good_set: Path, tmp_path: Path, capsys, trials, data) -> None:
    target = _fresh_copy(good_set, tmp_path)
    receipt_path = target / "migration_receipt.json"
    receipt = json.loads(receipt_path.read_text())
    required = [
        "schema", "step", "world_size", "sp_world_size", "manifest_fingerprint",
        "source_checkpoint_metadata_sha256", "yielded_samples_per_rank", "sidecars",
    ]
    key = data.draw(st.sampled_from(required))
    path, doc = data.draw(mutated_document({key: receipt[key]}))
    mutated = dict(receipt)
    if path == ():
        mutated = doc
    elif key in doc:
        mutated[key] = doc[key]
    else:
        del mutated[key]
    if same_document(mutated, receipt):
        return
    receipt_path.write_bytes(json_text(mutated))
    trials.add(verify_damaged(ws, target, capsys, ["migration_receipt.json", "dataloader_state_rank"]))


@pytest.mark.fault("hostile input", "migration receipt: truncation, bit flips, garbage bytes")
@SETTINGS
@given(data=st.data())
def test_receipt_bytes(ws, good_set: Path, tmp_path: Path, capsys, trials, data) -> None:
    target = _fresh_copy(good_set, tmp_path)
    receipt_path = target / "migration_receipt.json"
    original = receipt_path.read_bytes()
    damaged = data.draw(corrupted_bytes(original))
    if damaged == original:
        return
    receipt_path.write_bytes(damaged)
    result = run_inproc(ws.verify_args(target), capsys)
    # Some byte changes only touch informational fields or whitespace; those may verify.
    if result.returncode == 0:
        json.loads(damaged)  # then it must at least still be JSON
        trials.add("accepted (mutation harmless)")
        return
    trials.add(verify_damaged(ws, target, capsys, ["migration_receipt.json", "dataloader_state_rank"]))


@pytest.mark.fault("hostile input", "sidecar set without receipt / with a missing rank (hand-picked)")
@pytest.mark.parametrize("damage", ["no receipt", "missing rank 3", "extra rank 99", "temp leftover"])
def test_incomplete_sets(ws, good_set: Path, tmp_path: Path, capsys, trials, damage: str) -> None:
    target = _fresh_copy(good_set, tmp_path)
    if damage == "no receipt":
        (target / "migration_receipt.json").unlink()
        names = ["migration_receipt.json"]
    elif damage == "missing rank 3":
        (target / "dataloader_state_rank3.pt").unlink()
        names = ["dataloader_state_rank3.pt"]
    elif damage == "extra rank 99":
        shutil.copy(target / "dataloader_state_rank0.pt", target / "dataloader_state_rank99.pt")
        names = ["dataloader_state_rank99.pt"]
    else:
        (target / ".dataloader_state_rank1.pt.abcd1234.tmp").write_bytes(b"partial")
        names = [".dataloader_state_rank1.pt.abcd1234.tmp"]
    trials.add(verify_damaged(ws, target, capsys, names))


# --------------------------------------------------------------------------- shard cache manifests


@pytest.fixture(scope="module")
def cache_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fvconsole.demo.cache_builders import write_cache_entry

    root = tmp_path_factory.mktemp("cache-template") / "cache"
    for seed in range(3):
        write_cache_entry(root, seed=seed, num_shards=2, tensor_bytes=1024)
    return root


def _cache_copy(template: Path, tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "cache"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(template, root)
    victim = sorted(p for p in root.iterdir())[0]
    return root, victim


def cache_checks(root: Path, victim: Path, capsys) -> str:
    """`cache ls` lists everything (exit 0), reads nothing it must not change; `evict --invalid` is precise."""
    others = {p.name: tree_digest(p) for p in root.iterdir() if p != victim}
    before = tree_digest(root, mtimes=True)
    ls = run_inproc(["cache", "ls", str(root), "--json"], capsys)
    assert ls.returncode == 0, ls.describe()
    assert "Traceback" not in ls.stderr
    assert tree_digest(root, mtimes=True) == before, "`cache ls` changed files or mtimes"
    entries = {e["key"]: e for e in json.loads(ls.stdout)["entries"]}
    assert set(entries) == {p.name for p in root.iterdir()}
    status = entries[victim.name]["status"]
    evict = run_inproc(["cache", "evict", str(root), "--invalid", "--force", "--yes"], capsys)
    assert evict.returncode == 0, evict.describe()
    for name, digest in others.items():
        assert tree_digest(root / name) == digest, "evict --invalid touched a valid entry"
    if status == "complete":
        assert victim.exists()
        return "listed as complete (mutation harmless)"
    assert not victim.exists() or status == "partial", f"{status} entry not evicted by --invalid"
    return f"listed as {status}, evicted by --invalid" if not victim.exists() else f"listed as {status}"


@pytest.mark.fault("hostile input", "shard cache manifest.json: structural mutation (`cache ls`, `cache evict --invalid`)")
@SETTINGS
@given(data=st.data())
def test_cache_manifest_mutations(cache_template: Path, tmp_path: Path, capsys, trials, data) -> None:
    root, victim = _cache_copy(cache_template, tmp_path)
    manifest_path = victim / "manifest.json"
    doc = json.loads(manifest_path.read_text())
    path, mutated = data.draw(mutated_document(doc))
    stamp = manifest_path.stat().st_mtime_ns
    manifest_path.write_bytes(json_text(mutated))
    os.utime(manifest_path, ns=(stamp, stamp))
    label = cache_checks(root, victim, capsys)
    if path[:1] in ((), ("format_version",), ("key",), ("num_shards",)) and not same_document(mutated, doc):
        # docs/formats.md §6: these decide whether an entry is usable at all.
        assert "complete" not in label, f"manifest with {path or 'whole document'} damaged listed as complete"
    trials.add(label)


@pytest.mark.fault("hostile input", "shard cache manifest.json / safetensors header: bytes damaged")
@SETTINGS
@given(data=st.data())
def test_cache_files_bytes(cache_template: Path, tmp_path: Path, capsys, trials, data) -> None:
    root, victim = _cache_copy(cache_template, tmp_path)
    target = victim / data.draw(st.sampled_from(["manifest.json", "shard0-of-2.safetensors"]))
    original = target.read_bytes()
    # Damage the start of a shard (length prefix + JSON header) where a validator looks.
    window = original if target.name == "manifest.json" else original[:256]
    damaged = data.draw(corrupted_bytes(window)) + (b"" if target.name == "manifest.json" else original[256:])
    if damaged == original:
        return
    stamp = target.stat().st_mtime_ns
    target.write_bytes(damaged)
    os.utime(target, ns=(stamp, stamp))
    trials.add(cache_checks(root, victim, capsys))


# --------------------------------------------------------------------------- command-line values


BAD_ARGUMENTS = (
    (["cache", "evict", "{cache}", "--max-gb", "nan", "--yes"], (2,), "--max-gb"),
    (["cache", "evict", "{cache}", "--max-gb", "-1", "--yes"], (2,), "--max-gb"),
    (["cache", "evict", "{cache}", "--max-gb", "1e400", "--yes"], (2,), "--max-gb"),
    (["cache", "evict", "{cache}", "--older-than", "5x", "--yes"], (2,), "--older-than"),
    (["cache", "evict", "{cache}", "--older-than", "", "--yes"], (2,), "--older-than"),
    (["cache", "evict", "{cache}", "--key", "../../etc", "--yes"], (2,), "--key"),
    (["cache", "ls", "{cache}", "--grace", "-5m"], (2,), "--grace"),
    (["migrate", "--set", "no-equals-sign"], (1, 2), "no-equals-sign"),
    (["migrate", "--set", "training..num_gpus=1"], (1, 2), "training..num_gpus"),
    (["migrate", "--set", "training.data.seed=[unclosed"], (1, 2), "training.data.seed"),
    (["migrate", "--expected-step", "-1"], (2,), "--expected-step"),
    (["migrate", "--expected-world-size", "0"], (2,), "--expected-world-size"),
)


@pytest.mark.fault("hostile input", "hostile command-line values (NaN/negative caps, bad durations and keys, bad --set)")
@pytest.mark.parametrize("argv,codes,name", BAD_ARGUMENTS, ids=[" ".join(a[3:5]) or a[1] for a, _, _ in BAD_ARGUMENTS])
def test_bad_arguments(ws: MigrationWorkspace, cache_template: Path, tmp_path: Path, capsys, trials, argv, codes, name) -> None:
    root, _ = _cache_copy(cache_template, tmp_path)
    before = tree_digest(root)
    if argv[0] == "migrate":
        base = ws.migrate_args(tmp_path / "out")
        flag = argv[1]
        if flag in base:
            base[base.index(flag) + 1] = argv[2]
        else:
            base += argv[1:]
        argv = base
    argv = [a.replace("{cache}", str(root)) for a in argv]
    result = run_inproc(argv, capsys)
    assert result.returncode in codes, result.describe()
    assert "Traceback" not in result.stderr + result.stdout
    errors = [ln for ln in result.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and name in errors[0], result.describe()
    assert tree_digest(root) == before
    assert not (tmp_path / "out").exists()
    trials.add(f"exit {result.returncode}")
