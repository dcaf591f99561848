"""Keeping the cyclic garbage collector's full passes out of polls.

A supervisor of ten thousand jobs keeps about a million long-lived objects: each job's folded
record, the store's decoded events, the adapter's view of the scheduler. CPython's collector
runs a full pass, over every one of them, whenever the objects promoted to its oldest
generation since the last full pass reach a quarter of those that survived it. A poll's own
objects (each job's view, discovery and steps) live until the poll ends, so they are promoted
although they die a moment later, and a full pass came every second or third poll. Measured
on this project's benchmark (``bench_supervise.py``, 10,000 running jobs, LMDB): 0.55 to 0.7 s a
full pass, on top of a 0.6 s poll, which alone put the longest poll over a second.

So :class:`HeapKeeper` works between polls, where a pause delays nothing:

* after each poll it freezes the heap (``gc.freeze``, which only moves the collector's lists:
  microseconds). Frozen objects are skipped by the automatic passes, so a pass during a poll
  scans what was promoted since the last freeze, not the whole heap. Reference counting still
  frees a frozen object the moment nothing refers to it; only garbage in reference cycles
  (an exception kept with its traceback, say) waits;
* every ``collect_every`` it unfreezes, runs one full collection, which frees those cycles,
  and freezes again, still between polls.

The freeze is process-wide: other threads' objects are frozen too, and collected at the same
full collections. ``stop`` unfreezes, so a process whose supervisor ends is left as the
collector would have it. Time comes from the injected clock, so the simulator's runs stay
deterministic (the collector's work never changes what the code computes).
"""

from __future__ import annotations

import gc
import logging
import time
from datetime import datetime, timedelta

from jobdispatch.clock import Clock

log = logging.getLogger(__name__)

#: How often the frozen heap gets its full collection (its cyclic garbage freed), by default.
COLLECT_EVERY = timedelta(minutes=10)


class HeapKeeper:
    """Freezes the heap after each poll and collects it fully every ``collect_every``.

    Args:
        clock: where time comes from (the supervisor's).
        collect_every: the longest time cyclic garbage waits for a full collection.
        enabled: False leaves the collector alone (each call does nothing).
    """

    def __init__(
        self, clock: Clock, *, collect_every: timedelta = COLLECT_EVERY, enabled: bool = True
    ) -> None:
        self.clock = clock
        self.collect_every = collect_every
        self.enabled = enabled
        self._collected: datetime | None = None
        #: Seconds the last full collection took (None before the first): for benchmarks and logs.
        self.last_collection: float | None = None

    def between_polls(self) -> None:
        """After a poll: collect fully when it is due (the first time, and every
        ``collect_every``), then freeze what is alive for the polls to come."""
        if not self.enabled:
            return
        now = self.clock()
        if self._collected is None or now - self._collected >= self.collect_every:
            self._collected = now
            self.collect()
        gc.freeze()

    def collect(self) -> int:
        """One full collection of the whole heap, frozen part included; answers what it freed."""
        started = time.perf_counter()
        gc.unfreeze()
        freed = gc.collect()
        self.last_collection = time.perf_counter() - started
        log.debug("full collection: %d objects freed in %.3f s", freed, self.last_collection)
        return freed

    def stop(self) -> None:
        """Hand the heap back to the collector's ordinary schedule."""
        if self.enabled:
            gc.unfreeze()
