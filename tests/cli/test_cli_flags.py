"""Each flag is declared once for one meaning, and spelled once (issue 35 item 4).

``--grace`` of `cache ls`, `cache evict`, `fleet cache` and `checkpoints prune` is one option
with one declaration (``cli/options.py``), not four that drift apart; a spelling that stands for
two meanings in two commands is listed below with both. The flags the core names or builds
into a fleet node's command line are spelled in ``core/shared/flags.py`` only.
"""

from __future__ import annotations

import argparse
import ast
import collections
import pathlib
import sys

import pytest

import fvconsole
from fvconsole.cli import build_parser, main
from fvconsole.cli.parser import CliParser

PACKAGE = pathlib.Path(fvconsole.__file__).parent

#: Spellings with more than one meaning, each meaning declared once (written out here, not
#: taken from the code): how many declarations, and why they differ.
MEANINGS = {
    "--keep": 2,  # cache evict: a cache KEY never evicted; checkpoints prune: a STEP kept
    "--older-than": 2,  # cache evict: an entry's last use; checkpoints prune: a checkpoint's newest file
    "--deep": 2,  # cache verify: every byte of the shards; sidecars verify: the dataset's next sample ids
    "--cache-root": 3,  # the console's and the cache commands' root here; fleet: a path on every node, {node} in it;
    # preflight: this node's root, or with --nodes/--job every node's (its cache check only)
}

#: Flags the core names (usage errors) or writes into a node's command line: spelled only in core/shared/flags.py.
CORE_FLAGS = ("--max-gb", "--min-free-gb", "--min-free-percent", "--best-effort", "--key", "--invalid", "--verify", "--older-than",
              "--keep", "--grace", "--force", "--wait", "--yes", "-y", "--dry-run", "--json", "--no-journal",
              "--deep", "--step", "--config", "--set", "--checkpoint", "--output-dir", "--reshard", "--incomplete",
              "--sidecar-dir", "--world-size", "--dataloader-state-dir")


def declarations(monkeypatch) -> dict[str, set[str]]:
    """option string -> the functions of fvconsole that declared it (``module:function``), over the whole parser."""
    sites: dict[str, set[str]] = collections.defaultdict(set)
    original = argparse._ActionsContainer.add_argument

    def recording(self, *args, **kwargs):
        action = original(self, *args, **kwargs)
        code = sys._getframe(1).f_code
        path = pathlib.Path(code.co_filename)
        if PACKAGE in path.parents:
            for option in action.option_strings:
                sites[option].add(f"{path.relative_to(PACKAGE)}:{code.co_qualname}")
        return action

    monkeypatch.setattr(argparse._ActionsContainer, "add_argument", recording)
    parser = build_parser()
    assert isinstance(parser, CliParser)
    return sites


def test_no_flag_is_declared_twice_for_one_meaning(monkeypatch) -> None:
    sites = declarations(monkeypatch)
    twice = {option: sorted(where) for option, where in sites.items() if len(where) != MEANINGS.get(option, 1)}
    assert twice == {}
    assert set(MEANINGS) <= set(sites)  # the list names only spellings that are there


def test_every_command_with_yes_accepts_y_and_dry_run(monkeypatch) -> None:
    sites = declarations(monkeypatch)
    assert sites["--yes"] == sites["-y"] == sites["--dry-run"] == {"cli/options.py:add_yes"}


def test_the_flags_the_core_names_are_spelled_once() -> None:
    found: dict[str, list[str]] = {flag: [] for flag in CORE_FLAGS}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in found:
                found[node.value].append(str(path.relative_to(PACKAGE)))
    assert found == {flag: ["core/shared/flags.py"] for flag in CORE_FLAGS}


def test_the_reshard_modes_offered_are_the_cores() -> None:
    """`migrate --reshard`'s choices and its help come from the core's vocabulary (no copy in the CLI)."""
    from fvconsole.core.migration import RESHARD_MODES

    parser = build_parser(["migrate"])
    migrate = parser._subparsers._group_actions[0].choices["migrate"]
    reshard = next(a for a in migrate._actions if "--reshard" in a.option_strings)
    assert tuple(reshard.choices) == RESHARD_MODES == ("next-epoch", "epoch-start", "nearest")
    assert "next-epoch, epoch-start or nearest" in reshard.help
    source = (PACKAGE / "cli" / "migrate.py").read_text()
    assert '"next-epoch"' not in source and "RESHARD_MODES = " not in source


MIGRATE = ["migrate", "--config", "c.yaml", "--checkpoint", "ck", "--output-dir", "o", "--expected-step", "1",
           "--expected-world-size", "1", "--consumed-batches-per-rank", "1"]


