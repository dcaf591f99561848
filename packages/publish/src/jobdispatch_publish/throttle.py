"""A bandwidth limit for copies, so that publishing beside training does not starve it of I/O."""

from __future__ import annotations

import threading
import time

__all__ = ["Throttle"]


class Throttle:
    """Sleeps callers so that bytes passed to :meth:`spend` average at most ``rate`` per second.

    ``rate`` of ``None`` or 0 means no limit. Thread-safe: one throttle may be shared by every
    worker of a copy, so the limit holds for the copy as a whole.
    """

    def __init__(self, rate: int | None) -> None:
        self.rate = rate or 0
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._spent = 0

    def spend(self, nbytes: int) -> None:
        if not self.rate:
            return
        with self._lock:
            self._spent += nbytes
            due = self._start + self._spent / self.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
