"""The gate and the holds, both written as a far-future begin time.

Slurm keeps a pending job's begin time to the second and prints it back exactly (0007 §2), so
the begin time can carry more than "not yet": it says whether the object is gated, and which
hold instance stands on it, and whether the gate was already lifted underneath that hold. The
adapter therefore needs no state of its own to answer ``hold_instance`` or to release a hold
back to the right place, and any begin time that is not one of these values (Slurm's own
requeue delay, ``now + cred_expire``; a user's ``--begin``) is told apart by value:

========================================  ==========================================
begin time                                meaning
========================================  ==========================================
``2099-01-01T00:00:00``                   gated (Start's gate, never opened)
``2090-01-01T00:00:00`` + *i* seconds     hold *i*; the gate was lifted before it
``2095-01-01T00:00:00`` + *i* seconds     hold *i*; the object is still gated under it
anything else                             not ours: pending on Slurm's own begin time
========================================  ==========================================

Instances are below 10^8 (about 3.2 years of seconds), so the ranges never meet, and all of
them lie before ``3000-01-01``, the far end of the sacct window the adapter asks for (0007 §9).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime, timedelta

import attrs
from jobdispatch.errors import Invalid

__all__ = [
    "GATE",
    "HOLD_GATED_BASE",
    "HOLD_OPEN_BASE",
    "MAX_INSTANCE",
    "Begin",
    "BeginKind",
    "decode",
    "hold_time",
    "slurm_time",
]

GATE = datetime(2099, 1, 1, tzinfo=UTC)
HOLD_OPEN_BASE = datetime(2090, 1, 1, tzinfo=UTC)
HOLD_GATED_BASE = datetime(2095, 1, 1, tzinfo=UTC)
#: One past the largest hold instance the begin time can carry.
MAX_INSTANCE = 100_000_000


class BeginKind(enum.Enum):
    NONE = "none"
    GATE = "gate"
    HOLD = "hold"
    OTHER = "other"


@attrs.frozen
class Begin:
    """What a pending job's begin time says."""

    kind: BeginKind
    instance: int | None = None
    #: For a hold: whether the object is still gated beneath it (release returns to the gate).
    gated: bool = False


def slurm_time(at: datetime) -> str:
    """An absolute time as sbatch and scontrol read it under ``TZ=UTC``: no zone suffix (Slurm
    refuses ``Z``, 0007 §2)."""
    if at.tzinfo is None:
        msg = f"begin time {at!r} must be timezone-aware"
        raise Invalid(msg)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def hold_time(instance: int, *, gated: bool) -> datetime:
    """The begin time that stands for hold ``instance`` (over a gated or an opened object)."""
    if not 0 <= instance < MAX_INSTANCE:
        msg = f"hold instance {instance} is outside 0..{MAX_INSTANCE - 1}, which a begin time holds"
        raise Invalid(msg)
    base = HOLD_GATED_BASE if gated else HOLD_OPEN_BASE
    return base + timedelta(seconds=instance)


def decode(begin: datetime | None) -> Begin:
    """Read a pending job's begin time back into gate, hold (with its instance) or other."""
    if begin is None:
        return Begin(BeginKind.NONE)
    if begin == GATE:
        return Begin(BeginKind.GATE)
    for base, gated in ((HOLD_OPEN_BASE, False), (HOLD_GATED_BASE, True)):
        offset = (begin - base).total_seconds()
        if 0 <= offset < MAX_INSTANCE and offset == int(offset):
            return Begin(BeginKind.HOLD, int(offset), gated)
    return Begin(BeginKind.OTHER)
