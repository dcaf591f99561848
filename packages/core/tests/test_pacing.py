"""An adapter's pacing: how often a supervisor may poll its scheduler (spec 0003, Paced)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import Invalid
from jobdispatch.memory import MemoryBackend
from jobdispatch.spi import DEFAULT_PACING, MAX_POLL_FLOOR, Paced, Pacing, pacing_of

SLURMISH = Pacing(interval=30.0, floor=2.0)

floors = st.floats(min_value=1e-3, max_value=MAX_POLL_FLOOR)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@given(
    floor=floors,
    extra=st.floats(min_value=0.0, max_value=1e4),
    jitter=st.floats(min_value=0.0, max_value=0.99),
    draw=draws,
    until=st.none() | st.floats(min_value=-1e4, max_value=1e5),
)
def test_a_delay_is_never_below_the_floor_nor_above_the_interval_nor_past_a_due_step(
    floor: float, extra: float, jitter: float, draw: float, until: float | None
) -> None:
    pacing = Pacing(interval=floor + extra, floor=floor, jitter=jitter)
    delay = pacing.delay(draw, until)
    assert pacing.floor <= delay <= pacing.interval
    # Early by at most the jitter, unless a step is due sooner (and then no sooner than it,
    # or than the floor).
    earliest = pacing.interval * (1 - jitter)
    if until is not None:
        earliest = min(earliest, max(until, pacing.floor))
    assert delay >= earliest * (1 - 1e-12)
    if until is not None and until >= pacing.floor:
        assert delay <= until


def test_the_draw_decides_the_delay_so_a_seeded_source_repeats_the_schedule() -> None:
    assert SLURMISH.delay(0.0) == 30.0
    assert SLURMISH.delay(0.5) == pytest.approx(27.0)
    assert SLURMISH.delay(0.999999) == pytest.approx(24.0, abs=1e-4)
    assert SLURMISH.delay(0.0, until=5.0) == 5.0
    assert SLURMISH.delay(0.0, until=0.1) == 2.0  # a step due at once still waits the floor


def test_a_site_may_raise_the_floor_and_set_the_interval_but_never_lower_the_floor() -> None:
    raised = SLURMISH.for_site(floor=10)
    assert (raised.interval, raised.floor) == (30.0, 10.0)
    assert SLURMISH.for_site(interval=120).interval == 120.0
    # A floor raised past the interval takes the interval with it.
    assert DEFAULT_PACING.for_site(floor=5).interval == 5.0
    with pytest.raises(Invalid, match=r"a poll floor of 1 s is below the adapter's floor of 2 s"):
        SLURMISH.for_site(floor=1)
    with pytest.raises(Invalid, match=r"a poll interval of 1 s is below the poll floor of 2 s"):
        SLURMISH.for_site(interval=1)
    with pytest.raises(Invalid, match=r"a poll interval of 5 s is below the poll floor of 10 s"):
        SLURMISH.for_site(interval=5, floor=10)


@pytest.mark.parametrize(
    ("site", "words"),
    [
        ({"interval": math.nan}, "a poll interval must be a positive"),
        ({"interval": math.inf}, "a poll interval must be a positive"),
        ({"interval": 0}, "a poll interval must be a positive"),
        ({"interval": "30"}, "a poll interval must be a number"),
        ({"interval": True}, "a poll interval must be a number"),
        ({"floor": 11}, "a poll floor must be a positive number of seconds, at most 10"),
        ({"floor": -1}, "a poll floor must be a positive"),
    ],
)
def test_a_site_pacing_out_of_range_is_refused_naming_the_setting(
    site: dict[str, Any], words: str
) -> None:
    with pytest.raises(Invalid, match=words):
        SLURMISH.for_site(**site)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"interval": 1.0, "floor": 2.0}, r"interval \(1 s\) is below its floor \(2 s\)"),
        ({"interval": 30.0, "floor": 0.0}, "floor must be a positive"),
        ({"interval": 30.0, "floor": 2.0, "jitter": 1.0}, r"jitter is a fraction in \[0, 1\)"),
    ],
)
def test_an_adapter_cannot_declare_a_pacing_out_of_range(
    fields: dict[str, Any], words: str
) -> None:
    with pytest.raises(Invalid, match=words):
        Pacing(**fields)


def test_an_adapter_without_a_pacing_gets_the_default_and_one_with_a_wrong_value_is_named() -> None:
    class Plain:
        name = "plain"

    class Wrong:
        name = "wrong"
        pacing = 30

    assert pacing_of(Plain()) is DEFAULT_PACING
    with pytest.raises(Invalid, match="adapter 'wrong' declares a pacing that is not a Pacing"):
        pacing_of(Wrong())
    assert isinstance(MemoryBackend(), Paced)
    assert pacing_of(MemoryBackend()) == MemoryBackend.pacing
