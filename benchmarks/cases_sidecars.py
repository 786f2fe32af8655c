"""`migrate --yes` and `sidecars verify` end to end, each in a fresh interpreter (issue 14).

What a login node pays: interpreter start, imports, planning, writing (or reading) every
rank's sidecar, the receipt. The baselines are the upstream way of doing the same I/O with
torch, also in a fresh interpreter (so both pay their imports), measured in the same run:

* migrate: the seed script's write loop (``baselines.seed_write_loop``: FastVideo's
  ``_atomic_torch_save`` per rank, ``torch.load`` back, sha256, receipt), fed the plan's
  payloads precomputed (so the baseline is spared the planning that fvconsole's side includes);
* verify: ``torch.load(weights_only=True)`` and sha256 of every sidecar, what verify did before.

Cross-check: fvconsole's sidecars must be byte-identical to the baseline's ``torch.save`` files.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

from benchmarks import inputs
from benchmarks.harness import Row, Timing, run_command

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP = 50

_SEED_LOOP = """
import json, sys
from benchmarks.baselines import seed_write_loop
with open(sys.argv[1], encoding="utf-8") as handle:
    payloads = json.load(handle)
seed_write_loop(sys.argv[2], range(len(payloads)), lambda rank: payloads[rank])
"""

_TORCH_VERIFY = """
import hashlib, os, sys, torch
directory, world = sys.argv[1], int(sys.argv[2])
for rank in range(world):
    path = os.path.join(directory, f"dataloader_state_rank{rank}.pt")
    with open(path, "rb") as handle:
        hashlib.sha256(handle.read()).hexdigest()
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert state["rank"] == rank
"""


def _fastest(cmd: list[str] | Callable[[int], list[str]], repeat: int) -> Timing:
    """Fastest of ``repeat`` runs of a command that must exit 0 (``cmd(i)``: run i's command)."""
    runs = []
    for i in range(max(1, repeat)):
        timing, code = run_command(cmd(i) if callable(cmd) else cmd, cwd=REPO)
        if code != 0:
            raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {code}")
        runs.append(timing)
    return Timing(min(t.wall for t in runs), min(t.cpu for t in runs))


def sidecar_cases(root: str, ranks: int, repeat: int) -> list[Row]:
    """Both rows on ``root``'s disk, then again on tmpfs when there is one.

    On a disk both sides pay 1024 fsyncs, whose cost depends on the disk and on whatever else
    writes to it; on tmpfs fsync is free, which leaves what each side computes and imports.
    """
    rows = _cases(root, ranks, repeat, "")
    with inputs.tmpfs_dir() as shm:
        if shm is not None:
            rows += _cases(shm, ranks, repeat, ", tmpfs")
    return rows


def _cases(root: str, ranks: int, repeat: int, where: str) -> list[Row]:
    """Both rows; the verify case reads the set the migrate case wrote.

    Every run writes into a directory of its own, and none is deleted until the case is done:
    deleting a set right before the next run makes that run's file creations slower on some
    filesystems (ext4 without a journal, as here, skips inodes freed in the last minutes when
    allocating, reading the inode table for each; 0.3-0.6 s per 1024 files for either side),
    which no real migration pays and which would be measured on both sides alike.
    """
    from fvconsole.core.migration.plan import preview_migration

    run = inputs.migration_run(root, world_size=ranks, num_row_groups=ranks * 16, step=STEP)
    outs = [os.path.join(root, f"fv-out-{i}") for i in range(max(1, repeat))]
    seed_outs = [os.path.join(root, f"seed-out-{i}") for i in range(max(1, repeat))]
    out, seed_out = outs[-1], seed_outs[-1]
    plan = preview_migration(run.request(out)).plan
    if plan is None:
        raise AssertionError("the benchmark's migration was refused")
    payload_file = os.path.join(root, "payloads.json")
    with open(payload_file, "w", encoding="utf-8") as handle:
        json.dump([plan.sidecar_payload(c.rank) for c in plan.ranks], handle)

    fv = _fastest(lambda i: [sys.executable, "-m", "fvconsole", *run.cli_args(outs[i]), "--yes", "--json"], repeat)
    seed = _fastest(lambda i: [sys.executable, "-c", _SEED_LOOP, payload_file, seed_outs[i]], repeat)
    identical = all(
        _read(os.path.join(out, name)) == _read(os.path.join(seed_out, name))
        for name in (f"dataloader_state_rank{r}.pt" for r in range(ranks))
    )
    if not identical:
        raise AssertionError("fvconsole's sidecars differ from torch.save's bytes")
    torch_import = _fastest([sys.executable, "-c", "import torch"], repeat)
    ratio = seed.wall / fv.wall
    migrate = Row(
        f"`migrate --yes` {ranks} ranks (fresh interpreter{where})", fv.wall, seed.wall,
        "seed write loop with torch (atomic torch.save, load, sha256)", ">=5x and <1 s",
        ratio >= 5 and fv.wall < 1.0,
        f"sidecars byte-identical to torch.save; no torch import (`import torch` alone: {torch_import.wall:.2f} s); "
        f"cpu {fv.cpu:.2f} s vs {seed.cpu:.2f} s",
    )
    verify_cmd = [sys.executable, "-m", "fvconsole", "sidecars", "verify", "--config", run.config_path,
                  "--checkpoint", run.checkpoint, "--sidecar-dir", out, "--json"]
    fv_verify = _fastest(verify_cmd, repeat)
    torch_verify = _fastest([sys.executable, "-c", _TORCH_VERIFY, out, str(ranks)], repeat)
    verify = Row(
        f"`sidecars verify` {ranks} ranks (fresh interpreter{where})", fv_verify.wall, torch_verify.wall,
        "torch.load(weights_only=True) + sha256 per rank", "<1 s", fv_verify.wall < 1.0,
        f"plan recomputed, receipt and every sidecar checked; cpu {fv_verify.cpu:.2f} s vs {torch_verify.cpu:.2f} s",
    )
    return [migrate, verify]


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()
