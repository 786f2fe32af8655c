"""Hostile pickles (issue 10 items 7-9): DCP ``.metadata`` and sidecar ``data.pkl`` built opcode
by opcode, each read by the real CLI in a child process with an address-space cap and a
deadline. The child reports its peak RSS (VmHWM), so "bounded" is measured, not assumed.

Every case must finish in seconds with either the right answer (a hostile but well-formed
``.metadata`` still lists its keys) or one clean ``error:`` line naming the file.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from .harness import CliResult, assert_clean_error, cli_env
from .workspace import MigrationWorkspace

DEADLINE = 60  # seconds; each case takes about one on the fixed code
MIB = 2**20

_RUNNER = """
import json, resource, sys
cap, report = int(sys.argv[1]), sys.argv[2]
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
from fvconsole.cli import main
try:
    code = main(sys.argv[3:])
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 2
# VmHWM is this address space's peak; ru_maxrss would include the parent's from before exec.
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
with open(report, "w") as handle:
    json.dump({"code": code, "maxrss": peak}, handle)
sys.exit(code)
"""


def run_bounded(argv: list[str], tmp_path: Path, *, cap_bytes: int) -> tuple[CliResult, int, float]:
    """The CLI in a child under RLIMIT_AS=cap_bytes; (result, peak RSS bytes, seconds)."""
    report = tmp_path / "probe.json"
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", _RUNNER, str(cap_bytes), str(report), *map(str, argv)],
                              env=cli_env(), capture_output=True, text=True, timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`fvconsole {' '.join(map(str, argv))}` did not finish within {DEADLINE} s")
    seconds = time.monotonic() - start
    result = CliResult(tuple(map(str, argv)), proc.returncode, proc.stdout, proc.stderr)
    assert report.exists(), f"the child died without reporting:\n{result.describe()}"
    probe = json.loads(report.read_text())
    return result, probe["maxrss"], seconds


@pytest.fixture(scope="session")  # a lookup in the session's cache
def ws(migration_workspace) -> MigrationWorkspace:
    return migration_workspace(world=4)


# --------------------------------------------------------------------------- opcode builders


def text(value: str) -> bytes:
    """BINUNICODE."""
    raw = value.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def long1(value: int) -> bytes:
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def dcp_metadata(planner_data: bytes) -> bytes:
    """A well-formed DCP Metadata pickle (two state keys) whose planner_data is ``planner_data``."""
    return b"".join([
        b"\x80\x02",
        b"ctorch.distributed.checkpoint.metadata\nMetadata\n)\x81",
        b"}(", text("state_dict_metadata"), b"}(", text("dataloader.state"), b"N", text("model.w"), b"N", b"u",
        text("planner_data"), planner_data,
        b"ub.",
    ])


def checkpoint_with_metadata(ws: MigrationWorkspace, tmp_path: Path, data: bytes) -> Path:
    out = tmp_path / "output"
    shutil.copytree(ws.checkpoint.parent, out, symlinks=True)
    ckpt = out / ws.checkpoint.name
    (ckpt / "dcp" / ".metadata").write_bytes(data)
    return ckpt


def show(ws: MigrationWorkspace, tmp_path: Path, data: bytes, cap: int = 2048 * MIB) -> tuple[dict, int]:
    """`checkpoints show --json` of a copy of the checkpoint with ``data`` as dcp/.metadata."""
    ckpt = checkpoint_with_metadata(ws, tmp_path, data)
    result, rss, _ = run_bounded(["checkpoints", "show", ckpt, "--json"], tmp_path, cap_bytes=cap)
    assert "Traceback" not in result.stderr, result.describe()
    assert result.returncode in (0, 1), result.describe()
    return json.loads(result.stdout)["checkpoint"], rss


# --------------------------------------------------------------------------- DCP .metadata


@pytest.mark.fault("hostile input", "DCP .metadata: 1.25M GLOBAL opcodes (15 MB) must not make a class each")
def test_dcp_many_global_opcodes_are_interned(ws, tmp_path, trials) -> None:
    data = dcp_metadata(b"](" + b"ctorch\nSize\n" * 1_250_000 + b"e")
    assert len(data) > 15_000_000
    info, rss = show(ws, tmp_path, data)
    assert info["kind"] == "legacy" and info["dataloader_keys"] == 1, info["problems"]
    assert rss < 400 * MIB, f"peak RSS {rss / MIB:.0f} MiB"
    trials.add("keys listed, bounded memory")


@pytest.mark.fault("hostile input", "DCP .metadata: 100k distinct globals")
def test_dcp_distinct_globals_are_capped(ws, tmp_path, trials) -> None:
    data = dcp_metadata(b"](" + b"".join(b"ctorch\nC%d\n" % i for i in range(100_000)) + b"e")
    info, rss = show(ws, tmp_path, data)
    assert info["kind"] == "unknown"
    assert any(".metadata" in p and "distinct classes" in p for p in info["problems"]), info["problems"]
    trials.add("refused naming the file")


@pytest.mark.fault("hostile input", "DCP .metadata: LONG_BINPUT 2**31-1 (the C unpickler's memo array is 16 GiB)")
def test_dcp_huge_memo_index(ws, tmp_path, trials) -> None:
    info, rss = show(ws, tmp_path, dcp_metadata(b"Nr\xff\xff\xff\x7f"))
    assert info["kind"] == "legacy", info["problems"]
    assert rss < 400 * MIB
    trials.add("keys listed, bounded memory")


@pytest.mark.fault("hostile input", "DCP .metadata: one 100k-item list copied by 100k OrderedDict calls")
def test_dcp_quadratic_copying_is_capped(ws, tmp_path, trials) -> None:
    pairs = b"]q\x00(" + b"K\x00N\x86" * 100_000 + b"e0"
    copies = b"](" + b"ccollections\nOrderedDict\nh\x00\x85R" * 100_000 + b"e"
    info, _ = show(ws, tmp_path, dcp_metadata(pairs + copies))
    assert any("copying/hashing work" in p for p in info["problems"]), info["problems"]
    trials.add("refused naming the file")


@pytest.mark.fault("hostile input", "DCP .metadata: 200k dict keys with one hash (hash flooding)")
def test_dcp_hash_flooding_is_refused(ws, tmp_path, trials) -> None:
    modulus = 2**61 - 1  # hash(k * modulus) == 0 for every k
    flood = b"}(" + b"".join(long1(k * modulus) + b"N" for k in range(1, 200_001)) + b"u"
    info, _ = show(ws, tmp_path, dcp_metadata(flood))
    assert any("dict key" in p for p in info["problems"]), info["problems"]
    trials.add("refused naming the file")


@pytest.mark.fault("hostile input", "`checkpoints show` under `ulimit -v 512M` (a 1 GiB read buffer was allocated up front)")
def test_dcp_metadata_read_under_a_small_address_space_limit(ws, tmp_path, trials) -> None:
    good = (ws.checkpoint / "dcp" / ".metadata").read_bytes()
    info, _ = show(ws, tmp_path, good, cap=512 * MIB)
    assert info["kind"] == "legacy", info["problems"]
    trials.add("keys listed")


# --------------------------------------------------------------------------- sidecars


@pytest.fixture(scope="session")  # a lookup: reliability/conftest.py builds each set once per worker
def good_set(ws: MigrationWorkspace, good_set_of) -> Path:
    return good_set_of(ws)


def zip_records(records: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip of (name, stored bytes, uncompressed size, method) records.

    Hand-built (not Python's zipfile) so a record can claim any size; a compressed record's
    CRC is left 0 (the check would only come after expanding it).
    """
    out, central = bytearray(), bytearray()
    for name, stored, size, method in records:
        raw = name.encode()
        crc = zlib.crc32(stored) if method == 0 else 0
        offset = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(stored), size, len(raw), 0)
        out += raw + stored
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(stored),
                               size, len(raw), 0, 0, 0, 0, 0, offset) + raw
    cd = len(out)
    out += central
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(records), len(records), len(central), cd, 0)
    return bytes(out)


