"""Run the fvconsole CLI with the integration this area proposes patched in (for measuring it).

``core.checkpoints.dcp_state_keys`` reads the keys with ``benchmarks.dcp_keys`` first and asks
torch only when that returns None. (The other one, ``core.manifest.compute_fingerprint`` →
``core.fastjson.fingerprint``, is already integrated by its owner.)

Usage: ``python -m benchmarks.patched_cli <fvconsole args>``; prints the heavy modules loaded on stderr.
"""

from __future__ import annotations

import os
import sys


def install() -> None:
    from benchmarks.dcp_keys import dcp_state_keys_without_torch
    from fvconsole.core import checkpoints

    original = checkpoints.dcp_state_keys

    def dcp_state_keys(checkpoint_dir: str | os.PathLike[str]) -> list[str]:
        meta = os.path.join(os.fspath(checkpoint_dir), "dcp", ".metadata")
        try:
            with open(meta, "rb") as handle:
                keys = dcp_state_keys_without_torch(handle.read())
        except OSError:
            keys = None
        return keys if keys is not None else original(checkpoint_dir)

    checkpoints.dcp_state_keys = dcp_state_keys


def main() -> int:
    install()
    from fvconsole.cli import main as cli_main

    code = cli_main(sys.argv[1:])
    heavy = [m for m in ("torch", "textual", "pyarrow") if m in sys.modules]
    print(f"heavy modules loaded: {heavy}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
