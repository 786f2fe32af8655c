"""Slurm hostlist expansion and compression (pure Python, no Slurm needed)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fvconsole.core.fleet.hostlist import MAX_HOSTS, compress_hostlist, expand_hostlist
from fvconsole.core.shared.errors import FvError


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("n[1-3,5]", ("n1", "n2", "n3", "n5")),
        ("gpu[01-04]", ("gpu01", "gpu02", "gpu03", "gpu04")),
        ("a,b", ("a", "b")),
        ("rack[1-2]-n[1-2]", ("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2")),
        ("n[9-11]", ("n9", "n10", "n11")),
        ("n[098-101]", ("n098", "n099", "n100", "n101")),
        ("login1", ("login1",)),
        ("n1,n[1-2],n2", ("n1", "n2")),
        (" n[1-2] , m3 ", ("n1", "n2", "m3")),
        ("n[1-2]x", ("n1x", "n2x")),
    ],
)
def test_expand(text: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (["n1", "n2", "n3", "n5"], "n[1-3,5]"),
        (["n2", "n3", "n4", "n5", "n6", "n7", "n8"], "n[2-8]"),
        (["gpu01", "gpu02", "gpu04"], "gpu[01-02,04]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n1"], "n1"),
        (["b", "a", "n3", "n1"], "a,b,n[1,3]"),
        (["n09", "n10"], "n[09-10]"),
        ([], ""),
    ],
)
def test_compress(names: list[str], text: str) -> None:
    assert compress_hostlist(names) == text


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("n[1-", "unbalanced '['"),
        ("n]", "unbalanced ']'"),
        ("n[3-1]", "runs backwards"),
        ("n[a]", "bad range 'a'"),
        ("n[]", "empty brackets"),
        ("n[[1]]", "nested"),
        (f"n[1-{MAX_HOSTS + 1}]", "more than"),
        ("n[1-1000]-m[1-1001]-o[1-2]", "more than"),
        ("bad/name", "invalid node name"),
        ("n[1-" + "9" * 5000 + "]", "more than 18 digits"),
        ("n" + "[1]" * 300, "longer than 255"),  # one name of 301 characters
        ("n[１-３]", "bad range"),  # fullwidth digits are not node numbers
    ],
)
def test_bad_hostlists_name_the_field(text: str, fragment: str) -> None:
    with pytest.raises(FvError) as info:
        expand_hostlist(text, "--nodes")
    assert str(info.value).startswith("--nodes: ")
    assert fragment in str(info.value)


def test_errors_quote_long_expressions_briefly() -> None:
    with pytest.raises(FvError) as info:
        expand_hostlist("n[1-" + "9" * 5000 + "]", "--nodes")
    assert len(str(info.value)) < 300


def test_compress_keeps_names_with_huge_numbers_as_they_are() -> None:
    long = "n" + "7" * 5000  # int() of the suffix would exceed Python's digit limit
    assert compress_hostlist([long, "n1", "n2"]) == f"n[1-2],{long}"


def test_many_bracket_groups_expand_without_recursion() -> None:
    assert expand_hostlist("n" + "[1]" * 200) == ("n" + "1" * 200,)


def test_large_range_is_linear() -> None:
    names = expand_hostlist("n[1-100000]")
    assert len(names) == 100000 and names[-1] == "n100000"
    assert compress_hostlist(names) == "n[1-100000]"


_name = st.builds(
    lambda prefix, num, pad: f"{prefix}{num:0{pad}d}",
    st.sampled_from(["n", "gpu", "rack1-n"]),
    st.integers(0, 150),
    st.integers(1, 3),
) | st.sampled_from(["login", "head"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_name, max_size=40))
def test_compress_then_expand_round_trips(names: list[str]) -> None:
    assert set(expand_hostlist(compress_hostlist(names))) == set(names)


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="scontrol not installed")
@pytest.mark.parametrize("text", ["n[1-3,5]", "gpu[01-04]", "rack[1-2]-n[1-2]", "n[098-101],a"])
def test_expansion_matches_scontrol(text: str, tmp_path) -> None:
    conf = tmp_path / "slurm.conf"  # scontrol needs a parsable config even to expand a hostlist
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    out = subprocess.run(["scontrol", "show", "hostnames", text], capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    assert expand_hostlist(text) == tuple(out.stdout.split())
