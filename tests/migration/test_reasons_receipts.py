"""core.shared.reasons (refusals and skips created as a code + values + remedy, worded by each front end) and
core.migration.published (the set published for a checkpoint), on real refusals, plans and migrations."""

from __future__ import annotations

import json
import os
import re
import string

import pytest

from fvconsole.cli import main as cli_main
from fvconsole.core.cache import EvictionSelectors, plan_eviction, scan_cache
from fvconsole.core.migration import output_dir
from fvconsole.core.migration.plan import MigrationRequest, preview_migration
from fvconsole.core.migration.published import defaults_from_published, latest, published_for
from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.reasons import DERIVED, FORCE, KINDS, OVERWRITE, REMEDIES, reason
from fvconsole.demo import builders
from fvconsole.demo.cache_builders import write_cache_entry
from fvconsole.tui.wording import CONTROLS, reason_text, refusal_text, skip_text
from fvconsole.tui.wording import REMEDIES as CONSOLE_REMEDIES

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> builders.RunFixture:
    return builders.build_run(tmp_path_factory.mktemp("reasons") / "run", steps=(3, 6), num_gpus=2, sp_size=1)


def request(run: builders.RunFixture, out: str, **changes) -> MigrationRequest:
    fields = dict(config_path=run.config_path, checkpoint=run.checkpoint(3), output_dir=out, expected_step=3,
                  expected_world_size=2, consumed_batches_per_rank=3)
    return MigrationRequest(**{**fields, **changes})


def migrate(run: builders.RunFixture, step: int, out: str) -> None:
    assert cli_main(["migrate", "--config", run.config_path, "--checkpoint", run.checkpoint(step), "--output-dir", out,
                     "--expected-step", str(step), "--expected-world-size", "2",
                     "--consumed-batches-per-rank", str(step), "--yes"]) == 0


def test_migration_refusals_become_codes_with_values(run: builders.RunFixture, tmp_path) -> None:
    preview = preview_migration(request(run, str(tmp_path / "out"), expected_step=4, expected_world_size=3,
                                        consumed_batches_per_rank=5))
    reasons = {r.code: r.reason for r in preview.refusals}
    assert set(reasons) >= {"expected_step.metadata", "expected_step.directory", "expected_world_size.config",
                            "consumed_batches_per_rank.config"}
    assert dict(reasons["expected_step.metadata"].values)["given"] == "4"
    assert dict(reasons["expected_step.metadata"].values)["actual"] == "3"
    directory = dict(reasons["expected_step.directory"].values)
    assert (directory["given"], directory["actual"], directory["name"]) == ("4", "3", "checkpoint-3")
    assert dict(reasons["expected_world_size.config"].values) == {"given": "3", "actual": "2"}
    assert dict(reasons["consumed_batches_per_rank.config"].values)["actual"] == "3"
    assert any("--expected-step" in r.message for r in preview.refusals)  # the CLI's words stay as they were
    for refusal in preview.refusals:
        worded = refusal_text(refusal.why)
        assert not FLAG.search(worded), worded


def test_an_existing_set_names_the_overwrite_option_not_its_flag(run: builders.RunFixture, tmp_path) -> None:
    out = str(tmp_path / "side")
    migrate(run, 3, out)
    preview = preview_migration(request(run, out))
    refusal = next(r for r in preview.refusals if r.field == "output_dir")
    reason = refusal.reason
    assert (reason.code, reason.remedy) == ("output_dir.has_sidecars", OVERWRITE)
    assert dict(reason.values)["count"] == "2" and "--overwrite" not in reason.detail
    assert refusal.message.endswith("; use --overwrite to replace them")  # the CLI's words stay as they were
    assert "tick “overwrite existing sidecars”" in refusal_text(reason)
    # Execution re-checks the same rule (issue 20 item 3: it had its own code and words, "has_set").
    with pytest.raises(FvError) as refused:
        output_dir.check_destination(out, run.checkpoint(3), None, overwrite=False)
    assert str(refused.value).endswith("; use --overwrite to replace them")
    reason = refused.value.reason
    assert (reason.code, reason.remedy, reason.value("count")) == ("output_dir.has_sidecars", OVERWRITE, "2")
    assert not FLAG.search(refusal_text(reason))


