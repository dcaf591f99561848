"""The kit's deadline refusal: a call at or before its recorded deadline passes, one after it is
Rejected, naming the call and both instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from jobdispatch.errors import Rejected
from jobdispatch.kit.deadline import refuse_past_deadline

DEADLINE = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("before", [timedelta(0), timedelta(seconds=1), timedelta(days=1)])
def test_a_call_by_its_deadline_passes(before: timedelta) -> None:
    refuse_past_deadline(DEADLINE, DEADLINE - before, "hold 3 of dispatch/jd-x-1-1")


def test_a_call_after_its_deadline_is_rejected_naming_the_call_and_both_instants() -> None:
    late = DEADLINE + timedelta(microseconds=1)
    with pytest.raises(Rejected) as raised:
        refuse_past_deadline(DEADLINE, late, "hold 3 of dispatch/jd-x-1-1")
    said = str(raised.value)
    assert "hold 3 of dispatch/jd-x-1-1" in said
    assert DEADLINE.isoformat() in said and late.isoformat() in said
