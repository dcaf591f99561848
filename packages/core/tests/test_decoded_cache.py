"""The decoded cache's memory of which events settle a record (``DecodedCache.settles``): what
a store checks its index row against on every read, at the cost of the events new since."""

from __future__ import annotations

from jobdispatch.records import events as ev
from jobdispatch.records.decoded import DecodedCache
from jobdispatch.testing import Story

_STORY = Story()
_HEADER = _STORY.header


def _some(n: int) -> tuple[ev.AnyEvent, ...]:
    """``n`` events that settle nothing (a story's launch, repeated as needed)."""
    s = Story()
    s.later(1).launched(1, "o1")
    return tuple(s.events[i % len(s.events)] for i in range(n))


def _settled() -> ev.AnyEvent:
    s = Story()
    s.later(1).add(ev.Settled)
    (event,) = [e for e in s.events if isinstance(e, ev.Settled)]
    return event


def test_a_growing_record_is_looked_at_only_past_what_was_looked_at() -> None:
    cache = DecodedCache(1_000)
    first = _some(3)
    cache.put(7, _HEADER, first)
    assert not cache.settles(7, first)
    # An event settling it among those already looked at is not looked for again: proof that
    # only the new ones are (a record only grows, so this cannot happen to a real one).
    forged = (_settled(), *first[1:], *_some(2))
    assert not cache.settles(7, forged)
    grown = (*forged, _settled(), *_some(1))
    assert cache.settles(7, grown)
    assert cache.settles(7, (*grown, *_some(2)))  # once found, known


def test_a_record_not_in_the_cache_is_looked_at_whole_each_time() -> None:
    cache = DecodedCache(1_000)
    events = (_settled(), *_some(2))
    assert cache.settles(3, events)
    assert not cache.settles(3, _some(3))  # nothing remembered for a record not cached
    off = DecodedCache(0)  # a store with its cache switched off
    off.put(3, _HEADER, _some(2))
    assert not off.settles(3, _some(2))
    assert off.settles(3, events)


def test_what_was_looked_at_goes_with_the_record() -> None:
    cache = DecodedCache(8)
    cache.put(1, _HEADER, _some(3))
    assert not cache.settles(1, _some(3))
    cache.put(2, _HEADER, _some(6))  # 1 is evicted (4 + 7 > 8), and what was looked at of it
    assert cache.get(1) is None
    cache.put(1, _HEADER, _some(3))
    assert cache.settles(1, (_settled(), *_some(2)))  # looked at whole again


def test_a_record_shorter_than_what_was_looked_at_is_looked_at_whole() -> None:
    cache = DecodedCache(1_000)
    cache.put(5, _HEADER, _some(4))
    assert not cache.settles(5, _some(4))
    assert cache.settles(5, (_settled(),))