@pytest.mark.parametrize("argv", [
    ["cache", "evict", "/nonexistent", "--invalid"],
    ["fleet", "cache", "evict", "--nodes", "n1", "--invalid"],
    ["checkpoints", "prune", "/nonexistent", "--incomplete"],
    MIGRATE,
])
@pytest.mark.parametrize("yes", ["--yes", "-y"])
def test_dry_run_with_yes_is_a_usage_error(argv, yes, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--dry-run", yes])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2
    assert err[0] == "error: argument -y/--yes: not allowed with argument --dry-run", err
    assert err[1].startswith("try: fvconsole ")


def test_y_is_yes_and_dry_run_is_the_default(tmp_path, capsys) -> None:
    """Habits from `hf cache`: `-y` executes, `--dry-run` previews exactly as no flag does."""
    from fvconsole.demo.cache_builders import make_key, write_cache_entry

    root = tmp_path / "wcache"
    write_cache_entry(root, make_key("bad"), num_shards=1, status="incomplete", tensor_bytes=64, last_used=1.0)
    write_cache_entry(root, make_key("good"), num_shards=1, tensor_bytes=64)
    for _ in range(2):  # the same text twice
        assert main(["cache", "evict", str(root), "--invalid", "--grace", "0s", "--no-journal"]) == 0
    plain = capsys.readouterr().out
    assert main(["cache", "evict", str(root), "--invalid", "--grace", "0s", "--no-journal", "--dry-run"]) == 0
    assert capsys.readouterr().out * 2 == plain and "re-run with --yes" in plain
    assert main(["cache", "evict", str(root), "--invalid", "--grace", "0s", "--no-journal", "-y"]) == 0
    assert sorted(p.name for p in root.iterdir()) == [make_key("good")]


#: Parameters that hold any value on purpose (a run config's value, a table's cell), by module:function:parameter.
ANY_ON_PURPOSE = {"cli/checkpoints.py:short:value", "cli/checkpoints.py:critical_values:config"}


def test_the_cli_names_the_cores_records_in_its_hints_not_any() -> None:
    """Issue 35 item 4: about 20 parameters of these modules were typed ``Any`` where they hold a core record
    (a side effect of function-local imports); the hints name the records (``TYPE_CHECKING`` imports)."""
    loose = []
    for name in ("checkpoints", "migrate", "prune", "reshard_text", "sidecars", "fleet", "cache"):
        path = PACKAGE / "cli" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            hints = [(a.arg, a.annotation) for a in (*node.args.args, *node.args.kwonlyargs)]
            hints.append(("return", node.returns))
            for arg, hint in hints:
                text = ast.unparse(hint) if hint is not None else ""
                if arg not in ("self", "args") and (text == "Any" or text.startswith("Any |")
                                                    or text.endswith("| Any") or text.startswith("Sequence[Any]")):
                    where = f"cli/{name}.py:{node.name}:{arg}"
                    if where not in ANY_ON_PURPOSE:
                        loose.append(where)
    assert loose == []


#: Vocabularies the CLI owns because nothing in the core interprets them: option -> why.
CLI_VOCABULARIES = {"--print-completion": "shell names for shtab's completion script (cli/completion.py)"}


def _actions_with_choices(parser: argparse.ArgumentParser, path: str = "fvconsole"):
    """(command path, action) for every option or positional with choices, in every subparser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions_with_choices(sub, f"{path} {name}")
        elif action.choices is not None:
            yield path, action


def _core_vocabularies() -> list[tuple[str, ...]]:
    """Every tuple of strings a core package's façade exports."""
    import importlib
    import pkgutil

    import fvconsole.core

    found = []
    for info in pkgutil.iter_modules(fvconsole.core.__path__):
        facade = importlib.import_module(f"fvconsole.core.{info.name}")
        for name in facade.__all__:
            value = getattr(facade, name)
            if isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
                found.append(value)
    return found


def test_every_vocabulary_the_cli_offers_is_the_cores() -> None:
    """Issue 35 item 4: each option's choices are the very tuple a core façade exports (the module that
    interprets the value owns its spelling), so `cache ls --sort`/`--format` cannot drift from the core."""
    core = _core_vocabularies()
    spelled_here = sorted(f"{path} {'/'.join(action.option_strings) or action.dest}"
                          for path, action in _actions_with_choices(build_parser())
                          if not any(action.choices is vocabulary for vocabulary in core)
                          and not set(action.option_strings) & set(CLI_VOCABULARIES))
    assert spelled_here == []


def test_no_choices_literal_remains_in_the_cli() -> None:
    """No ``choices=`` (nor ``add_format_args``'s choices) is written as a literal anywhere in cli/."""
    literals = []
    for path in sorted((PACKAGE / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            values = [k.value for k in node.keywords if k.arg == "choices"]
            if ast.unparse(node.func).endswith("add_format_args"):
                values += node.args[1:2]
            literals += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for v in values
                         if isinstance(v, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Constant))]
    assert literals == []
