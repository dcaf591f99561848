"""Sizes read one way everywhere (issue 33, item 5): K, M, G, T with or without ``i`` and
``B``, in either case, are binary; a bare number is MiB; fractions round up, never down."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.sizes import MIB, parse_bytes, parse_mib

_FACTOR = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@given(
    n=st.integers(0, 10**6),
    unit=st.sampled_from(sorted(_FACTOR)),
    spelling=st.sampled_from(["{u}", "{u}i", "{u}B", "{u}iB", "{l}", "{l}i", "{l}b", "{l}ib"]),
    space=st.sampled_from(["", " "]),
)
def test_every_spelling_of_a_unit_is_binary(n: int, unit: str, spelling: str, space: str) -> None:
    text = f"{n}{space}{spelling.format(u=unit, l=unit.lower())}"
    assert parse_bytes(text) == n * _FACTOR[unit]


@given(n=st.integers(0, 10**9))
def test_a_bare_number_is_mib_as_text_or_number(n: int) -> None:
    assert parse_bytes(n) == parse_bytes(str(n)) == n * MIB
    assert parse_mib(n) == n


@given(whole=st.integers(0, 10**4), fraction=st.from_regex(r"[0-9]{1,6}", fullmatch=True))
def test_a_fraction_rounds_up_never_down(whole: int, fraction: str) -> None:
    got = parse_bytes(f"{whole}.{fraction}G")
    exact_times_scale = int(f"{whole}{fraction}") * (1 << 30)
    scale = 10 ** len(fraction)
    assert got * scale >= exact_times_scale > (got - 1) * scale


@pytest.mark.parametrize(
    ("text", "mib"),
    [("64Gi", 65536), ("480GB", 491520), ("480gb", 491520), ("1.5T", 1572864), ("1K", 1)],
)
def test_the_reported_spellings(text: str, mib: int) -> None:
    assert parse_mib(text) == mib


@pytest.mark.parametrize("text", ["lots", "64B", "64Bi", "64iB", "64P", "-1", "1e3", "", "G"])
def test_what_is_not_a_size_is_refused_with_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a size: .*binary"):
        parse_bytes(text)


@pytest.mark.parametrize("value", [True, 1.5, None, [1]])
def test_other_types_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="must be a size"):
        parse_bytes(value)
