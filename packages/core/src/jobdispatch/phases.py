"""A fixed offset per job, to spread work that many jobs would otherwise do in the same poll.

Jobs launched together share every deadline measured from their launch: their progress would
be due for the record in the same later poll, and their leases due for renewal in the same
later poll, so one poll in many would carry all of that work at once. Each such schedule is
shifted by the job's :func:`phase` instead, drawn from a digest of its id: the same id always
gets the same phase (the simulator's records are replayed byte for byte), and many ids spread
evenly over the interval. Pure: no clock, no I/O.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import timedelta

from jobdispatch.types import JobID

__all__ = ["phase"]

_TICK = timedelta(microseconds=1)


@functools.lru_cache(maxsize=1 << 16)
def phase(job: JobID, every: timedelta) -> timedelta:
    """The job's offset in ``[0, every)``, to the microsecond (zero when ``every`` is not
    positive). Remembered per id and interval: a pure function, the cache only spares a digest
    per job per poll."""
    ticks = every // _TICK
    if ticks <= 0:
        return timedelta(0)
    drawn = int.from_bytes(hashlib.sha256(job.encode()).digest()[:8], "big")
    return (drawn % ticks) * _TICK
