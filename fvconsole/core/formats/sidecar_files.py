"""The files of a sidecar set: what they are called, the sidecar version, reading one back.

FastVideo looks up ``dataloader_state_rank<r>.pt`` for every rank (docs/formats.md §3); a
set also holds ``migration_receipt.json``, written last. Anything else in an output dir is
foreign and makes fvconsole refuse to replace the dir.

:func:`decode_sidecar` is the one door a sidecar someone else wrote is decoded through: the
torch-free reader, then every integer in it range-checked, so no arithmetic ever sees a
number no loader could have saved.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from fvconsole.core.formats.torch_zip import TorchFileError, loads
from fvconsole.core.shared.safe_read import read_regular_file

#: The sidecar dict's ``version`` FastVideo checks.
SIDECAR_VERSION = 1
RECEIPT_NAME = "migration_receipt.json"
SIDECAR_RE = re.compile(r"^dataloader_state_rank(\d+)\.pt$")
#: Hidden temp files we (and FastVideo's own atomic save) leave while writing.
TEMP_RE = re.compile(r"^\.(dataloader_state_rank\d+\.pt|migration_receipt\.json)\.[0-9A-Za-z_-]+\.tmp$")
#: A sidecar is ~1.3 KB; anything near this is not one (and is not read into memory).
MAX_SIDECAR_BYTES = 16 * 2**20
#: Every integer in a sidecar lies in int64's range (FastVideo's counts, steps and seeds are
#: torch's int64 wherever they meet a tensor); a reshard's next epoch is one more, so it stays writable.
MIN_SIDECAR_INT, MAX_SIDECAR_INT = -(2**63), 2**63 - 1


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


def decode_sidecar(data: bytes) -> Any:
    """A sidecar's payload from its bytes, every integer in int64's range.

    TorchFileError (one line, naming the field: ``state.epoch``) for a file the torch-free
    reader refuses or an integer out of range; the caller names the file.
    """
    payload = loads(data)
    field = _out_of_range(payload)
    if field is not None:
        name, value = field
        shown = str(value) if value.bit_length() <= 128 else f"a {value.bit_length()}-bit integer"
        raise TorchFileError(f"field '{name}' is {shown}, outside a sidecar's range "
                             f"({MIN_SIDECAR_INT} to {MAX_SIDECAR_INT})")
    return payload


def _out_of_range(payload: Any) -> tuple[str, int] | None:
    """The first integer (by its dotted field name) outside int64's range, None when all are inside.

    The tree is already bounded by the reader (size, depth), so one walk of it is cheap.
    """
    stack: list[tuple[str, Any]] = [("", payload)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            if not MIN_SIDECAR_INT <= item <= MAX_SIDECAR_INT:
                return where or "(the payload)", item
        elif isinstance(item, Mapping):
            stack.extend((f"{where}.{key}" if where else str(key), value) for key, value in reversed(item.items()))
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{where}[{i}]", value) for i, value in reversed(list(enumerate(item))))
    return None
