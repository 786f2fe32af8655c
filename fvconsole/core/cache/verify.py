"""`cache verify`: every shard's safetensors header against its entry's manifest (docs/formats.md §6).

Why: FastVideo checks an entry only against its manifest (and only after every rank agrees),
then opens its own shard with ``safe_open``; a shard whose header disagrees with the manifest
(a dtype, a shape, a missing tensor, a truncated file) fails there on some ranks only, or,
for a tensor the shard lacks, is silently zero-initialised. This module finds that before a
launch. It reads manifest.json and each shard's header through the bounded ``O_NOATIME``
readers of ``files.py`` (never the tensor data unless ``deep``), so no mtime or atime moves.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fvconsole.core.cache.entry import SHARD_RE, _validate_manifest
from fvconsole.core.cache.files import (
    CacheFileError,
    list_dir,
    read_header_table,
    read_manifest,
    read_through,
)
from fvconsole.core.cache.model import CacheEntry, CacheScan
from fvconsole.core.shared.fields_json import fields_json
from fvconsole.core.shared.host import node_names
from fvconsole.core.shared.humanize import plural
from fvconsole.core.shared.safe_read import short_repr
from fvconsole.core.shared.untrusted import INT64_MAX, Fields, byte_count, element_count, int64_dims

#: FastVideo's ``_ALLOWED_NEW_PARAM_PATTERNS`` (shard_cache.py, mirroring fsdp_load): a
#: parameter whose name contains one of these may be absent and is zero-initialised.
ZERO_INIT_PATTERNS = ("gate_compress", "proj_l")

#: The manifest's ``str(torch.dtype)`` and the safetensors header's dtype code for it.
TORCH_TO_SAFETENSORS = {
    "torch.float64": "F64", "torch.float32": "F32", "torch.float16": "F16", "torch.bfloat16": "BF16",
    "torch.int64": "I64", "torch.int32": "I32", "torch.int16": "I16", "torch.int8": "I8",
    "torch.uint64": "U64", "torch.uint32": "U32", "torch.uint16": "U16", "torch.uint8": "U8",
    "torch.bool": "BOOL", "torch.float8_e4m3fn": "F8_E4M3", "torch.float8_e5m2": "F8_E5M2",
    "torch.complex64": "C64",
}
#: Bytes per element of each safetensors dtype code (as safetensors' own ``Dtype::size``).
ELEMENT_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
    "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "C64": 8,
}
#: Problems listed per shard before the rest are counted in one line (a dtype change in a
#: 2,000-tensor model would otherwise be 2,000 lines per shard).
MAX_PROBLEMS_PER_SHARD = 50

_Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class VerifyProblem:
    """One disagreement: ``shard`` is the file (manifest.json for the manifest's own), ``param`` the tensor."""

    shard: str | None
    param: str | None
    problem: str

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_json(cls, doc: Any, shown: str, what: str) -> VerifyProblem:
        """A problem as :meth:`to_json` wrote it (another node's ``cache verify --json``): UntrustedError naming the field."""
        f = Fields(doc, shown, what)
        return cls(f.str("shard", None), f.str("param", None), f.str("problem"))

    def text(self) -> str:
        """One line for people: ``shard0-of-2.safetensors: 'w': dtype ...``."""
        where = [part for part in (self.shard, short_repr(self.param) if self.param is not None else None) if part]
        return ": ".join([*where, self.problem])


@dataclass(frozen=True, slots=True)
class EntryVerification:
    """The verdict on one entry: ``ok`` when it was checked and nothing disagrees.

    ``not_verifiable``: why there was nothing to check (no manifest.json yet: a write in
    progress or a crashed one, or an empty entry). Such an entry is neither ok nor failed:
    FastVideo never uses it, and on a node-local cache every node but rank 0's has only those.
    """

    key: str
    path: str
    shards_checked: tuple[str, ...]
    problems: tuple[VerifyProblem, ...]
    deep: bool = False
    bytes_read: int = 0
    not_verifiable: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.not_verifiable is None

    @property
    def failed(self) -> bool:
        """Checked, and something disagrees."""
        return bool(self.problems)

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, ok=self.ok)

    @classmethod
    def from_json(cls, doc: Any, shown: str = "cache verify JSON", what: str = "entry") -> EntryVerification:
        """A verdict as :meth:`to_json` wrote it, read back from another node: UntrustedError naming the field.

        ``key`` is required; a field a node leaves out reads as its default. ``ok`` is derived
        (:attr:`ok`), so a document whose ``ok`` disagrees with its problems is refused.
        """
        f = Fields(doc, shown, what)
        key = f.str("key")
        problems = f.list("problems", [])
        verdict = cls(
            key=key, path=f.str("path", ""), shards_checked=f.strings("shards_checked", ()),
            problems=tuple(VerifyProblem.from_json(p, shown, f"{what} problems[{i}]") for i, p in enumerate(problems)),
            deep=f.bool("deep", False), bytes_read=f.int("bytes_read", 0), not_verifiable=f.str("not_verifiable", None))
        _check_ok(f, verdict.ok)
        return verdict


