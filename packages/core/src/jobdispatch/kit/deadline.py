"""The refusal of a call that comes after its recorded deadline, written once for every adapter.

The supervisor records a deadline with each decision to open, hold, release or requeue, and
passes it in the call's ``meta`` (spec 0003): a call that lands after it must change nothing,
since the decision it carries may no longer hold. No scheduler checks such a deadline itself, so
every adapter checks it, as late as it can before the scheduler acts, with this one comparison
and this one message.
"""

from __future__ import annotations

from datetime import datetime

from jobdispatch.errors import Rejected

__all__ = ["refuse_past_deadline"]


def refuse_past_deadline(deadline: datetime, now: datetime, what: str) -> None:
    """Raise Rejected, naming ``what`` (``"hold 3 of REF"``), when ``now`` is past
    ``deadline``."""
    if now > deadline:
        msg = f"{what}: its deadline {deadline.isoformat()} passed (now {now.isoformat()})"
        raise Rejected(msg)
