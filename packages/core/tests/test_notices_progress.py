"""The two notices read off progress evidence: ``stalled`` after a committed stall verdict and
``resumed`` after a run's resumed-from entry, with ids derived from the record alone."""

from __future__ import annotations

from jobdispatch.notices import notices
from jobdispatch.records import events as ev
from jobdispatch.spi import ObjectRef
from jobdispatch.testing import Story
from jobdispatch.types import Cause, CauseKind, NoticeKind, Provenance


def _stalled_then_resumed(enforced: bool) -> Story:
    s = Story()
    s.later(5).launched(1, "o1", running=False)
    stall = Cause(CauseKind.STALLED, Provenance.SUPERVISOR, "no progress for 20.4 s")
    s.later(30).add(
        ev.StallDeclared, ref=ObjectRef("o1"), execution=0, cause=stall, enforced=enforced
    )
    s.later(10).add(ev.ResumedFrom, submission=2, execution="0", step=10, resumed_at=s.now)
    return s


def test_a_stall_and_a_resume_are_each_one_notice() -> None:
    s = _stalled_then_resumed(enforced=True)
    found = {n.kind: n for n in notices(s.view())}
    stalled, resumed = found[NoticeKind.STALLED], found[NoticeKind.RESUMED]
    assert stalled.alert and stalled.submission == 1 and stalled.execution == 0
    assert stalled.cause is not None and stalled.cause.kind is CauseKind.STALLED
    assert "stopping it" in stalled.summary
    assert resumed.submission == 2 and resumed.execution == 0 and resumed.detail == "step 10"
    assert not resumed.alert
    # Ids from the record alone: reading the same record again names them alike.
    assert [n.id for n in notices(s.view())] == [n.id for n in notices(s.view())]
    assert stalled.id.startswith("stalled:") and resumed.id.startswith("resumed:")


def test_an_observe_only_verdict_says_nothing_was_stopped() -> None:
    s = _stalled_then_resumed(enforced=False)
    stalled = next(n for n in notices(s.view()) if n.kind is NoticeKind.STALLED)
    assert "observe only: not stopped" in stalled.summary
