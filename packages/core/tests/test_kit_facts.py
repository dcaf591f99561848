"""The facts cache: a value is fetched once per key and kept for its time to live, then
fetched again; forget drops everything; a failed fetch keeps nothing. Unprobed answers: only
those resting on the probe become unknown."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.kit.facts import NOT_PROBED, FactsCache, unprobed
from jobdispatch.types import Capability, Source, Support, Tristate


def _clock(now: list[float]) -> Callable[[], float]:
    """A clock a test moves by setting ``now[0]``."""
    return lambda: now[0]


def test_kept_for_its_time_to_live_then_fetched_again() -> None:
    now = [0.0]
    cache: FactsCache[str, int] = FactsCache(clock=_clock(now))
    fetched: list[str] = []

    def fetch(key: str) -> int:
        fetched.append(key)
        return len(fetched)

    assert cache.get("a", 10, lambda: fetch("a")) == 1
    now[0] = 9.9
    assert cache.get("a", 10, lambda: fetch("a")) == 1
    assert cache.get("b", 10, lambda: fetch("b")) == 2  # another key: its own entry
    now[0] = 10.0
    assert cache.get("a", 10, lambda: fetch("a")) == 3
    cache.forget()
    assert cache.get("b", 10, lambda: fetch("b")) == 4
    assert fetched == ["a", "b", "a", "b"]


def test_a_zero_ttl_always_fetches_and_a_failure_keeps_nothing() -> None:
    cache: FactsCache[str, int] = FactsCache(clock=_clock([0.0]))
    assert cache.get("a", 0, lambda: 1) == 1
    assert cache.get("a", 0, lambda: 2) == 2

    def fail() -> int:
        raise OSError("unreachable")

    with pytest.raises(OSError, match="unreachable"):
        cache.get("b", 100, fail)
    assert cache.get("b", 100, lambda: 3) == 3  # nothing was kept for b
    assert cache.get("a", 100, lambda: 4) == 2  # a's value, kept at 0, is fresh for 100 s


@given(
    ttl=st.floats(min_value=0, max_value=100),
    times=st.lists(st.floats(min_value=0, max_value=1000), min_size=1, max_size=20),
)
def test_a_fetch_happens_exactly_when_the_kept_value_is_ttl_old(
    ttl: float, times: list[float]
) -> None:
    now = [0.0]
    cache: FactsCache[str, float] = FactsCache(clock=_clock(now))
    kept_at: float | None = None
    for t in sorted(times):
        now[0] = t
        got = cache.get("k", ttl, functools.partial(float, t))
        if kept_at is None or t - kept_at >= ttl:
            kept_at = t
        assert got == kept_at


def test_unprobed_makes_unknown_only_what_rests_on_the_probe() -> None:
    answers = {
        Capability.HOLD: Support.yes(Source.PROBED, "the cluster said so"),
        Capability.QUEUES: Support.no(Source.PROBED, "none configured"),
        Capability.EXCLUSIVE_NODES: Support.yes(Source.CATALOGUE, "--exclusive"),
        Capability.ACCOUNTS: Support.no(Source.DECLARED, "the site says no"),
    }
    seen = unprobed(answers)
    assert seen[Capability.HOLD] == Support(Tristate.UNKNOWN, Source.PROBED, NOT_PROBED)
    assert seen[Capability.QUEUES] == Support(Tristate.UNKNOWN, Source.PROBED, NOT_PROBED)
    assert seen[Capability.EXCLUSIVE_NODES] == answers[Capability.EXCLUSIVE_NODES]
    assert seen[Capability.ACCOUNTS] == answers[Capability.ACCOUNTS]
