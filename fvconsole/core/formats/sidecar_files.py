"""The files of a sidecar set: what they are called, the sidecar version, reading one back.

FastVideo looks up ``dataloader_state_rank<r>.pt`` for every rank (docs/formats.md §3); a
set also holds ``migration_receipt.json``, written last. Anything else in an output dir is
foreign and makes fvconsole refuse to replace the dir.
"""

from __future__ import annotations

import hashlib
import re

from fvconsole.core.shared.safe_read import read_regular_file

#: The sidecar dict's ``version`` FastVideo checks.
SIDECAR_VERSION = 1
RECEIPT_NAME = "migration_receipt.json"
SIDECAR_RE = re.compile(r"^dataloader_state_rank(\d+)\.pt$")
#: Hidden temp files we (and FastVideo's own atomic save) leave while writing.
TEMP_RE = re.compile(r"^\.(dataloader_state_rank\d+\.pt|migration_receipt\.json)\.[0-9A-Za-z_-]+\.tmp$")
#: A sidecar is ~1.3 KB; anything near this is not one (and is not read into memory).
MAX_SIDECAR_BYTES = 16 * 2**20


def sidecar_name(rank: int) -> str:
    """``dataloader_state_rank<r>.pt``: the file FastVideo looks up for ``rank``."""
    return f"dataloader_state_rank{rank}.pt"


def classify_entry(name: str) -> str:
    """'sidecar', 'receipt', 'temp' (our hidden temp files) or 'foreign'."""
    if SIDECAR_RE.match(name):
        return "sidecar"
    if name == RECEIPT_NAME:
        return "receipt"
    if TEMP_RE.match(name):
        return "temp"
    return "foreign"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_sidecar_bytes(path: str) -> bytes:
    """A sidecar's bytes: regular files only (a FIFO cannot hang us), at most MAX_SIDECAR_BYTES."""
    return read_regular_file(path, "sidecar", MAX_SIDECAR_BYTES)
