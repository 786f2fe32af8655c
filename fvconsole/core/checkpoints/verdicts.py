"""What ``checkpoints ls`` learnt from each ``dcp/.metadata``, remembered across runs by file identity.

Why: the listing needs one number per checkpoint (its ``dataloader`` state keys: legacy or
not), and decoding the pickle in the inert VM is ~75% of listing 20,000 checkpoints. A DCP
metadata file is written once by its save; the verdict is kept under its identity
``(path, st_dev, st_ino, size, mtime_ns, ctime_ns)`` (``ctime`` cannot be set back by a
user, so a file rewritten in place, even with its size and mtime restored, misses and is
decoded again). Only clean decodes are kept: a damaged file is decoded, and reported, each time.

The cache lives outside every checkpoint (``$XDG_CACHE_HOME/fvconsole/``, default
``~/.cache``), is read through the untrusted-document door (bounded, every entry checked,
a bad file is ignored) and written through the output-file door (atomic replace) only when
something new was learnt. It is only ever an optimisation: a cache that cannot be read or
written changes nothing but the time taken. ``FVCONSOLE_DCP_CACHE=off`` disables it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from fvconsole.core.formats.pickle_shape import Shapes
from fvconsole.core.shared.errors import FvError

ENV_SWITCH = "FVCONSOLE_DCP_CACHE"
FILE_NAME = "dcp-verdicts.json"
VERSION = 1
#: Entries kept; a listing of more checkpoints keeps those it saw last.
MAX_ENTRIES = 200_000
#: ~100 bytes per entry; a larger file is not read.
MAX_BYTES = 64 * 2**20


def default_path(env: Mapping[str, str] | None = None) -> str | None:
    """``$XDG_CACHE_HOME/fvconsole/dcp-verdicts.json`` (default ``~/.cache``); None when switched off."""
    env = os.environ if env is None else env
    if env.get(ENV_SWITCH, "").lower() in ("off", "0", "no", "false"):
        return None
    base = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # XDG: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fvconsole", FILE_NAME)


def identity(path: str, st: os.stat_result) -> str:
    """The cache key of one file as lstat saw it (five integers, then the path)."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{path}"


class VerdictCache:
    """Dataloader key counts by file identity: :meth:`get`, :meth:`put`, then :meth:`save` once."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._old: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._learnt = False
        #: This listing's decoded shapes: a file that differs only in opaque values is not decoded again.
        self.shapes = Shapes()
        if path is not None:
            self._old = _read(path)

    def get(self, key: str) -> int | None:
        count = self._seen.get(key)
        if count is None:
            count = self._old.pop(key, None)
            if count is not None:
                self._seen[key] = count
        return count

    def put(self, key: str, count: int) -> None:
        self._seen[key] = count
        self._learnt = True

    def save(self) -> None:
        """Write back what this run saw (and older entries, up to the bound); never raises."""
        if self.path is None or not self._learnt:
            return
        from fvconsole.core.shared.output_file import write_output

        entries = dict(list(self._old.items())[: max(0, MAX_ENTRIES - len(self._seen))])
        entries.update(list(self._seen.items())[-MAX_ENTRIES:])
        data = json.dumps({"version": VERSION, "entries": entries}, separators=(",", ":")).encode()
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            write_output(self.path, data, "DCP verdict cache")
        except (OSError, FvError):
            return  # only an optimisation: the next listing decodes again
        self._learnt = False


def _read(path: str) -> dict[str, int]:
    """The entries of a well-formed cache file; {} for anything else (absent, too big, damaged)."""
    from fvconsole.core.shared.untrusted import load_file

    try:
        doc = load_file(path, "DCP verdict cache", MAX_BYTES, max_depth=3)
    except (OSError, FvError):
        return {}
    if type(doc) is not dict or doc.get("version") != VERSION or type(doc.get("entries")) is not dict:
        return {}
    entries = doc["entries"]
    if len(entries) > MAX_ENTRIES:
        return {}
    return {k: v for k, v in entries.items() if type(v) is int and v >= 0}
