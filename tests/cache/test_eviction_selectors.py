"""Eviction selectors as one value, declared once; FastVideo's GC order walked once (issue 20 items 1, 4)."""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fvconsole
from fvconsole.cli import build_parser, main
from fvconsole.cli.selectors import selectors_from
from fvconsole.core.cache import EvictionSelectors, FreeTarget, plan_eviction, scan_cache
from fvconsole.core.shared.errors import UsageError
from fvconsole.demo.cache_builders import make_key, write_cache_entry

PACKAGE = pathlib.Path(fvconsole.__file__).parent
#: Written out here, not imported: the test must not take the list from the code it checks.
SELECTOR_FLAGS = ("--max-gb", "--min-free-gb", "--min-free-percent", "--best-effort", "--key", "--invalid", "--verify",
                  "--older-than", "--keep")



def _modules() -> list[tuple[pathlib.Path, ast.AST]]:
    return [(p, ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py"))]


def test_each_selector_flag_is_spelled_once_in_the_package() -> None:
    """One string literal per selector flag in all of fvconsole/ (``core/shared/flags.py``): the
    parsers, a fleet node's argv and the error messages all use that constant; so does a command's
    own option of the same spelling (`checkpoints prune`'s --keep STEP and --older-than D)."""
    found: dict[str, list[str]] = {flag: [] for flag in SELECTOR_FLAGS}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in found:
                found[node.value].append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    files = {flag: sorted(place.split(":")[0] for place in places) for flag, places in found.items()}
    assert files == {flag: ["core/shared/flags.py"] for flag in SELECTOR_FLAGS}


def test_selector_options_are_declared_by_one_function() -> None:
    """``add_argument`` is called with a selector flag in one module only, and both commands have them all."""
    declaring = set()
    for path, tree in _modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument" and node.args):
                first = node.args[0]
                name = first.attr if isinstance(first, ast.Attribute) else getattr(first, "value", None)
                if name in SELECTOR_FLAGS or (isinstance(first, ast.Name) and first.id == "flag"):
                    declaring.add(str(path.relative_to(PACKAGE)))
    assert declaring == {"cli/selectors.py"}
    parser = build_parser()
    for argv in (["cache", "evict"], ["fleet", "cache", "evict", "--nodes", "n1"]):
        sub = parser.parse_args([*argv, "--invalid"])
        assert all(hasattr(sub, flag[2:].replace("-", "_")) for flag in SELECTOR_FLAGS), argv


_keys = st.lists(st.integers(0, 2**64 - 1).map(lambda n: f"{n:016x}"), max_size=3, unique=True).map(tuple)
_gib = st.floats(0, 2**30, allow_nan=False, allow_infinity=False)


@st.composite
def _selectors(draw) -> EvictionSelectors:
    from_env = draw(st.booleans())
    gb, pct = draw(st.none() | _gib), draw(st.none() | st.floats(0, 100))
    value = EvictionSelectors(
        max_gb=None if from_env else draw(st.none() | _gib), max_gb_from_env=from_env, keys=draw(_keys),
        invalid=draw(st.booleans()), older_than=draw(st.none() | st.floats(0, 3e9)),
        free_target=FreeTarget(gb, pct, draw(st.booleans())) if gb is not None or pct is not None else None,
        keep=draw(_keys))
    return value if not value.empty else EvictionSelectors(invalid=True, keep=value.keep)


@settings(max_examples=200, deadline=None)
@given(_selectors())
def test_a_nodes_argv_parses_back_to_the_same_selectors(picked: EvictionSelectors) -> None:
    """What a fleet node is sent selects exactly what the login node validated (floats exactly)."""
    assert set(picked.to_json()) >= {f.name for f in dataclasses.fields(picked)} - {"older_than"} | {"older_than_seconds"}
    args = build_parser().parse_args(["fleet", "cache", "evict", "--nodes", "n1", *picked.argv()])
    assert selectors_from(args, fleet=True) == picked
    node_side = build_parser().parse_args(["cache", "evict", *picked.argv()])
    if not picked.max_gb_from_env:
        assert selectors_from(node_side) == picked


def test_nothing_selected_is_the_same_usage_error_everywhere(tmp_path, capsys) -> None:
    root = tmp_path / "cache"
    write_cache_entry(root, make_key("a"), num_shards=1, tensor_bytes=64)
    with pytest.raises(UsageError) as core_error:
        plan_eviction(scan_cache(str(root)), EvictionSelectors(keep=(make_key("a"),)))
    lines = []
    for argv in (["cache", "evict", str(root), "--keep", make_key("a")],
                 ["fleet", "cache", "evict", "--nodes", "n1", "--cache-root", str(root)]):
        assert main(argv) == 2
        lines.append(capsys.readouterr().err.splitlines()[0])
    assert lines[0] == lines[1] == f"error: {core_error.value.message}"
    assert lines[0].startswith("error: nothing selected: give --max-gb")


@pytest.mark.parametrize(("flag", "value"), [("--older-than", "7"), ("--key", "NOTAKEY"), ("--max-gb", "-1")])
def test_fleet_evict_refuses_a_bad_selector_on_the_login_node(flag, value, capsys) -> None:
    """A bad selector value is a usage error before srun or squeue, like `cache evict`'s (it used
    to be sent to every node, each failing on its own)."""
    code = main(["fleet", "cache", "evict", "--nodes", "n[1-2]", "--cache-root", "/nonexistent", flag, value])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {flag}: "), err
    assert "srun" not in err


def test_plan_total_after_is_what_stays(tmp_path) -> None:
    """``EvictionPlan.total_bytes_after``: the bytes of the entries the plan leaves (the console's bar)."""
    root = tmp_path / "cache"
    keys = [make_key(n) for n in "abc"]
    for i, key in enumerate(keys):
        write_cache_entry(root, key, num_shards=1, tensor_bytes=1024 * (i + 1), last_used=time.time() - 86400 * (i + 1))
    leftover = root / f".evicting-{make_key('gone')}-1"  # an interrupted eviction's: never counted in the total
    leftover.mkdir()
    (leftover / "x").write_bytes(b"y" * 500)
    scan = scan_cache(str(root))
    assert scan.leftovers
    plan = plan_eviction(scan, EvictionSelectors(keys=(keys[1],)), force=True)
    stays = sum(e.bytes for e in scan.entries if e.key != keys[1])
    assert plan.total_bytes_after == stays
    assert plan.to_json()["total_bytes_after"] == stays


def test_fastvideo_gc_order_is_written_once() -> None:
    """No module but ``core/cache/gc_order.py`` builds the (last used, size, path) order itself:
    no tuple that starts with a last use followed by a size (an entry's field or a JSON value)."""

    def names(node: ast.AST) -> set[str]:
        found = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
        return found | {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}

    offenders = []
    for path, tree in _modules():
        if path.name == "gc_order.py":
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Tuple) and len(node.elts) >= 2 and "last_used" in names(node.elts[0])
                    and "bytes" in names(node.elts[1])):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def test_the_console_computes_the_cap_like_fastvideo() -> None:
    """The console's cap is ``cap_bytes`` (``float(N) * 2**30``), not its own arithmetic."""
    tui = PACKAGE / "tui"
    spelled = [f"{p.name}:{i}" for p in tui.rglob("*.py") for i, line in enumerate(p.read_text().splitlines(), 1)
               if "1 << 30" in line or "2**30" in line or "2 ** 30" in line]
    assert spelled == []



