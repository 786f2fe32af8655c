"""One error contract for usage errors: one `error:` line (+ a `try:` hint), {"error"} under --json, exit 2.

Also: the console refuses to start without a terminal instead of hanging.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys

import pytest

from fvconsole.cli import build_parser, main

HINT_PREFIX = "try: fvconsole"


def run_usage(argv: list[str], capsys) -> tuple[int, str, list[str]]:
    """main(argv) for an argv that must be a usage error: (exit code, stdout, stderr lines)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    return info.value.code, captured.out, [line for line in captured.err.splitlines() if line.strip()]


def assert_contract(code: int, out: str, err: list[str], *, json_out: bool, hint: str) -> str:
    """Exit 2, `error: ...` then `try: <prog> --help`, stdout empty or exactly {"error": <same text>}."""
    assert code == 2
    assert len(err) == 2, err
    assert err[0].startswith("error: ") and "usage:" not in "".join(err)
    assert err[1] == f"try: {hint} --help"
    if json_out:
        doc = json.loads(out)
        assert isinstance(doc.pop("code"), str)  # a stable code for scripts (issue 38 item 15)
        assert doc == {"error": err[0][len("error: "):]}
    else:
        assert out == ""
    return err[0]


@pytest.mark.parametrize(
    ("argv", "hint", "suggestion"),
    [
        (["cache", "ls", "/x", "--jsno"], "fvconsole cache ls", "(did you mean --json?)"),
        (["checkpoints", "ls", "/x", "--json", "--jsno"], "fvconsole checkpoints ls", "(did you mean --json?)"),
        (["cache", "ls", "--sort", "sise", "--json"], "fvconsole cache ls", "(did you mean size?)"),
        (["migrat", "--json"], "fvconsole", "(did you mean migrate?)"),
        (["cache", "lss"], "fvconsole cache", "(did you mean ls?)"),
        (["fleet", "cache", "evict", "--max-gbb", "3"], "fvconsole fleet cache evict", "(did you mean --max-gb?)"),
        (["--confg", "run.yaml"], "fvconsole", "unrecognized arguments: --confg (did you mean --config?)"),
        (["--cache-rot", "/x", "cache", "ls"], "fvconsole", "(did you mean --cache-root?)"),
    ],
)
def test_misspellings_get_one_line_and_a_suggestion(argv, hint, suggestion, capsys) -> None:
    code, out, err = run_usage(argv, capsys)
    line = assert_contract(code, out, err, json_out="--json" in argv, hint=hint)
    assert line.endswith(suggestion), line


def test_missing_required_flags_name_them_and_a_misspelled_one(capsys) -> None:
    code, out, err = run_usage(["migrate", "--json", "--confg", "run.yaml"], capsys)
    line = assert_contract(code, out, err, json_out=True, hint="fvconsole migrate")
    assert "the following arguments are required: --config" in line
    assert line.endswith("unrecognized: --confg (did you mean --config?)"), line


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate", "--json", "--config", "c", "--checkpoint", "k", "--output-dir", "o", "--expected-step", "abc",
         "--expected-world-size", "8", "--consumed-batches-per-rank", "1"],
        ["cache"],
        ["cache", "evict", "--json", "--key"],
        ["--print-completion", "tcsh"],
        ["checkpoints", "ls", "--json", "/x", "extra", "args"],
    ],
    ids=["bad-type", "no-action", "missing-value", "bad-shell", "extra-positionals"],
)
def test_other_usage_errors_follow_the_contract(argv, capsys) -> None:
    code, out, err = run_usage(argv, capsys)
    entered = [a for a in argv if not a.startswith("-")]
    hint = {"migrate": "fvconsole migrate", "cache": "fvconsole cache evict" if "evict" in argv else "fvconsole cache",
            "checkpoints": "fvconsole checkpoints ls"}.get(entered[0] if entered else "", "fvconsole")
    assert_contract(code, out, err, json_out="--json" in argv, hint=hint)


def _leaf_parsers(parser: argparse.ArgumentParser):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for sub in dict.fromkeys(action.choices.values()):
            yield from _leaf_parsers(sub)


JSON_COMMANDS = [p.prog.split()[1:] for p in _leaf_parsers(build_parser())
                 if any("--json" in a.option_strings for a in p._actions)]


def test_every_command_with_json_is_covered() -> None:
    # The walk found the commands the README documents with --json (so the next test covers them).
    names = {" ".join(c) for c in JSON_COMMANDS}
    assert {"checkpoints ls", "checkpoints show", "migrate", "sidecars verify", "cache ls", "cache evict",
            "fleet cache ls", "fleet cache evict"} <= names


@pytest.mark.parametrize("command", JSON_COMMANDS, ids=lambda c: " ".join(c))
def test_every_json_command_suggests_json_for_a_typo(command, capsys) -> None:
    code, out, err = run_usage([*command, "--jsonn"], capsys)
    line = assert_contract(code, out, err, json_out=False, hint="fvconsole " + " ".join(command))
    assert line.endswith("(did you mean --json?)"), line


def test_usage_error_in_a_real_process_exits_2_with_json(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "fvconsole", "cache", "ls", str(tmp_path), "--json", "--sortt", "size"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: unrecognized arguments: --sortt size (did you mean --sort?)",
                                        "try: fvconsole cache ls --help"]
    assert json.loads(proc.stdout) == {"error": "unrecognized arguments: --sortt size (did you mean --sort?)",
                                       "code": "usage"}


def test_control_characters_in_a_bad_argument_are_escaped_on_stderr(capsys) -> None:
    code, out, err = run_usage(["cache", "ls", "--json", "--x\x1b]0;pwned\x07"], capsys)
    assert code == 2 and "\x1b" not in "".join(err) and "\\x1b" in err[0]
    assert "\x1b" in json.loads(out)["error"]  # --json stays exact


# --------------------------------------------------------------------------- no terminal


NO_TTY = "error: the console needs a terminal; use a subcommand (fvconsole --help)"


@pytest.mark.parametrize("which", ["stdin", "stdout"])
def test_console_without_a_terminal_exits_2_instead_of_hanging(which) -> None:
    primary, replica = os.openpty()
    try:
        # One side is a real terminal, the other is not: either is enough to refuse.
        stdin = replica if which == "stdout" else subprocess.DEVNULL
        stdout = replica if which == "stdin" else subprocess.PIPE
        proc = subprocess.run([sys.executable, "-m", "fvconsole"], stdin=stdin, stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(primary)
        os.close(replica)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [NO_TTY]


def test_console_refusal_in_process(capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # not a terminal, also under `pytest -s`
    assert main(["--config", "nowhere.yaml"]) == 2
    assert capsys.readouterr().err.splitlines() == [NO_TTY]


def test_demo_without_a_terminal_builds_and_prints_the_commands(tmp_path) -> None:
    root = tmp_path / "ws"
    proc = subprocess.run([sys.executable, "-m", "fvconsole", "demo", str(root)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("note: no terminal")
    assert f"demo workspace: {root}" in proc.stdout and "equivalent commands:" in proc.stdout
    assert (root / "output" / "checkpoint-300").is_dir()