def _sample(code: str) -> dict[str, str]:
    """A value for every name the code's templates use (flag-free, like the core's own values)."""
    names = set()
    for template in (KINDS[code].detail, KINDS[code].cli):
        names |= {name for _, name, _, _ in string.Formatter().parse(template) if name}
    values = {name: f"<{name}>" for name in names - set(DERIVED)}
    if names & set(DERIVED):  # a free-space target: worded from its bounds, never given as text
        values.update(min_free_gb="8", min_free_percent="30")
    return values


def test_every_code_the_core_produces_is_worded_without_flags_and_each_remedy_names_a_console_control() -> None:
    assert len(KINDS) > 20  # the registry is the core's list of codes, not an empty table
    for code in KINDS:
        why = reason(code, "field", **_sample(code))
        worded = reason_text(why)
        assert not FLAG.search(worded), (code, worded)
        assert not FLAG.search(why.detail), (code, why.detail)
        assert not FLAG.search(skip_text(why)), code
        if why.remedy is not None:
            assert why.remedy in REMEDIES and why.remedy in CONSOLE_REMEDIES, code
            assert CONSOLE_REMEDIES[why.remedy] in worded or why.code == "skip.in_use", (code, worded)
    # Every remedy the core names is either a console control or said to have none, never a flag.
    for remedy in REMEDIES:
        assert remedy in CONSOLE_REMEDIES and not FLAG.search(CONSOLE_REMEDIES[remedy])
    assert set(CONTROLS) == {OVERWRITE, "skip_source_check", FORCE}


def test_a_count_a_reason_says_is_its_number_and_its_words() -> None:
    """Issue 28 item 3: a template says the count the caller worded through humanize.plural; the number
    stays a value of its own (the console and the node runner's JSON read it as before)."""
    for count, foreign in ((1, "1 file"), (2, "2 files")):
        why = reason("output_dir.foreign", "output_dir", path="/o", count=count, foreign=foreign, shown="a.log")
        assert why.value("count") == str(count) and why.to_json()["values"]["count"] == str(count)
        assert why.detail == (f"/o: output dir contains {foreign} other than fvconsole sidecars (a.log); "
                              "refusing to replace it")


@pytest.mark.parametrize(("overrides", "named", "flags"), [
    (["training.data.seed=42"], "the override training.data.seed=42", "--set training.data.seed=42"),
    (["a.b=1", "c.d=2"], "the overrides a.b=1 c.d=2", "--set a.b=1 --set c.d=2"),
    (['a.b="x y"'], """the override 'a.b="x y"'""", """--set 'a.b="x y"'"""),
    (['a.b="x y"', "c.d=2"], """the overrides 'a.b="x y"' c.d=2""", """--set 'a.b="x y"' --set c.d=2"""),
])
def test_the_overrides_are_named_by_their_number_and_a_value_with_a_space_is_one(overrides, named, flags) -> None:
    """What to add is worded from how many overrides there are (shell words, as the planner quotes them)."""
    import shlex

    why = reason("config.critical_override", "config", differs="d", overrides=" ".join(map(shlex.quote, overrides)))
    assert why.detail == f"d; if the run was launched with the checkpoint's values, add {named}"
    assert why.cli == f"d; if the run was launched with the checkpoint's values, repeat them: {flags}"


#: Where the core may write a flag: the command line's texts of KINDS (and of a free-space target),
#: command lines it builds (srun, the node runner), flag names a front end replaces with its own,
#: and usage errors only the command line can cause, and the flags' one spelling
#: (``shared/flags.py``). Anything else reaches the console as is.
FLAG_PLACES = {
    ("reasons.py", None), ("reasons.py", "min_free_words"), ("flags.py", None),
    ("dispatch.py", "_srun_argv"), ("dispatch.py", "_single_steps"), ("dispatch.py", "check_options"),
    ("node_commands.py", None),  # what a fleet node is asked to run (built from the flags' constants)
    ("selectors.py", "parse_min_free_gb"), ("selectors.py", "parse_min_free_percent"), ("selectors.py", "parse_max_gb"),
    ("metrics.py", "prometheus_text"),
    ("slurm_state.py", "squeue_argv"), ("slurm_state.py", "sinfo_argv"),  # Slurm's own command lines
}


