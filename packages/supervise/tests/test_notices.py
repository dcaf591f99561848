"""Lifecycle notices read off real records: the supervisor on the memory adapter writes the
record, ``jobdispatch.notices`` reads it, and two readings of one record agree."""

from __future__ import annotations

from jobdispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Rule, State
from jobdispatch.notices import delivered, notices
from jobdispatch.records import events as ev
from jobdispatch.types import NoticeKind, Notify

from .conftest import Scenario


def spec(*rules: Rule, notify: Notify | None = None) -> JobSpec:
    return JobSpec(
        command=["train"],
        name="s",
        recovery=RecoveryPolicy(rules=rules),
        extensions=[notify] if notify else [],
    )


def test_three_preemptions_under_a_budget_of_two_read_as_their_notices(scenario: Scenario) -> None:
    scenario.submit(spec(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)))
    for n in (1, 2, 3):
        scenario.on(scenario.running(n), scenario.preempting(n))
    scenario.run()
    view = scenario.store.read(scenario.job)
    found = notices(view)
    kinds = [n.kind for n in found]
    S, E, R, B = NoticeKind.STARTED, NoticeKind.ENDED, NoticeKind.RECOVERED, NoticeKind.BUDGET_LOW
    assert kinds == [S, E, R, B, S, E, R, B, S, E, NoticeKind.ESCALATED, NoticeKind.SETTLED]
    recovered = [n for n in found if n.kind is R]
    assert [n.rule.budget_left for n in recovered if n.rule] == [1, 0]
    assert all(n.cause is not None and n.cause.kind is CauseKind.PREEMPTED for n in recovered)
    # Each recovery closes the end that caused it; the failed job's last alerts stay open.
    ends = [n.id for n in found if n.kind is E]
    assert recovered[0].resolves == (ends[0],) and recovered[1].resolves == (ends[1],)
    settled = found[-1]
    assert settled.outcome is State.FAILED and settled.resolves == ()
    # Ids derive from the record alone: unique, and the same on a second reading.
    assert len({n.id for n in found}) == len(found)
    assert notices(scenario.store.read(scenario.job)) == found
    # An escalation's delivery is read under the escalation's id, as its notice names it.
    escalated = next(n for n in found if n.kind is NoticeKind.ESCALATED)
    assert escalated.escalation is not None and delivered(view) == frozenset()
    last = view.events[-1]
    event = ev.EscalationDelivered(
        at=last.at, by=last.by, escalation=escalated.escalation, sink="x"
    )
    scenario.store.append(scenario.job, [event], expect_revision=view.revision)
    assert delivered(scenario.store.read(scenario.job)) == {(escalated.id, "x")}


def test_a_notice_delivery_is_recorded_and_read_back(scenario: Scenario) -> None:
    scenario.submit(spec(notify=Notify(events=["ended", "settled"], sinks=["hook"])))  # type: ignore[list-item]  # sinks: see Notify
    scenario.on(
        scenario.running(1), lambda s: scenario.backend.env.complete(scenario.canonical(s, 1))
    )
    status = scenario.run()
    assert status.state is State.SUCCEEDED
    view = scenario.store.read(scenario.job)
    assert view.header.spec.notify == Notify(
        events=[NoticeKind.ENDED, NoticeKind.SETTLED],
        sinks=["hook"],  # type: ignore[list-item]  # the converter is tuple, which mypy cannot read
    )
    settled = notices(view)[-1]
    assert settled.kind is NoticeKind.SETTLED and settled.outcome is State.SUCCEEDED
    event = ev.NoticeDelivered(
        at=view.events[-1].at, by=view.events[-1].by, notice=settled.id, sink="hook"
    )
    scenario.store.append(scenario.job, [event], expect_revision=view.revision)
    again = scenario.store.read(scenario.job)
    assert (settled.id, "hook") in delivered(again)
    # The record still folds (a delivery is evidence a settled record may take).
    assert scenario.status().settled
