"""The two notices read off progress evidence: ``stalled`` after a committed stall verdict and
``resumed`` after a run's resumed-from entry, with ids derived from the record alone."""

from __future__ import annotations

from jobdispatch.notices import notices, says_nothing
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


def test_progress_evidence_alone_changes_no_notice_and_is_said_to() -> None:
    """What a record grown by progress-seen, progress-blind and progress-sighted owes is what it
    owed before (the supervisor's outbox then does not read it again), and a resumed entry,
    which is a notice, is not silent."""
    s = _stalled_then_resumed(enforced=True)
    before = s.view()
    s.later(5).progress_seen(12, 2)
    s.later(5).add(ev.ProgressBlind, detail="the root is away")
    s.later(5).add(ev.ProgressSighted)
    after = s.view()
    grown = after.events[len(before.events) :]
    assert says_nothing(grown)
    assert notices(after) == notices(before)
    assert not says_nothing([*grown, before.events[-1]])  # the resumed entry is a notice