def test_the_core_words_no_flag_outside_the_command_lines_texts() -> None:
    """Refusals, warnings, planned-eviction reasons and (partial) failures without a code carry their
    text to the console as is: no string literal of the core names a flag outside :data:`FLAG_PLACES`."""
    import ast
    import pathlib

    import fvconsole.core as core

    offenders = []

    def visit(node: ast.AST, path: pathlib.Path, func: str | None, docs: set[int]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node.name
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                and FLAG.search(node.value) and (path.name, func) not in FLAG_PLACES):
            offenders.append(f"{path.name}:{node.lineno} in {func}: {node.value[:60]!r}")
        for child in ast.iter_child_nodes(node):
            visit(child, path, func, docs)

    for path in pathlib.Path(core.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        visit(tree, path, None, docs)
    assert offenders == []
    # The KINDS entries name flags only in their command-line text (checked per code above).


def test_planned_evictions_warnings_and_partial_failures_are_worded_without_flags(tmp_path) -> None:
    """Real plans (marked, over a cap, a free-space target), a preview's warning and a publish
    failure: the command line's words are as before, the console's name no flag."""
    from fvconsole.core.cache.freespace import FreeSpacePlan, FreeTarget
    from fvconsole.core.shared.errors import PartialFailure
    from fvconsole.tui.base import describe_error
    from fvconsole.tui.wording import evict_reason_text, free_space_text, reason_text

    now = 1_800_000_000.0
    keys = [os.path.basename(write_cache_entry(tmp_path, seed=s, num_shards=1, tensor_bytes=1024,
                                               last_used=now - 86400 * (5 - s))) for s in range(3)]
    scan = scan_cache(str(tmp_path), now=now)
    plan = plan_eviction(scan, EvictionSelectors(keys=(keys[2],), max_gb=1e-9), now=now)
    by_key = {p.key: p for p in plan.evict}
    assert by_key[keys[2]].reason.startswith("selected by --key")  # the CLI's words stay as they were
    assert [r.code for r in by_key[keys[2]].why] == ["evict.key", "evict.over_cap"]
    assert evict_reason_text(by_key[keys[2]]).startswith("marked; LRU #")
    assert by_key[keys[0]].reason == "LRU #1: total over the 1e-09 GiB cap"
    free = FreeSpacePlan(FreeTarget(8.0, 30.0), target_bytes=10 << 30, fs_total=40 << 30, free_before=1 << 30,
                         free_after=2 << 30, victims=())
    assert free.summary() == ("target 10.0 GiB free (--min-free-gb 8 and --min-free-percent 30) cannot be reached: "
                              "1.0 GiB free now, at most 2.0 GiB after evicting every entry that may be evicted; "
                              "nothing is evicted for it (8.0 GiB short; --best-effort frees what it can toward it)")
    assert free_space_text(free).startswith("target 10.0 GiB free (min free 8 GiB and 30%) cannot be reached")
    staging = reason("staging.crashed_here", "output_dir", path="/o/.x", pid=7)
    assert staging.cli.endswith("; --yes removes it") and reason_text(staging).endswith("; Execute removes it")
    failed = PartialFailure.of(reason("publish.not_as_written", "output_dir", path="/o", problem="rank1 differs",
                                      more="", kept=""), report={"stage": "verifying"})
    assert str(failed).endswith("do not resume from it (re-run with --overwrite)") and failed.exit_code == 3
    worded = describe_error(failed)
    assert "tick “overwrite existing sidecars”" in worded and not FLAG.search(worded), worded
    for item in plan.evict:
        assert not FLAG.search(evict_reason_text(item)), item


def test_the_console_controls_named_by_remedies_exist() -> None:
    import pathlib

    import fvconsole.tui as tui

    sources = "".join(p.read_text() for p in pathlib.Path(tui.__file__).parent.rglob("*.py"))
    for widget_id, label in CONTROLS.values():
        assert f'id="{widget_id}"' in sources and f'"{label}' in sources, widget_id


def test_cache_skips_become_codes_and_in_use_is_worded_with_the_time_now(tmp_path) -> None:
    now = 1_800_000_000.0
    busy = os.path.basename(write_cache_entry(tmp_path, seed=1, num_shards=2, tensor_bytes=256, last_used=now - 30))
    old = os.path.basename(write_cache_entry(tmp_path, seed=2, num_shards=2, tensor_bytes=256,
                                             last_used=now - 86400))
    scan = scan_cache(str(tmp_path), now=now)
    plan = plan_eviction(scan, EvictionSelectors(keys=(busy, old, "0" * 16), keep=(old,)), now=now)
    reasons = {s.key: s.why for s in plan.skipped}
    assert reasons[busy].code == "skip.in_use" and reasons[busy].remedy == FORCE
    assert reasons[old].code == "skip.kept" and reasons["0" * 16].code == "skip.missing"
    assert {s.key: s.reason for s in plan.skipped}[old] == "kept (--keep)"  # the CLI's words stay as they were
    later = skip_text(reasons[busy], scan.get(busy), now + 120, plan.grace_seconds)
    assert "used 2m 30s ago" in later and "tick “force”" in later and not FLAG.search(later)
    assert "no longer looks in use" in skip_text(reasons[busy], scan.get(busy), now + 86400, plan.grace_seconds)


def test_the_published_set_of_a_checkpoint_is_found_through_its_receipt(run: builders.RunFixture) -> None:
    from fvconsole.core.migration.defaults import suggest_output_dir

    assert published_for(run.checkpoint(3), 3) is None
    out3, out6 = suggest_output_dir(run.checkpoint(3), 3), suggest_output_dir(run.checkpoint(6), 6)
    migrate(run, 3, out3)
    migrate(run, 6, out6)
    found = published_for(run.checkpoint(3), 3)
    assert found is not None and found.complete
    assert (found.output_dir, found.step, found.world_size, found.consumed_batches_per_rank) == (out3, 3, 2, 3)
    assert found.checkpoint == os.path.realpath(run.checkpoint(3))
    assert latest([found, published_for(run.checkpoint(6), 6), None]).step == 6
    defaults = defaults_from_published(found)
    assert (defaults.checkpoint, defaults.output_dir, defaults.expected_step) == (found.checkpoint, out3, 3)
    # A set for another checkpoint in that place does not count; a missing sidecar is incomplete.
    os.remove(os.path.join(out3, "dataloader_state_rank1.pt"))
    assert published_for(run.checkpoint(3), 3).sidecars_present == 1
    assert not published_for(run.checkpoint(3), 3).complete
    receipt = os.path.join(out6, "migration_receipt.json")
    with open(receipt) as fh:
        data = json.load(fh)
    with open(receipt, "w") as fh:
        json.dump(dict(data, source_checkpoint="/elsewhere/checkpoint-6"), fh)
    assert published_for(run.checkpoint(6), 6) is None
    with open(receipt, "w") as fh:
        fh.write("{ not json")
    with pytest.raises(FvError, match="migration_receipt.json"):
        published_for(run.checkpoint(6), 6)


def test_a_node_refusal_reaches_the_fleet_view_as_data_and_is_worded_without_flags(tmp_path) -> None:
    """A node's `cache evict` refused because another eviction holds the root: the runner sends the reason."""
    from fvconsole.cli.node import _run
    from fvconsole.core.cache.roots import evictor_lock
    from fvconsole.core.fleet.outcomes import from_envelope
    from fvconsole.tui.fleet.text import node_error

    root = tmp_path / "cache"
    write_cache_entry(str(root), seed=1, num_shards=2, tensor_bytes=256, last_used=1.0)
    with evictor_lock(str(root)):
        payload = _run("n1", ["cache", "evict", str(root), "--invalid", "--yes", "--json"], None)
    outcome = from_envelope("n1", json.loads(json.dumps(payload)), expects="cache-evict", timeout=5.0)
    assert outcome.kind == "failed" and "re-run with --wait SECONDS" in outcome.error  # the node's CLI words
    assert outcome.reason is not None and (outcome.reason.code, outcome.reason.remedy) == ("lock.evicting", "wait")
    worded = node_error(outcome)
    assert "another eviction is running" in worded and "try again once it has finished" in worded
    assert not FLAG.search(worded), worded
    # An envelope whose reason is not one of ours (an older or foreign node) keeps the node's text.
    payload["reason"] = {"code": "no.such.code", "field": "x", "values": {}}
    assert from_envelope("n1", payload, expects="cache-evict", timeout=5.0).reason is None