@dataclass(frozen=True, slots=True)
class CacheVerification:
    """Every verified entry of one root; ``missing``: asked-for keys that are not entries there."""

    root: str
    entries: tuple[EntryVerification, ...]
    missing: tuple[str, ...] = ()
    deep: bool = False

    @property
    def ok(self) -> bool:
        """No verifiable entry failed and every asked-for key is an entry (entries not verifiable are no failure)."""
        return not self.missing and not any(e.failed for e in self.entries)

    @property
    def failed(self) -> tuple[EntryVerification, ...]:
        """The entries with a problem, those FastVideo would load first (a usable manifest, shards
        checked), then those it would reject on their own (a broken manifest): the first is the one
        an error line should lead with."""
        bad = [e for e in self.entries if e.failed]
        return tuple(sorted(bad, key=lambda e: not e.shards_checked))

    @property
    def not_verifiable(self) -> tuple[EntryVerification, ...]:
        return tuple(e for e in self.entries if e.not_verifiable is not None)

    def envelope(self) -> dict[str, Any]:
        """``cache verify --json``'s document: the verification and the node it ran on."""
        return {**self.to_json(), **node_names()}

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, ok=self.ok)

    @classmethod
    def from_json(cls, doc: Any, shown: str = "cache verify JSON", what: str = "document") -> CacheVerification:
        """A verification as :meth:`to_json` wrote it (``cache verify --json`` of another node): UntrustedError
        naming the field; ``entries`` is required, a field a node leaves out reads as its default."""
        f = Fields(doc, shown, what)
        entries = f.list("entries")
        verification = cls(
            root=f.str("root", ""),
            entries=tuple(EntryVerification.from_json(e, shown, f"{what} entries[{i}]") for i, e in enumerate(entries)),
            missing=f.strings("missing", ()), deep=f.bool("deep", False))
        _check_ok(f, verification.ok)
        return verification


def _check_ok(f: Fields, ok: bool) -> None:
    """A document's ``ok`` (when it has one) must be what its record derives from the rest."""
    claimed = f.bool("ok", None)
    if claimed is not None and claimed != ok:
        f.fail("ok", f"is {str(claimed).lower()} but the rest of it says otherwise")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _shape(value: Any) -> list[int] | None:
    """A shape list of 64-bit non-negative ints, else None."""
    return value if type(value) is list and int64_dims(value) is not None else None


#: Dims of a shape shown in a message (a hostile header's 60,000 are counted, not listed).
SHOWN_DIMS = 8


def _expected(name: str, info: Any) -> tuple[str, list[int]] | str:
    """(safetensors dtype code, shape the shard must hold) from one manifest param, or what is wrong."""
    if type(info) is not dict:
        return "manifest entry is not an object"
    dtype = info.get("dtype")
    if type(dtype) is not str:
        return "manifest field 'dtype' is missing or not a string"
    code = TORCH_TO_SAFETENSORS.get(dtype)
    if code is None:
        return f"manifest dtype {short_repr(dtype)} is not one safetensors stores"
    kind = info.get("kind")
    field = {"dtensor": "local_shape", "tensor": "global_shape"}.get(kind) if type(kind) is str else None
    if field is None:
        return f"manifest field 'kind' is {short_repr(kind)}, expected 'dtensor' or 'tensor'"
    shape = _shape(info.get(field))
    if shape is None:
        return f"manifest field '{field}' is missing or not a list of sizes"
    return code, shape


