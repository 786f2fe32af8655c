"""`fvconsole --print-completion SHELL`: scripts generated from the parser, checked in a real bash."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest


def completion(shell: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "fvconsole", "--print-completion", shell],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("completion") / "fvconsole.bash"
    path.write_text(completion("bash"))
    return str(path)


def bash_complete(script: str, words: list[str], cwd: str) -> list[str]:
    """What bash offers for the last word of ``fvconsole WORDS...`` (the real completion function)."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    words_text = " ".join(f"'{w}'" for w in ["fvconsole", *words])
    program = (f"source '{script}'; COMP_WORDS=({words_text}); COMP_CWORD={len(words)}; "
               "COMP_LINE=\"${COMP_WORDS[*]}\"; COMP_POINT=${#COMP_LINE}; _shtab_fvconsole; "
               "printf '%s\\n' \"${COMPREPLY[@]}\"")
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                          cwd=cwd, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


def test_bash_completes_subcommands_options_and_choices(bash_script, tmp_path) -> None:
    assert bash_complete(bash_script, ["mig"], str(tmp_path)) == ["migrate"]
    assert sorted(bash_complete(bash_script, ["cache", ""], str(tmp_path))) == ["evict", "ls", "verify"]
    assert sorted(bash_complete(bash_script, ["cache", "evict", "--ke"], str(tmp_path))) == ["--keep", "--key"]
    assert bash_complete(bash_script, ["cache", "ls", "--sort", "s"], str(tmp_path)) == ["size"]
    assert "--expected-world-size" in bash_complete(bash_script, ["migrate", "--exp"], str(tmp_path))


def test_bash_completes_directories_for_dir_arguments(bash_script, tmp_path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "run.yaml").write_text("x: 1\n")
    offered = bash_complete(bash_script, ["cache", "ls", "ru"], str(tmp_path))
    assert offered and all(o.startswith("runs") for o in offered)  # a directory, never run.yaml
    assert "run.yaml" in bash_complete(bash_script, ["migrate", "--config", "run"], str(tmp_path))


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_are_generated_from_the_parser(shell) -> None:
    script = completion(shell)
    # Options only the parser knows: a hand-written script would drift from them.
    for word in ("migrate", "--expected-world-size", "--consumed-batches-per-rank", "evict", "--older-than"):
        assert word in script, word


def test_help_documents_completion() -> None:
    proc = subprocess.run([sys.executable, "-m", "fvconsole", "--help"], capture_output=True, text=True, timeout=60)
    assert "--print-completion SHELL" in proc.stdout and "fvconsole --print-completion fish" in proc.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_every_script_ends_with_one_newline(shell: str) -> None:
    script = completion(shell)
    assert script.endswith("\n") and not script.endswith("\n\n")


def test_the_readmes_completion_line_works_on_a_fresh_account(tmp_path) -> None:
    """Run the README's bash line as written, with a HOME where no completions folder exists yet."""
    import os
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    lines = re.findall(r"`([^`]*fvconsole --print-completion bash[^`]*)`", readme)
    assert len(lines) == 1, lines
    home = tmp_path / "home"
    home.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "fvconsole"  # `fvconsole` as installed: this interpreter, this checkout
    shim.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m fvconsole \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, "HOME": str(home), "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-e", "-c", lines[0]], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    written = home / ".local/share/bash-completion/completions/fvconsole"
    assert written.read_text() == completion("bash")
