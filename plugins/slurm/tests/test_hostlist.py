"""Hostlist expansion, against the real ``scontrol show hostnames`` (spec 0008 §5).

The adapter expands NodeList itself (one command fewer per poll), so it must agree with Slurm
on every form Slurm prints: several bracket groups, zero padding, lists inside a group.
"""

from __future__ import annotations

import math
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch_slurm.parse import expand_hostlist


def scontrol_hostnames(hostlist: str) -> tuple[str, ...] | None:
    """What the real command prints, one name a line; ``None`` when it refuses the list."""
    done = subprocess.run(
        ["scontrol", "show", "hostnames", hostlist],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
        env={**os.environ, "TZ": "UTC"},
    )
    lines = tuple(done.stdout.split())
    if done.returncode != 0 or "Invalid hostlist" in done.stdout + done.stderr:
        return None
    return lines


FORMS = [
    "n1",
    "a,b,c",
    "n[1-3,5]",
    "n[08-11]",
    "n[9-11]",
    "n[001-003]",
    "n[01,3]",
    "n[007]",
    "n[8-010]",
    "n[1-02]",
    "n[3,1-2]",
    "n[1-3,2]",
    "n[1-2],n1",
    "x[1-3],y",
    "[1-2]",
    "x1.y[1-2]",
    "rack[1-2]-node[01-02]",
    "n[1-3]foo[9-10]",
    "n[0-1][0-1]",
    "a[1-2]-[3-4]",
    "x[1,3]y[2,1]",
    "a[1-2]b[3]",
    "a[1-2]b[3-4]c[5-6]",
    "a[1-2]b[3-4]c[5-6]d[7-8]",
    "p[1-2]q[1-2],z[3-4]",
    "a[1-2]b[3-4]c[5-6],d",
    "n[1-2],",
]


@pytest.mark.parametrize("form", FORMS)
def test_expands_as_scontrol_does(slurm_cluster: None, form: str) -> None:
    expected = scontrol_hostnames(form)
    assert expected is not None, f"scontrol refused {form!r}"
    assert expand_hostlist(form) == expected


@pytest.mark.parametrize("form", ["n[2-1]", "n[]", "n[a-b]", "n[-2]", "n[010-9]"])
def test_refuses_what_scontrol_refuses(slurm_cluster: None, form: str) -> None:
    assert scontrol_hostnames(form) is None
    with pytest.raises(ValueError, match="invalid hostlist"):
        expand_hostlist(form)


def test_several_groups_without_the_cluster() -> None:
    # The regression: the second group was left unexpanded (`rack1-node[01-02]`).
    assert expand_hostlist("rack[1-2]-node[01-02]") == (
        "rack1-node01",
        "rack1-node02",
        "rack2-node01",
        "rack2-node02",
    )


@pytest.mark.parametrize("form", ["n[1-2", "n]", "n[[1]]", "a[1-2],b[3"])
def test_unbalanced_brackets_are_refused(form: str) -> None:
    # scontrol prints garbage for some of these (`n[1-2` -> `n]`); refusing is clearer.
    with pytest.raises(ValueError, match="invalid hostlist"):
        expand_hostlist(form)


def test_nothing_assigned() -> None:
    assert expand_hostlist("None assigned") == ()
    assert expand_hostlist("") == ()
    assert expand_hostlist("(null)") == ()


def test_text_after_the_last_group_is_read_as_a_product() -> None:
    # 22.05 refuses it (`Invalid hostlist`), later releases print it; read it rather than fail.
    assert expand_hostlist("n[1-2]-gpu") == ("n1-gpu", "n2-gpu")


_TEXT = st.text(alphabet="abnxz-.", min_size=0, max_size=3)
_NUM = st.integers(min_value=0, max_value=12)


@st.composite
def _range(draw: st.DrawFn) -> str:
    lo = draw(_NUM)
    width = draw(st.integers(min_value=len(str(lo)), max_value=3))
    text = f"{lo:0{width}d}"
    if draw(st.booleans()):
        text += f"-{lo + draw(st.integers(min_value=0, max_value=3))}"
    return text


@st.composite
def _name(draw: st.DrawFn) -> str:
    """A name of up to three bracket groups; nothing after the last group (22.05 refuses it)."""
    groups = draw(st.lists(st.lists(_range(), min_size=1, max_size=2), min_size=0, max_size=3))
    head = draw(st.text(alphabet="abnxz", min_size=1, max_size=3))
    if not groups:
        return head
    parts = [head]
    for i, group in enumerate(groups):
        parts.append("[" + ",".join(group) + "]")
        if i < len(groups) - 1:
            parts.append(draw(_TEXT))
    return "".join(parts)


hostlists = st.lists(_name(), min_size=1, max_size=3).map(",".join)


@settings(max_examples=60, deadline=None)
@given(hostlists)
def test_generated_hostlists_match_scontrol(slurm_cluster: None, hostlist: str) -> None:
    assert expand_hostlist(hostlist) == scontrol_hostnames(hostlist)


def _groups_size(name: str) -> int:
    import re

    sizes = []
    for group in re.findall(r"\[([^\]]*)\]", name):
        n = 0
        for rng in group.split(","):
            lo, _, hi = rng.partition("-")
            n += int(hi or lo) - int(lo) + 1
        sizes.append(n)
    return math.prod(sizes)


@given(st.lists(_name(), min_size=1, max_size=3))
def test_count_is_the_product_of_the_groups(names: list[str]) -> None:
    assert len(expand_hostlist(",".join(names))) == sum(_groups_size(n) for n in names)


def test_a_row_with_an_unreadable_nodelist_keeps_it_as_printed() -> None:
    from jobdispatch_slurm.parse import parse_squeue

    line = "|".join(["42", "jd-x", "debug", "RUNNING", "None", "", "", "n[1-", "1", "0", ""])
    (row,) = parse_squeue(line + "|")
    assert row.nodes == ("n[1-",)
    assert row.state == "RUNNING"