def _shape_text(shape: Any) -> str:
    """A checked shape as ``[4, 8]``; a long one as its first dims and its length."""
    if type(shape) is not list:
        return short_repr(shape)
    if len(shape) <= SHOWN_DIMS:
        return "[" + ", ".join(str(d) for d in shape) + "]"
    return "[" + ", ".join(str(d) for d in shape[:SHOWN_DIMS]) + f", ... ({len(shape)} dims)]"


def _tensor_problems(name: str, info: Any, want: tuple[str, list[int]], torch_dtype: str) -> list[str]:
    """What is wrong with one header tensor against the manifest (dtype, shape, byte length)."""
    if type(info) is not dict:
        return ["header entry is not an object"]
    problems = []
    code, shape = want
    got_dtype = info.get("dtype")
    if type(got_dtype) is not str:
        problems.append(f"dtype {short_repr(got_dtype)} in the header is not a string")
    elif got_dtype != code:
        problems.append(f"dtype: manifest {torch_dtype} ({code}), shard {short_repr(got_dtype)}")
    got_shape = _shape(info.get("shape"))
    if got_shape is None:
        problems.append(f"shape {short_repr(info.get('shape'))} in the header is not a list of sizes")
    elif got_shape != shape:
        problems.append(f"shape: manifest {_shape_text(shape)}, shard {_shape_text(got_shape)}")
    return problems