def _help_of(binding_view: type, action: str) -> str:
    return next(b.tooltip for b in binding_view.BINDINGS if getattr(b, "action", None) == action)


def _option_help(capsys: pytest.CaptureFixture[str], argv: list[str], flag: str) -> str:
    """The help of ``flag`` under ``options:`` in ``fvconsole <argv> --help`` (continuation lines joined)."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    lines = capsys.readouterr().out.splitlines()
    options = lines.index("options:")  # the option's own help, not the description's summary of it
    start = next(i for i, line in enumerate(lines) if i > options and line.strip().startswith(flag + " "))
    words = lines[start].split()[1:]
    for line in lines[start + 1:]:
        if not line.startswith(" " * 10) or line.strip().startswith("-"):
            break
        words += line.split()
    return " ".join(words)


def test_the_invalid_selection_has_one_wording_that_names_what_it_selects(tmp_path, capsys) -> None:
    """D41: the console's `i` said "invalid, and incomplete ones" after --invalid began to select
    empty entries too; the CLI's helps said "invalid, incomplete and empty". What it selects is
    taken from a real plan over entries of every status; every help names each of those
    statuses in the same words."""
    from fvconsole.tui.cache.view import CacheView
    from fvconsole.tui.fleet.view import FleetView

    root = tmp_path / "cache"
    two_days_ago = time.time() - 2 * 86400
    for i, status in enumerate(("complete", "partial", "incomplete", "empty", "invalid-manifest", "writing")):
        write_cache_entry(root, make_key(status), num_shards=2, status=status, last_used=two_days_ago, seed=i)
    scan = scan_cache(str(root))
    status_of = {e.key: e.status for e in scan.entries}
    selected = {status_of[p.key] for p in plan_eviction(scan, EvictionSelectors(invalid=True)).evict}
    assert selected == {"invalid", "incomplete", "empty"}  # the planner's selection, not a help text

    console = _help_of(CacheView, "evict_invalid")
    cli = _option_help(capsys, ["cache", "evict"], "--invalid")
    assert console == cli, "the console's `i` and `cache evict --invalid` word the selection differently"
    phrase = cli.removeprefix("evict ")
    for status in selected:
        assert re.search(rf"\b{status}\b", phrase), (status, phrase)
    for where, text in (("fleet cache evict --invalid", _option_help(capsys, ["fleet", "cache", "evict"], "--invalid")),
                        ("the Fleet view's i", _help_of(FleetView, "evict_invalid"))):
        assert phrase in " ".join(text.split()), (where, text)


def test_no_module_spells_out_the_invalid_selection_by_hand() -> None:
    """One place words it (``core/cache/selectors.py``, from its tuple of statuses): no string in
    the package lists "invalid, incomplete …" itself, where a status added later would be missed."""
    listed = re.compile(r"invalid\s*(,|\+|/|and)\s*(and\s+)?incomplete")
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and listed.search(node.value):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []
