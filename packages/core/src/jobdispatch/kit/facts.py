"""A cache of what a probe learned about a cluster, each entry kept for a time to live.

A probe asks a cluster about itself (its version, its configuration, what the credentials may
do) and costs several round trips; a poll must not pay for it, and neither should the second
backend a process builds for the same cluster. Yet the answers may change (a site turns
preemption on), so they are kept for ``ttl`` seconds and then asked again. Adapters kept one
module-global dictionary each, with its own lock and its own reset (``clear_cache`` here,
``forget`` there); this is that cache, written once.

With ``probe = false`` a site asks nothing of its cluster: every answer that would rest on the
probe is ``unknown``, saying so (:func:`unprobed`), until the site declares it.

Time is the injected ``clock`` (monotonic by default), so a test moves it instead of sleeping.
The fetch runs outside the lock: two threads missing at once may both probe, and the later
answer stays; a probe's answers are the same either way, and no caller waits on another's round
trips.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

from jobdispatch.types import Capability, Source, Support

__all__ = ["NOT_PROBED", "FactsCache", "unprobed"]

#: The detail of an answer that would rest on a probe, where none was made.
NOT_PROBED = "not probed (probe = false); declare it under capabilities"

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class FactsCache(Generic[K, V]):
    """Values by key, each fetched again once it is ``ttl`` seconds old."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K, ttl: float, fetch: Callable[[], V]) -> V:
        """The value kept for ``key`` when younger than ``ttl`` seconds, else ``fetch()``'s,
        kept from now on. What ``fetch`` raises is raised, and nothing is kept."""
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and now - hit[0] < ttl:
                return hit[1]
        value = fetch()
        with self._lock:
            self._entries[key] = (now, value)
        return value

    def forget(self) -> None:
        """Drop every entry: the next ``get`` of any key fetches (tests that change a cluster's
        answers, or a site that wants a fresh look)."""
        with self._lock:
            self._entries.clear()


def unprobed(answers: Mapping[Capability, Support]) -> dict[Capability, Support]:
    """``answers`` as a cluster that was not asked gives them: each that would rest on the probe
    ``unknown`` with :data:`NOT_PROBED`; the catalogue's (what the scheduler can or cannot do
    whatever its configuration) as they are."""
    unknown = Support.unknown(Source.PROBED, NOT_PROBED)
    return {c: unknown if a.source is Source.PROBED else a for c, a in answers.items()}