def _offsets(info: Any) -> tuple[int, int] | None:
    offsets = info.get("data_offsets") if type(info) is dict else None
    if (type(offsets) is list and len(offsets) == 2 and all(_is_int(o) for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= INT64_MAX):
        return offsets[0], offsets[1]
    return None


def _size_problem(info: dict[str, Any], held: int) -> str | None:
    """What is wrong with a tensor's byte length against its dtype and shape (None: it fits, or
    the dtype or shape is wrong, which the comparison with the manifest reports)."""
    dtype = info.get("dtype")
    size = ELEMENT_BYTES.get(dtype) if type(dtype) is str else None
    shape = _shape(info.get("shape"))
    if size is None or shape is None:
        return None
    elements = element_count(shape)
    need = byte_count(elements, size) if elements is not None else None
    if need is None:
        return (f"shape {_shape_text(shape)} holds more than {INT64_MAX} "
                f"{'elements' if elements is None else 'bytes'} (safetensors refuses it)")
    return None if held == need else f"holds {plural(held, 'byte')}, its dtype and shape need {need}"


def _layout_problems(header: dict[str, Any], data_bytes: int) -> list[tuple[str | None, str]]:
    """The data section as safetensors' own reader checks it: byte lengths, no gaps, file fully covered.

    ``safe_open`` refuses a file whose tensors leave a gap, overlap, or do not end exactly at
    the end of the file (truncated, or trailing bytes).
    """
    problems: list[tuple[str | None, str]] = []
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = _offsets(info)
        if offsets is None:
            problems.append((name, f"bad data_offsets {short_repr(info.get('data_offsets') if type(info) is dict else info)}"))
            continue
        spans.append((offsets[0], offsets[1], name))
        problem = _size_problem(info, offsets[1] - offsets[0])
        if problem is not None:
            problems.append((name, problem))
    end = 0
    for start, stop, name in sorted(spans):
        if start != end:
            problems.append((name, f"starts at byte {start} of the data section, the tensor before ends at {end}"))
        end = max(end, stop)
    if end > data_bytes:
        last = max(spans, key=lambda s: s[1])[2]
        problems.append((last, f"truncated: the tensors end at byte {end} of the data section, "
                               f"the file holds {data_bytes}"))
    elif end < data_bytes:
        problems.append((None, f"{plural(data_bytes - end, 'byte')} after the last tensor "
                               "(safetensors refuses the file)"))
    return problems


def _shard_problems(shard: str, header: dict[str, Any], data_bytes: int,
                    params: dict[str, Any]) -> list[VerifyProblem]:
    """Every disagreement between one shard's header and the manifest's params."""
    out: list[VerifyProblem] = []
    for name, info in params.items():
        want = _expected(name, info)
        if isinstance(want, str):
            continue  # a manifest problem, reported once for the entry
        if name not in header or name == "__metadata__":
            if not any(pattern in name for pattern in ZERO_INIT_PATTERNS):
                out.append(VerifyProblem(shard, name, "in the manifest but not in the shard "
                                                      "(FastVideo would load it as zeros)"))
            continue
        out.extend(VerifyProblem(shard, name, p) for p in _tensor_problems(name, header[name], want, info["dtype"]))
    for name in header:
        if name != "__metadata__" and name not in params:
            out.append(VerifyProblem(shard, name, "in the shard but not in the manifest"))
    out.extend(VerifyProblem(shard, name, p) for name, p in _layout_problems(header, data_bytes))
    if len(out) > MAX_PROBLEMS_PER_SHARD:
        rest = len(out) - MAX_PROBLEMS_PER_SHARD
        out = [*out[:MAX_PROBLEMS_PER_SHARD], VerifyProblem(shard, None, f"and {plural(rest, 'more problem')}")]
    return out


def _manifest_problems(params: dict[str, Any]) -> list[VerifyProblem]:
    out = []
    for name, info in params.items():
        want = _expected(name, info)
        if isinstance(want, str):
            out.append(VerifyProblem("manifest.json", name, want))
    return out[:MAX_PROBLEMS_PER_SHARD]


#: Why an entry without a manifest cannot be verified (``EntryVerification.not_verifiable``).
NO_MANIFEST_YET = "no manifest.json yet (a write in progress, a crashed write, or a node other than rank 0's)"
EMPTY_ENTRY = "empty entry directory (nothing written)"


def _without_manifest(path: str) -> str:
    """Why an entry that has no manifest.json cannot be verified: empty, or written only in part."""
    try:
        empty = not list_dir(path)
    except OSError:
        empty = False
    return EMPTY_ENTRY if empty else NO_MANIFEST_YET


def _load(path: str, key: str) -> tuple[dict[str, Any] | None, VerifyProblem | str | None]:
    """(the manifest, None), or (None, the problem), or (None, why it cannot be verified)."""
    try:
        data = read_manifest(os.path.join(path, "manifest.json"))
    except FileNotFoundError:
        return None, _without_manifest(path)
    except CacheFileError as exc:
        return None, VerifyProblem("manifest.json", None, str(exc).removeprefix("manifest.json "))
    except OSError as exc:
        return None, VerifyProblem("manifest.json", None, f"unreadable ({exc.strerror})")
    manifest, error = _validate_manifest(data, key)
    if error is not None:
        return None, VerifyProblem("manifest.json", None, error.removeprefix("manifest.json: "))
    return manifest, None


def _shards(path: str, manifest: dict[str, Any]) -> tuple[list[str], list[VerifyProblem]]:
    """This node's shard files of the entry (missing ones are normal: partial), and stray ones."""
    num = manifest["num_shards"]
    found: list[tuple[int, str]] = []
    strays = []
    try:
        listing = list_dir(path)  # O_NOATIME: verifying leaves the directory's atime alone
    except OSError as exc:
        return [], [VerifyProblem(None, None, f"cannot list the entry ({exc.strerror})")]
    for name in sorted(name for name, st in listing if stat.S_ISREG(st.st_mode)):
        match = SHARD_RE.fullmatch(name)
        if not match:
            continue
        if int(match.group(2)) == num and int(match.group(1)) < num:
            found.append((int(match.group(1)), name))
        else:
            strays.append(VerifyProblem(name, None, f"not one of the manifest's {plural(num, 'shard')}"))
    if not found:
        strays.append(VerifyProblem(None, None, "no shard of this entry on this node"))
    return [name for _, name in sorted(found)], strays


def verify_entry(path: str, key: str, *, deep: bool = False, progress: Callable[[int], None] | None = None,
                 is_symlink: bool = False) -> EntryVerification:
    """Check one entry; every problem is reported, none raised. ``progress(n)``: bytes read (``deep``)."""
    if is_symlink or os.path.islink(path):
        return EntryVerification(key, path, (), (VerifyProblem(None, None, "the entry is a symlink (not followed)"),),
                                 deep=deep)
    manifest, problem = _load(path, key)
    if isinstance(problem, str):
        return EntryVerification(key, path, (), (), deep=deep, not_verifiable=problem)
    if manifest is None:
        return EntryVerification(key, path, (), (problem,) if problem else (), deep=deep)
    params = manifest["params"]
    problems = _manifest_problems(params)
    shard_names, strays = _shards(path, manifest)
    problems.extend(strays)
    bytes_read = 0
    for shard in shard_names:
        shard_path = os.path.join(path, shard)
        try:
            header, data_bytes = read_header_table(shard_path)
        except CacheFileError as exc:
            problems.append(VerifyProblem(shard, None, str(exc)))
            continue
        except OSError as exc:
            problems.append(VerifyProblem(shard, None, f"unreadable ({exc.strerror})"))
            continue
        problems.extend(_shard_problems(shard, header, data_bytes, params))
        if deep:
            try:
                bytes_read += read_through(shard_path, progress)
            except (OSError, CacheFileError) as exc:
                why = exc.strerror if isinstance(exc, OSError) else str(exc)
                problems.append(VerifyProblem(shard, None, f"read error ({why})"))
    return EntryVerification(key, path, tuple(shard_names), tuple(problems), deep=deep, bytes_read=bytes_read)


def _shard_bytes(entry: CacheEntry) -> int:
    total = 0
    for name in entry.shard_files:
        try:
            total += os.lstat(os.path.join(entry.path, name)).st_size
        except OSError:
            continue
    return total


def verify_cache(scan: CacheScan, keys: Iterable[str] = (), *, deep: bool = False,
                 progress: _Progress | None = None) -> CacheVerification:
    """Verify the scan's entries (only ``keys`` when given); ``progress(done, total, key)`` in bytes with ``deep``.

    An entry that is still being written (a fresh .tmp file) is verified too: its verdict says
    what a launch now would meet.
    """
    wanted = tuple(dict.fromkeys(keys))
    entries = [e for e in scan.entries if not wanted or e.key in wanted]
    missing = tuple(k for k in wanted if scan.get(k) is None)
    sizes = [_shard_bytes(e) for e in entries] if deep and progress else [0] * len(entries)
    total = sum(sizes)
    done = [0]

    def advance(key: str) -> Callable[[int], None] | None:
        if progress is None:
            return None

        def step(n: int) -> None:
            done[0] += n
            progress(done[0], total, key)
        return step

    results = []
    for entry, size in zip(entries, sizes, strict=True):
        before = done[0]
        results.append(verify_entry(entry.path, entry.key, deep=deep, progress=advance(entry.key),
                                    is_symlink=entry.is_symlink))
        if progress is not None and total and done[0] != before + size:
            # what was not read (no manifest, a refused header) still counts as gone through,
            # so the progress ends at its total and its line is ended
            done[0] = before + size
            progress(done[0], total, entry.key)
    return CacheVerification(scan.root, tuple(results), missing, deep=deep)


def failed_verification(scan: CacheScan) -> dict[str, str]:
    """key -> its first problem, for every entry that looks usable (complete, partial) but fails verification.

    ``cache evict --invalid --verify``: the other statuses (``selectors.RECLAIMABLE_STATUSES``)
    are ``--invalid``'s already; a symlinked entry is never verified (not followed).
    """
    out = {}
    for entry in scan.entries:
        if entry.status in ("complete", "partial") and not entry.is_symlink:
            result = verify_entry(entry.path, entry.key)
            if result.failed:
                more = len(result.problems) - 1
                out[entry.key] = result.problems[0].text() + (f" (and {more} more)" if more else "")
    return out


__all__ = ["ELEMENT_BYTES", "TORCH_TO_SAFETENSORS", "ZERO_INIT_PATTERNS", "CacheVerification",
           "EntryVerification", "VerifyProblem", "failed_verification", "verify_cache", "verify_entry"]
