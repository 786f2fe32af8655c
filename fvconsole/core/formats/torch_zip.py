"""torch.save's file format for plain-data payloads, written and read without importing torch.

Why: a sidecar is a small dict of ints and strings, yet ``import torch`` costs seconds on a
login node's shared filesystem. The format is torch's zip container (``torch/serialization.py``
``_save`` over ``caffe2/serialize/inline_container.cc``'s ``PyTorchStreamWriter``):

* every record is ``<archive>/<name>``, stored uncompressed, its data starting on a 64-byte
  boundary (the local header's extra field ``FB`` + length + ``Z`` padding), CRC and sizes in
  a data descriptor after the data (flags 0x0808), DOS time and date 0;
* records in torch.save's order: ``data.pkl`` (pickle protocol 2), ``.format_version``
  ("1"), ``.storage_alignment`` ("64"), ``byteorder``, then from the writer's end of file
  ``version`` ("3\\n") and ``.data/serialization_id``;
* a central directory, then zip64 end-of-central-directory record and locator, then the
  classic end record (miniz with ``MZ_ZIP_FLAG_WRITE_ZIP64`` always writes all three).

For a payload without tensors :func:`dumps` produces exactly the bytes ``torch.save(payload,
buffer)`` does (``tests/formats/test_torch_zip.py`` compares them). :func:`loads` reads such a file
back with :mod:`fvconsole.core.formats.inert_pickle`: nothing in the file runs, compressed records
are refused (a 1 MB file could expand to gigabytes), and the pickle is bounded.
"""

from __future__ import annotations

import io
import pickle
import struct
import sys
import zipfile
import zlib
from typing import Any

from fvconsole.core.formats.inert_pickle import (
    Limits,
    PickleRefused,
    Resolver,
    TreeLimits,
    check_tree,
    load,
    plain_data_only,
)
from fvconsole.core.shared.optional import require

ARCHIVE = "archive"  # torch's prefix when saving to a file object (a path gives its stem)
ALIGNMENT = 64
PICKLE_PROTOCOL = 2
FORMAT_VERSION = b"1"
FILE_FORMAT_VERSION = b"3\n"  # the writer's kMinProducedFileFormatVersion, written at end of file
#: First half of ``.data/serialization_id``: c10's hash_combine over std::hash of the record
#: names, iterated in the writer's unordered_set order. It depends only on the set of names,
#: which is fixed for a payload without tensors (torch only logs the id, never checks it).
RECORD_NAMES_HASH = 2908468677762923104
#: File format versions torch's reader accepts (kMin/kMaxSupportedFileFormatVersion).
MIN_VERSION, MAX_VERSION = 1, 10
MAX_PAYLOAD_BYTES = 64 * 2**20
#: The deepest payload :func:`dumps` accepts (a sidecar's is 3).
MAX_DEPTH = 32

#: Ints pickled with LONG1 (at most 255 bytes); torch's weights_only loader has no LONG4.
INT_LIMIT = 1 << (8 * 255 - 1)
#: The opcodes torch's weights_only unpickler (``torch/_weights_only_unpickler.py``) executes;
#: a file using any other is one torch.load(weights_only=True) refuses, so we refuse it too.
WEIGHTS_ONLY_OPCODES = frozenset({
    "PROTO", "STOP", "GLOBAL", "NEWOBJ", "REDUCE", "BUILD", "MARK", "APPEND", "APPENDS", "SETITEM", "SETITEMS",
    "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWFALSE", "NEWTRUE", "EMPTY_TUPLE", "EMPTY_LIST",
    "EMPTY_DICT", "EMPTY_SET", "BININT", "BININT1", "BININT2", "BINFLOAT", "BINUNICODE", "SHORT_BINSTRING",
    "BINPERSID", "BINGET", "LONG_BINGET", "BINPUT", "LONG_BINPUT", "LONG1",
})
#: data.pkl of a sidecar is ~600 bytes; the opcode pre-scan and the reader stay fast below this.
MAX_PICKLE_BYTES = 4 * 2**20
#: Bounds for reading a pickle that should hold a small dict of plain data.
PLAIN_LIMITS = Limits(max_ops=MAX_PICKLE_BYTES, max_memo=1_000_000, max_globals=8, max_work=2_000_000,
                      opcodes=WEIGHTS_ONLY_OPCODES)
PLAIN_TREE = TreeLimits(max_depth=64, max_nodes=1_000_000)


class TorchFileError(ValueError):
    """Not a readable torch.save file of plain data; the message is one line."""


# --------------------------------------------------------------------------- writing


def dumps(payload: Any) -> bytes:
    """The bytes ``torch.save(payload, buffer)`` writes, for a payload of plain data.

    Plain data: dict (str or int keys), list, tuple, str, int (below 2**2039 in magnitude),
    bool, None, nested at most :data:`MAX_DEPTH` deep. Anything else raises TypeError rather
    than writing a file torch's ``weights_only`` loader would refuse.
    """
    _check_plain(payload)
    records = [
        ("data.pkl", pickle.dumps(payload, protocol=PICKLE_PROTOCOL)),
        (".format_version", FORMAT_VERSION),
        (".storage_alignment", str(ALIGNMENT).encode()),
        ("byteorder", sys.byteorder.encode()),
        ("version", FILE_FORMAT_VERSION),
    ]
    crc_hash = 0
    for _, data in records:
        crc_hash = _hash_combine(crc_hash, zlib.crc32(data))
    records.append((".data/serialization_id", f"{RECORD_NAMES_HASH:020d}{crc_hash:020d}".encode()))
    return _zip(records)


