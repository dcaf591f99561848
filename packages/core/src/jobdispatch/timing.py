"""Every duration and count ``next`` and ``fold`` wait for or bound, in one module.

Spec 0001 D7 lists them as one table, and docs/reference/timings.md prints it; a repository
test checks that table against this module, so the documentation cannot drift from the code.
They are constants of the protocol, not settings: every supervisor that serves a job must
judge it by the same values, and per-job values live in the record's header instead
(:class:`jobdispatch.records.events.Options`).
"""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "ABSENCE_GAP",
    "ABSENCE_GRACE",
    "ABSENCE_REFRESH",
    "CALL_DEADLINE",
    "CESSATION_INTERVAL",
    "OPEN_RETRY",
    "REQUEUE_TRIES",
    "SHARED_HOLD_FOR",
    "STOP_RETRY",
]

#: How long a known object may be absent from complete Finds before it is judged stopped.
ABSENCE_GRACE = timedelta(seconds=60)
#: How often a continuing absence is recorded again, and the longest gap between recorded
#: misses that still counts as one absence (longer, and the object may have been seen between).
ABSENCE_REFRESH = timedelta(seconds=10)
ABSENCE_GAP = timedelta(seconds=30)
#: How far ahead a hold-family, requeue or restore call's deadline is set.
CALL_DEADLINE = timedelta(seconds=30)
#: How often a site's cessation signal is asked again while a shared-checkpoint hold stands.
CESSATION_INTERVAL = timedelta(minutes=1)
#: How long after an open or stop call an object may keep its old state before the call is
#: made again (both calls are idempotent).
OPEN_RETRY = timedelta(seconds=10)
STOP_RETRY = timedelta(seconds=30)
#: How many times a requeue call is made for one recovery before the job fails with it.
REQUEUE_TRIES = 3
#: The hold every rule becomes under a shared checkpoint.
SHARED_HOLD_FOR = timedelta(hours=24)