def deflated_zeros(total: int) -> bytes:
    """A raw deflate stream of ``total`` zero bytes, made from one compressed chunk repeated."""
    chunk = 4 * MIB
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(b"\0" * chunk) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.flush(zlib.Z_FINISH)
    return block * (total // chunk) + tail


def verify_victim(ws: MigrationWorkspace, good_set: Path, tmp_path: Path, data: bytes | None,
                  cap: int = 3 * 1024 * MIB) -> tuple[CliResult, int, float, Path]:
    target = tmp_path / "state"
    shutil.copytree(good_set, target)
    victim = target / "dataloader_state_rank1.pt"
    victim.unlink()
    if data is None:
        os.mkfifo(victim)
    else:
        victim.write_bytes(data)
    result, rss, seconds = run_bounded(ws.verify_args(target), tmp_path, cap_bytes=cap)
    return result, rss, seconds, victim


def sidecar_pickle(state: bytes) -> bytes:
    """A sidecar-shaped data.pkl whose ``state`` value is the opcodes ``state``."""
    return b"\x80\x02}(" + text("version") + b"K\x01" + text("state") + state + b"u."


def sidecar_zip(pkl: bytes) -> bytes:
    return zip_records([("archive/data.pkl", pkl, len(pkl), 0), ("archive/version", b"3\n", 2, 0)])


@pytest.mark.fault("hostile input", "sidecar data.pkl nested 200k lists deep (RecursionError before)")
def test_sidecar_deep_nesting(ws, good_set, tmp_path, trials) -> None:
    deep = b"]" * 200_000 + b"a" * 199_999
    result, rss, _, victim = verify_victim(ws, good_set, tmp_path, sidecar_zip(sidecar_pickle(deep)))
    line = assert_clean_error(result, names=[victim.name])
    assert "deeper than" in result.stdout, result.stdout[-2000:]
    assert len(line) < 1000
    trials.add("refused, one line")


@pytest.mark.fault("hostile input", "sidecar data.pkl: 500 bytes of shared references that are 2**50 values as a tree")
def test_sidecar_shared_reference_explosion(ws, good_set, tmp_path, trials) -> None:
    # x0 = 1; x(i+1) = (x(i), x(i)) through the memo: 50 levels, 2**50 leaves when walked.
    # (No POP: torch's weights_only loader lacks it; the levels are collected in a list.)
    levels = b"](K\x01q\x00" + b"".join(b"h%ch%c\x86q%c" % (i, i, i + 1) for i in range(50)) + b"e"
    result, _, _, victim = verify_victim(ws, good_set, tmp_path, sidecar_zip(sidecar_pickle(levels)))
    assert_clean_error(result, names=[victim.name])
    assert "values" in result.stdout, result.stdout[-2000:]
    trials.add("refused, one line")


@pytest.mark.fault("hostile input", "1 MB sidecar whose compressed data.pkl expands to 1.27 GB")
def test_sidecar_compressed_bomb(ws, good_set, tmp_path, trials) -> None:
    total = 1_270_000_000
    bomb = deflated_zeros(total)
    assert len(bomb) < 2 * MIB
    data = zip_records([("archive/data.pkl", bomb, total, 8), ("archive/version", b"3\n", 2, 0)])
    result, rss, _, victim = verify_victim(ws, good_set, tmp_path, data)
    assert_clean_error(result, names=[victim.name])
    assert rss < 500 * MIB, f"peak RSS {rss / MIB:.0f} MiB: the record was expanded"
    assert "compressed" in result.stdout
    trials.add("refused unread, bounded memory")


@pytest.mark.fault("hostile input", "a FIFO as a rank sidecar in `sidecars verify` (hung before)")
def test_sidecar_fifo_does_not_hang(ws, good_set, tmp_path, trials) -> None:
    result, _, seconds, victim = verify_victim(ws, good_set, tmp_path, None)
    assert_clean_error(result, names=[victim.name])
    assert "FIFO" in result.stdout and seconds < DEADLINE
    trials.add("refused, no hang")
