"""Issue 19 item 4: an untrusted JSON document costs a bounded multiple of its size, and only itself.

The real CLI in a child under an address-space cap (as ``test_bounded_input`` runs hostile
inputs): a cache manifest of 40 MiB of ``{}`` objects took ~27x its size once parsed, so
``cache ls`` died with MemoryError and the whole listing was lost (D33).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from sized_cache import key_of, sized_entry

from .harness import cli_env

#: Enough for ``cache ls`` of a small root (~100 MB), far less than 27 x 40 MiB.
ADDRESS_SPACE_CAP = 1 << 30


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


@pytest.mark.fault("hostile input", "a cache manifest.json of 40 MiB of `{}` objects, `cache ls --json` under `ulimit -v 1G` (D33)")
def test_a_manifest_of_empty_objects_breaks_only_its_entry(tmp_path: Path) -> None:
    root = tmp_path / "wcache"
    good = [sized_entry(root, name, 1, (3 - i) * 86400.0) for i, name in enumerate("abc")]
    bomb = sized_entry(root, "bomb", 1, 86400.0)
    manifest = root / bomb / "manifest.json"
    head = json.dumps(json.loads(manifest.read_text()))[:-1] + ', "pad": ['
    with open(manifest, "w") as fh:
        fh.write(head)
        fh.write("{}," * ((40 << 20) // 3))
        fh.write("{}]}")
    assert manifest.stat().st_size >= 40 << 20
    proc = subprocess.run([sys.executable, "-m", "fvconsole", "cache", "ls", str(root), "--json"],
                          env=cli_env(), capture_output=True, text=True, timeout=120, preexec_fn=_cap)
    assert proc.returncode == 0, proc.stderr
    entries = {e["key"]: e for e in json.loads(proc.stdout)["entries"]}
    assert sorted(entries) == sorted([*good, key_of("bomb")])
    assert all(entries[k]["status"] == "complete" for k in good)
    assert entries[bomb]["status"] == "invalid"
    assert "manifest.json is not usable JSON (too many items for its size" in entries[bomb]["explanation"]
