"""Following an adapter's Watcher so that news wakes the supervisor before its next poll.

A poll every 30 s spares the scheduler but makes a supervisor slow to notice an ending. Where
the adapter streams changes as they happen (its :class:`~jobdispatch.spi.Pacing` says
``watch``), one daemon thread per watched job follows ``watch(job)`` and calls ``wake`` for
each observation unlike the last one it saw of that object (a first one included). Waking
only ends the sleep early: the poll that follows is the supervisor's ordinary batched query,
and the poll floor still holds, so a chatty watch cannot make the supervisor ask the scheduler
more often.

Nothing seen on a watch is recorded: the record is written from Find, as always, so a watch
that drops or repeats events can delay news but never corrupt it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from jobdispatch.spi import Backend, ObjectObs, Watcher

__all__ = ["Watching"]

log = logging.getLogger("jobdispatch.supervise")


class Watching:
    """The jobs being watched, each by a thread of its own, at most ``limit`` of them.

    Args:
        backend: the adapter; nothing is watched unless it is a :class:`Watcher`.
        wake: called (from a watch thread) on news.
        pause: seconds between the end of one watch of a job and the next (the poll floor:
            a watch that ends at once costs the backend no more than a poll would).
        stopping: set when everything must end.
        limit: the most jobs watched at once; the others are seen by polls alone.
    """

    def __init__(
        self,
        backend: Backend,
        wake: Callable[[], None],
        *,
        pause: float,
        stopping: threading.Event,
        limit: int,
    ) -> None:
        self.backend = backend
        self.wake = wake
        self.pause = pause
        self.stopping = stopping
        self.limit = limit
        self._wanted: set[str] = set()
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def follow(self, jobs: Iterable[str]) -> None:
        """Watch these jobs (up to the limit) and no others; a thread of a job no longer
        wanted ends after its current watch."""
        if not isinstance(self.backend, Watcher):
            return
        with self._lock:
            self._wanted = set(list(dict.fromkeys(jobs))[: self.limit])
            for job in self._wanted:
                thread = self._threads.get(job)
                if thread is None or not thread.is_alive():
                    thread = threading.Thread(
                        target=self._follow, args=(job,), name=f"watch {job}", daemon=True
                    )
                    self._threads[job] = thread
                    thread.start()

    def stop(self) -> None:
        """Want nothing more; threads end after their current watch."""
        with self._lock:
            self._wanted = set()

    def _still_wanted(self, job: str) -> bool:
        with self._lock:
            return job in self._wanted and not self.stopping.is_set()

    def _follow(self, job: str) -> None:
        watcher = self.backend
        assert isinstance(watcher, Watcher)
        seen: dict[str, ObjectObs] = {}
        while self._still_wanted(job):
            try:
                for obs in watcher.watch(job):
                    # Any observation unlike the last one of its object wakes, a first one
                    # too: this thread may start after the poll that saw the object last, so
                    # its first sight may already be news (an ending). A watch reopened
                    # later repeats what it showed and wakes nothing.
                    if seen.get(obs.ref.id) != obs:
                        seen[obs.ref.id] = obs
                        self.wake()
                    if not self._still_wanted(job):
                        return
            except Exception as exc:  # a watch is a hint: its failure costs only latency
                log.debug("watch of %s ended: %s", job, exc)
            self.stopping.wait(self.pause)
