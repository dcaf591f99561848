"""Time as an injected dependency.

The job level never reads a clock: ``fold``, ``project`` and ``next`` take ``now``. The places
that must ask (the supervisor's loop, a store's lease expiry, the memory adapter) take a
:data:`Clock` so that the simulator can drive them with simulated time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

#: A callable answering the current time, timezone-aware.
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The machine's time, in UTC."""
    return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told: for tests and the simulator."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            msg = "ManualClock needs a timezone-aware start"
            raise ValueError(msg)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, by: timedelta | float) -> datetime:
        """Move forward by ``by`` (seconds when a number); time never moves back."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if step < timedelta(0):
            msg = f"a clock cannot move backwards ({step})"
            raise ValueError(msg)
        self._now += step
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when`` (the simulator's clock jumps); backwards too, as real clocks do."""
        self._now = when
