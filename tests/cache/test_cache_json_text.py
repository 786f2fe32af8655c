"""`cache ls --json` writes each entry with ``CacheEntry.json_text``: byte for byte what ``json.dumps`` gives
(issue 19 item 9: the 200,000-entry listing must not change its output)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fvconsole.core.cache.model import CacheEntry, ManifestSummary
from fvconsole.core.shared.process_use import Holder

text = st.text(st.characters(codec=None), max_size=12)  # any code point: lone surrogates, controls, DEL, astral
names = st.lists(text, max_size=3).map(tuple)
numbers = st.one_of(st.none(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.booleans())
counts = st.dictionaries(text, st.integers(0, 10**6), max_size=3).map(lambda d: tuple(sorted(d.items())))
summaries = st.one_of(st.none(), st.builds(ManifestSummary, params=st.integers(0, 10**9),
                                           numel=st.integers(0, 2**63 - 1), dtypes=counts, kinds=counts))
holders = st.lists(st.builds(Holder, pid=st.integers(1, 2**22), command=text, how=st.sampled_from(["open", "mapped"])),
                   max_size=2).map(tuple)


@settings(max_examples=400, deadline=None)
@given(key=text, path=text, size=st.one_of(st.integers(0, 2**64), st.booleans()), last_used=numbers,
       num_shards=numbers, present=st.lists(st.integers(0, 10**4), max_size=4).map(tuple),
       status=text, writing=st.booleans(), explanation=text, mtime_ns=numbers, newest=numbers,
       shard_files=names, tmp_files=names, problems=names, summary=summaries, is_symlink=st.booleans(),
       target=st.one_of(st.none(), text), mounts=names, disk=numbers, held=holders, owner=numbers)
def test_json_text_is_json_dumps_of_to_json(key, path, size, last_used, num_shards, present, status, writing,
                                            explanation, mtime_ns, newest, shard_files, tmp_files, problems,
                                            summary, is_symlink, target, mounts, disk, held, owner) -> None:
    entry = CacheEntry(key=key, path=path, bytes=size, last_used=last_used, num_shards=num_shards,
                       shards_present=present, status=status, writing=writing, explanation=explanation,
                       manifest_mtime_ns=mtime_ns, newest_mtime=newest, shard_files=shard_files,
                       tmp_files=tmp_files, problems=problems, summary=summary, is_symlink=is_symlink,
                       symlink_target=target, mounts=mounts, disk_bytes=disk, in_use_by=held,
                       owner_uid=owner)
    assert entry.json_text() == json.dumps(entry.to_json(), sort_keys=True, default=str)


def test_a_common_entry_is_written_exactly() -> None:
    entry = CacheEntry(key="00000000000000ab", path="/c/00000000000000ab", bytes=263, last_used=1700000000.0,
                       num_shards=1, shards_present=(0,), status="complete", writing=False,
                       explanation="all 1 shard present", manifest_mtime_ns=1700000000000000000,
                       newest_mtime=1700000001.5, shard_files=("shard0-of-1.safetensors",),
                       summary=ManifestSummary(params=1, numel=4, dtypes=(("torch.float32", 1),),
                                               kinds=(("tensor", 1),)), disk_bytes=8192, owner_uid=1000)
    assert entry.json_text() == (
        '{"bytes": 263, "disk_bytes": 8192, "explanation": "all 1 shard present", "in_use_by": [], '
        '"is_symlink": false, "key": "00000000000000ab", "last_used": 1700000000.0, '
        '"manifest_mtime_ns": 1700000000000000000, "mounts": [], "newest_mtime": 1700000001.5, "num_shards": 1, "owner_uid": 1000, '
        '"path": "/c/00000000000000ab", "problems": [], "shard_files": ["shard0-of-1.safetensors"], '
        '"shards_present": [0], "status": "complete", "summary": {"dtypes": {"torch.float32": 1}, '
        '"kinds": {"tensor": 1}, "numel": 4, "params": 1}, "symlink_target": null, "tmp_files": [], '
        '"writing": false}')


def test_the_fast_path_writes_every_key_of_to_json() -> None:
    """A key added to ``to_json`` must reach ``json_text`` (or turn its fast path off)."""
    from fvconsole.core.cache import model

    entry = CacheEntry(key="k", path="/k", bytes=0, last_used=None, num_shards=None, shards_present=(),
                       status="empty", writing=False, explanation="", manifest_mtime_ns=None, newest_mtime=None)
    assert tuple(sorted(entry.to_json())) == model._FAST_KEYS
    assert json.loads(entry.json_text()) == entry.to_json()
