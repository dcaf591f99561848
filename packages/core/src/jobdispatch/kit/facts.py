"""A cache of what a probe learned about a cluster, each entry kept for a time to live.

A probe asks a cluster about itself (its version, its configuration, what the credentials may
do) and costs several round trips; a poll must not pay for it, and neither should the second
backend a process builds for the same cluster. Yet the answers may change (a site turns
preemption on), so they are kept for ``ttl`` seconds and then asked again. Adapters kept one
module-global dictionary each, with its own lock and its own reset (``clear_cache`` here,
``forget`` there); this is that cache, written once.

Time is the injected ``clock`` (monotonic by default), so a test moves it instead of sleeping.
The fetch runs outside the lock: two threads missing at once may both probe, and the later
answer stays; a probe's answers are the same either way, and no caller waits on another's round
trips.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["FactsCache"]

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
