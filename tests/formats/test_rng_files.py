"""FastVideo's RNG snapshots read inertly: real torch.save files, judged as load_rng_snapshot takes them.

Expected keys and problems are written by hand from FastVideo's ``_save_rng_snapshot`` /
``load_rng_snapshot`` (the five keys; ``cuda_rng`` and ``gen_cuda`` indexed unconditionally).
"""

from __future__ import annotations

import pickle
import random

import pytest

from fvconsole.core.formats.inert_pickle import PickleRefused, load, numpy_array
from fvconsole.core.formats.rng_files import _rng_global, read_snapshot

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")


def _snapshot(**drop: bool) -> dict:
    state = {"torch_rng": torch.get_rng_state(), "python_rng": random.getstate(),
             "numpy_rng": np.random.get_state(), "cuda_rng": torch.get_rng_state(),
             "gen_cuda": torch.Generator().get_state()}
    return {k: v for k, v in state.items() if not drop.get(k)}


def test_fastvideos_snapshot_holds_every_key_and_nothing_is_wrong(tmp_path) -> None:
    torch.save(_snapshot(), tmp_path / "rng_state_rank0.pt")
    found = read_snapshot(str(tmp_path / "rng_state_rank0.pt"))
    assert found.keys == ("cuda_rng", "gen_cuda", "numpy_rng", "python_rng", "torch_rng")
    assert found.problem is None


def test_an_older_snapshot_without_gen_cuda_is_the_keyerror_fastvideo_meets(tmp_path) -> None:
    torch.save(_snapshot(gen_cuda=True), tmp_path / "rng_state.pt")
    found = read_snapshot(str(tmp_path / "rng_state.pt"))
    assert found.problem == "has no 'gen_cuda', which load_rng_snapshot indexes unconditionally (KeyError)"


def test_a_numpy_state_that_is_not_one_is_named(tmp_path) -> None:
    snapshot = _snapshot()
    snapshot["numpy_rng"] = ("MT19937", np.zeros(10, dtype=np.uint32), 0, 0, 0.0)
    torch.save(snapshot, tmp_path / "r.pt")
    assert "'numpy_rng'" in read_snapshot(str(tmp_path / "r.pt")).problem


def test_numpy_arrays_are_read_as_inert_stand_ins_with_their_shape_and_dtype() -> None:
    for protocol in (2, 4):
        data = pickle.dumps(np.arange(12, dtype=np.uint32).reshape(3, 4), protocol=protocol)
        array = numpy_array(load(data, _rng_global))
        assert (array.dtype, array.shape, array.nbytes) == ("u4", (3, 4), 48)


def test_a_pickle_naming_anything_else_is_refused_and_persistent_ids_only_on_request(tmp_path) -> None:
    with pytest.raises(PickleRefused, match="os.system"):
        load(b"cos\nsystem\n(S'true'\ntR.", _rng_global)
    with pytest.raises(PickleRefused, match="persistent id"):
        load(b"\x80\x02X\x01\x00\x00\x00aQ.", _rng_global)
    assert load(b"\x80\x02X\x01\x00\x00\x00aQ.", _rng_global, persistent=True).pid == "a"


def test_rng_rank_reads_fastvideos_names_only() -> None:
    from fvconsole.core.formats.rng_files import rng_rank

    assert [rng_rank(n) for n in ("rng_state_rank0.pt", "rng_state_rank12.pt", "rng_state_rank4095.pt")] == [0, 12, 4095]
    for other in ("rng_state_rank01.pt", "rng_state.pt", "rng_state_rank.pt", "rng_state_rank1.pt.tmp",
                  "xrng_state_rank1.pt", "rng_state_rank-1.pt"):
        assert rng_rank(other) is None, other