def _check_plain(value: Any) -> None:
    """TypeError unless ``value`` is plain data (checked iteratively, depth-capped)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is int and not -INT_LIMIT <= item < INT_LIMIT:
            raise TypeError("a sidecar payload's integers stay below 2**2039 (torch's weights_only loader)")
        if item is None or kind in (bool, int, str):
            continue
        if kind not in (dict, list, tuple):
            raise TypeError(f"a sidecar payload holds plain data only, not {kind.__name__}")
        if depth >= MAX_DEPTH:
            raise TypeError(f"a sidecar payload nests deeper than {MAX_DEPTH} levels")
        if kind is dict:
            for key, sub in item.items():
                if type(key) not in (str, int):
                    raise TypeError(f"a sidecar payload's dict keys are str or int, not {type(key).__name__}")
                stack.append((sub, depth + 1))
        else:
            stack.extend((sub, depth + 1) for sub in item)


def _hash_combine(seed: int, value: int) -> int:
    """c10::hash_combine on 64-bit size_t."""
    mask = (1 << 64) - 1
    return (seed ^ ((value + 0x9E3779B9 + (seed << 6) + (seed >> 2)) & mask)) & mask


_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_DESCRIPTOR = struct.Struct("<4sIII")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_ZIP64_END = struct.Struct("<4sQHHIIQQQQ")
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_END = struct.Struct("<4sHHHHIIH")
_FLAGS = 0x0808  # sizes/CRC in a data descriptor; UTF-8 names


def _zip(records: list[tuple[str, bytes]]) -> bytes:
    """Records laid out as PyTorchStreamWriter (miniz) lays them out."""
    out = bytearray()
    central = bytearray()
    for name, data in records:
        if len(data) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"record {name} is larger than {MAX_PAYLOAD_BYTES} bytes")
        full = f"{ARCHIVE}/{name}".encode()
        offset = len(out)
        start = offset + _LOCAL.size + len(full) + 4
        pad = -start % ALIGNMENT
        extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        crc = zlib.crc32(data)
        out += _LOCAL.pack(b"PK\x03\x04", 0, _FLAGS, 0, 0, 0, 0, 0, 0, len(full), len(extra))
        out += full + extra + data
        out += _DESCRIPTOR.pack(b"PK\x07\x08", crc, len(data), len(data))
        central += _CENTRAL.pack(b"PK\x01\x02", 0, 0, _FLAGS, 0, 0, 0, crc, len(data), len(data),
                                 len(full), 0, 0, 0, 0, 0, offset)
        central += full
    cd_offset = len(out)
    out += central
    zip64_end = len(out)
    count = len(records)
    out += _ZIP64_END.pack(b"PK\x06\x06", _ZIP64_END.size - 12, 0x031E, 0x002D, 0, 0, count, count,
                           len(central), cd_offset)
    out += _ZIP64_LOCATOR.pack(b"PK\x06\x07", 0, zip64_end, 1)
    out += _END.pack(b"PK\x05\x06", 0, 0, count, count, len(central), cd_offset, 0)
    return bytes(out)


# --------------------------------------------------------------------------- reading


def loads(data: bytes, *, limits: Limits = PLAIN_LIMITS, tree: TreeLimits = PLAIN_TREE) -> Any:
    """The payload of a torch.save file of plain data, read as torch.load would find it.

    Like torch's reader, the archive prefix is the first record's directory and ``data.pkl``
    and ``version`` (or ``.data/version``) must be under it. Unlike it, records must be
    stored uncompressed, the pickle may hold plain data only (nothing is imported or run)
    and its size, work and nesting are bounded. TorchFileError says what is wrong.
    """
    return _payload(data_pickle(data), plain_data_only, limits, tree, persistent=False)


def loads_inert(data: bytes, resolve: Resolver, *, limits: Limits, tree: TreeLimits = PLAIN_TREE) -> Any:
    """The payload of a torch.save file that holds tensors (or other objects ``resolve`` allows), inertly:
    each named class an inert stand-in, each tensor storage an ``InertPersistent``; nothing imported or run."""
    return _payload(data_pickle(data), resolve, limits, tree, persistent=True)


def _payload(pickled: bytes, resolve: Resolver, limits: Limits, tree: TreeLimits, *, persistent: bool) -> Any:
    try:
        payload = load(pickled, resolve, limits, persistent=persistent)
        check_tree(payload, tree)
    except PickleRefused as exc:
        raise TorchFileError(f"data.pkl {exc}") from None
    return payload


def data_pickle(data: bytes) -> bytes:
    """The ``data.pkl`` record of a torch.save archive, checked as torch.load checks the archive."""
    if data[:4] != b"PK\x03\x04":
        raise TorchFileError("not a torch.save zip archive (no zip header; legacy or foreign format)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        records = archive.infolist()
        if not records:
            raise TorchFileError("the zip archive has no records")
        prefix = records[0].filename.split("/", 1)[0] + "/"
        if "/" not in records[0].filename:
            raise TorchFileError(f"record {records[0].filename!r} is not inside an archive directory")
        index = _index(records)
        version = _record(data, index, prefix, (".data/version", "version"), 32)
        if version is None:
            raise TorchFileError("no version record")
        if not version.strip().isdigit() or not MIN_VERSION <= int(version) <= MAX_VERSION:
            raise TorchFileError(f"version record is {version[:20]!r}; torch reads {MIN_VERSION} to {MAX_VERSION}")
        # torch.load refuses these when present and malformed, so the reader does too.
        byteorder = _record(data, index, prefix, ("byteorder",), 16)
        if byteorder is not None and byteorder not in (b"little", b"big"):
            raise TorchFileError(f"byteorder record is {byteorder!r}, not 'little' or 'big'")
        alignment = _record(data, index, prefix, (".storage_alignment",), 32)
        if alignment is not None:
            try:
                int(alignment)
            except ValueError:
                raise TorchFileError(f".storage_alignment record is {alignment!r}, not a number") from None
        pickled = _record(data, index, prefix, ("data.pkl",), MAX_PICKLE_BYTES)
    except TorchFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile raises many types on damaged input
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
        raise TorchFileError(f"damaged zip archive ({reason})") from None
    if pickled is None:
        raise TorchFileError("no data.pkl record")
    return pickled


def _record(data: bytes, index: dict[str, Any], prefix: str, names: tuple[str, ...],
            max_bytes: int) -> bytes | None:
    """The first of ``names`` present under ``prefix``: stored, unique, at most ``max_bytes``."""
    for name in names:
        info = index.get(prefix + name)
        if info is None:
            continue
        if info is _DUPLICATE:
            raise TorchFileError(f"record {name} appears more than once")
        if info.compress_type != zipfile.ZIP_STORED:
            raise TorchFileError(f"record {name} is compressed (torch.save stores records uncompressed); "
                                 "refusing to expand it")
        if info.file_size > max_bytes or info.file_size != info.compress_size:
            raise TorchFileError(f"record {name} is {info.file_size} bytes (at most {max_bytes} expected)")
        return _stored_bytes(data, info)
    return None


_ENCRYPTED_OR_PATCHED = 0x1 | 0x20 | 0x40  # encrypted, compressed patched data, strong encryption
_UTF8_NAME = 0x800


def _stored_bytes(data: bytes, info: zipfile.ZipInfo) -> bytes:
    """A stored record's bytes, checked as ``ZipFile.read`` checks them, without its file objects.

    Why: a migration reads back four records of each of a thousand sidecars, and zipfile's
    per-record ``ZipExtFile`` costs more than the checks. The same ones are made: the local
    header's signature, no encryption or patch data, the local name equal to the central
    directory's, the whole record present, its CRC-32. (The central directory itself is
    still parsed by zipfile.)
    """
    offset = info.header_offset
    header = data[offset:offset + _LOCAL.size]
    if len(header) != _LOCAL.size:
        raise zipfile.BadZipFile("Truncated file header")
    signature, _, flags, _, _, _, _, _, _, name_length, extra_length = _LOCAL.unpack(header)
    if signature != b"PK\x03\x04":
        raise zipfile.BadZipFile("Bad magic number for file header")
    if info.flag_bits & _ENCRYPTED_OR_PATCHED:
        raise zipfile.BadZipFile(f"record {info.filename!r} is encrypted or patched")
    start = offset + _LOCAL.size
    raw_name = data[start:start + name_length]
    local_name = raw_name.decode("utf-8") if flags & _UTF8_NAME else raw_name.decode("cp437")
    if local_name != info.orig_filename:
        raise zipfile.BadZipFile(f"File name in directory {info.orig_filename!r} and header {raw_name!r} differ.")
    start += name_length + extra_length
    body = data[start:start + info.compress_size]
    if len(body) != info.compress_size:
        raise zipfile.BadZipFile(f"record {info.filename!r} is truncated")
    if zlib.crc32(body) != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    return body


_DUPLICATE: Any = object()


def _index(records: list[zipfile.ZipInfo]) -> dict[str, Any]:
    """Record name -> ZipInfo, or _DUPLICATE for a name that appears twice."""
    index: dict[str, Any] = {}
    for info in records:
        index[info.filename] = _DUPLICATE if info.filename in index else info
    return index


def require_torch() -> Any:
    """torch, or MissingExtra naming the ``torch`` extra (the cross-check is optional)."""
    return require("torch", extra="torch", purpose="checking sidecars with torch.load")


def load_with_torch(data: bytes) -> Any:
    """``torch.load(weights_only=True)`` of the bytes: the optional cross-check (imports torch)."""
    torch = require_torch()
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
