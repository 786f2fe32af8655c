#!/usr/bin/env python3
"""Build the demo with `--no-tui`, then run the commands it prints, in order, as a user would.

    python .ci/demo_smoke.py DIR

Every printed headless command must exit 0 (`cache verify`: 1, the demo's cache fails it by design); the last one (the console) is started under a
real pseudo-terminal and must reach its first screen and quit on `q` with exit 0. Checks
that the printed list still holds the steps a new user is walked through, so the demo
output and this check cannot drift apart silently.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: The steps whose exit code is not 0 by design (the demo's cache has an entry that fails verification).
EXPECTED_EXIT = {"cache verify": 1}

def plain(match):
    """A step typed as is: ``fvconsole ...``."""
    return lambda a: bool(a) and a[0] == "fvconsole" and match(a)


def stand_in_fleet(match):
    """A step with the demo's stand-in srun first on PATH: ``PATH=DIR/fleet/bin:"$PATH" fvconsole ...``."""
    return lambda a: len(a) > 1 and a[0].startswith("PATH=") and a[1] == "fvconsole" and match(a[1:])


# (what the step is, predicate on its argv): the order the demo must print them in.
STEPS = [
    ("checkpoints ls", plain(lambda a: a[1:3] == ["checkpoints", "ls"] and "map-style" not in a[3])),
    ("checkpoints show", plain(lambda a: a[1:3] == ["checkpoints", "show"] and "--tensors" not in a)),
    ("checkpoints show --tensors", plain(lambda a: a[1:3] == ["checkpoints", "show"] and "--tensors" in a)),
    ("checkpoints ls (map-style run)", plain(lambda a: a[1:3] == ["checkpoints", "ls"] and "map-style" in a[3])),
    ("migrate dry run (text_only run)", plain(lambda a: a[1] == "migrate" and "run-text-only.yaml" in a[3])),
    ("migrate dry run", plain(lambda a: a[1] == "migrate" and "--yes" not in a and "--reshard" not in a)),
    ("migrate --yes", plain(lambda a: a[1] == "migrate" and "--yes" in a)),
    ("preflight (after the migration)", plain(lambda a: a[1] == "preflight")),
    ("sidecars verify", plain(lambda a: a[1:3] == ["sidecars", "verify"] and "validated-100" not in a[-1])),
    ("sidecars verify (FastVideo's receipt)",
     plain(lambda a: a[1:3] == ["sidecars", "verify"] and "validated-100" in a[-1])),
    ("migrate --reshard dry run (native checkpoint)",
     plain(lambda a: a[1] == "migrate" and "--reshard" in a and "--yes" not in a)),
    ("cache ls", plain(lambda a: a[1:3] == ["cache", "ls"])),
    ("cache evict dry run", plain(lambda a: a[1:3] == ["cache", "evict"] and "--verify" not in a and "--yes" not in a)),
    ("cache verify", plain(lambda a: a[1:3] == ["cache", "verify"])),
    ("cache evict --verify dry run",
     plain(lambda a: a[1:3] == ["cache", "evict"] and "--verify" in a and "--yes" not in a)),
    ("fleet cache ls (stand-in fleet)",
     stand_in_fleet(lambda a: a[1:4] == ["fleet", "cache", "ls"] and "--job" not in a)),
    ("fleet cache ls --job (stand-in fleet)",
     stand_in_fleet(lambda a: a[1:4] == ["fleet", "cache", "ls"] and "--job" in a)),
    ("fleet cache evict dry run (stand-in fleet)",
     stand_in_fleet(lambda a: a[1:4] == ["fleet", "cache", "evict"] and "--yes" not in a)),
    ("console", plain(lambda a: len(a) > 1 and a[1].startswith("--"))),
    ("console (stand-in fleet)", stand_in_fleet(lambda a: len(a) > 1 and a[1].startswith("--"))),
]
#: The steps that need the full install's stand-in fleet (the lean install's smoke run leaves them out).
FLEET_STEPS = {name for name, _ in STEPS if "stand-in fleet" in name}


def step_kinds(argvs: list[list[str]]) -> list[str]:
    """Each printed command's step name ("?" for one that is no step)."""
    return [next((name for name, match in STEPS if match(argv)), "?") for argv in argvs]


def printed_commands(output: str) -> list[str]:
    """The indented commands after "equivalent commands:", continuation lines joined."""
    lines = output.split("equivalent commands:", 1)[1].splitlines()
    commands: list[str] = []
    for line in lines:
        if not line.startswith("  "):
            continue
        if commands and commands[-1].endswith("\\"):
            commands[-1] += "\n" + line
        else:
            commands.append(line.strip())
    return commands


def main() -> int:
    target = sys.argv[1]
    started = time.monotonic()
    build = subprocess.run([sys.executable, "-m", "fvconsole", "demo", target, "--no-tui"], capture_output=True,
                           text=True)
    print(build.stdout, end="")
    if build.returncode != 0:
        print(f"demo_smoke: `fvconsole demo {target} --no-tui` exited {build.returncode}: {build.stderr}")
        return 1
    commands = printed_commands(build.stdout)
    argvs = [shlex.split(c, comments=True) for c in commands]
    kinds = step_kinds(argvs)
    if kinds != [name for name, _ in STEPS]:
        print(f"demo_smoke: the demo printed these steps: {kinds}; expected {[n for n, _ in STEPS]}")
        return 1
    failed = 0
    for command, kind in zip(commands, kinds, strict=True):
        if kind.startswith("console"):
            cmd = [sys.executable, os.path.join(HERE, "pty_console.py"), "--expect", "checkpoints,",
                   "--expect", "Quit", "--timeout", "120", "--", "bash", "-c", command]
            code = subprocess.run(cmd).returncode
        else:
            proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
            code = proc.returncode
            if code != EXPECTED_EXIT.get(kind, 0):
                print(proc.stdout[-3000:] + proc.stderr[-3000:])
        print(f"demo_smoke: {kind}: exit {code}")
        failed += code != EXPECTED_EXIT.get(kind, 0)
    print(f"demo_smoke: {len(commands) - failed}/{len(commands)} printed commands ok "
          f"in {time.monotonic() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
