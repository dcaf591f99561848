"""One record's facts, from a record written by hand with known times; and the sums, which
must come out the same however records are put in and taken out."""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.records import events as ev
from jobdispatch.spi import ExecutionObs
from jobdispatch.testing import PREEMPTED, SUCCESS, T0, Story, observation
from jobdispatch.triggers import End
from jobdispatch.types import Action, Cause, CauseKind, ObjectState, Rule, State
from jobdispatch_metrics.facts import JobFacts, facts_of
from jobdispatch_metrics.watch import Tally

RUNNING, ENDED = ObjectState.RUNNING, ObjectState.ENDED


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _run(
    index: int,
    state: ObjectState,
    started: float,
    ended: float | None = None,
    cause: Cause | None = None,
) -> ExecutionObs:
    return ExecutionObs(
        index=index,
        state=state,
        cause=cause,
        started_at=_at(started),
        ended_at=_at(ended) if ended is not None else None,
    )


def _story() -> Story:
    """Created at 0; runs from 20, preempted at 100 (recorded at 103); resubmitted at 104
    under rule 0; the second run starts at 160 and ends cleanly at 199 (recorded at 200); the
    outcome is committed at 202."""
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2))
    job = story.job_id
    story.later(20).launched(1, "o1", running=False)
    story.observe(observation(job, 1, 1, "o1", RUNNING, _run(0, RUNNING, 20)))
    story.later(83).observe(observation(job, 1, 1, "o1", ENDED, _run(0, ENDED, 20, 100, PREEMPTED)))
    story.later(1).launched(2, "o2", trigger=End("o1", 0), rule=0, cause=PREEMPTED, running=False)
    story.later(56).observe(observation(job, 2, 1, "o2", RUNNING, _run(0, RUNNING, 160)))
    story.later(40).observe(observation(job, 2, 1, "o2", ENDED, _run(0, ENDED, 160, 199, SUCCESS)))
    story.later(2).add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS)
    return story


def test_the_facts_of_a_record_with_known_times() -> None:
    story = _story()
    facts = facts_of(story.view(), story.now)
    assert facts.state == "succeeded" and facts.revision == len(story.events)
    assert facts.endings == (("preempted", "scheduler"), ("none", "none"))
    assert facts.outcome == ("succeeded", "none", "none")
    assert facts.recoveries == (("0", "resubmit", "supervisor"),)
    assert facts.time_to_running == (20.0,)
    assert facts.recovery == (60.0,)
    assert facts.decision_latency == (1.0, 2.0)
    (budget,) = facts.budgets
    assert (budget.budget, budget.used, budget.remaining) == (2, 1, 1)


def test_a_record_seen_again_is_not_timed_twice() -> None:
    """An end observed again (the same observation, recorded once more after a restart)
    starts no second latency."""
    story = _story()
    i, ended = next(
        (i, e) for i, e in enumerate(story.events)
        if isinstance(e, ev.Observed) and e.obs.state is ENDED
    )  # fmt: skip
    decided = next(
        i for i, e in enumerate(story.events) if isinstance(e, ev.SubmissionAuthorized) and e.n == 2
    )
    assert decided > i
    story.events.insert(decided + 1, attrs.evolve(ended, at=_at(150)))
    facts = facts_of(story.view(), story.now)
    assert facts.decision_latency == (1.0, 2.0)


def test_a_job_that_never_ran_has_no_times() -> None:
    story = Story.with_rules()
    facts = facts_of(story.view(), story.now)
    assert facts.state == "pending"
    assert (facts.time_to_running, facts.recovery, facts.decision_latency) == ((), (), ())


_labels = st.sampled_from(["a", "b", "c"])
_facts = st.builds(
    JobFacts,
    revision=st.integers(0, 9),
    state=_labels,
    settled=st.booleans(),
    endings=st.lists(st.tuples(_labels, _labels), max_size=4).map(tuple),
    outcome=st.none() | st.tuples(_labels, _labels, _labels),
    recoveries=st.lists(st.tuples(_labels, _labels, _labels), max_size=4).map(tuple),
    time_to_running=st.lists(st.floats(0, 1e5), max_size=2).map(tuple),
    recovery=st.lists(st.floats(0, 1e5), max_size=3).map(tuple),
    decision_latency=st.lists(st.floats(0, 400), max_size=3).map(tuple),
)


def _summary(tally: Tally) -> tuple[object, ...]:
    return (
        dict(tally.jobs),
        dict(tally.endings),
        dict(tally.outcomes),
        dict(tally.recoveries),
        {k: (h.counts, h.count) for k, h in tally.histograms.items()},
    )


@given(kept=st.lists(_facts, max_size=6), dropped=st.lists(_facts, max_size=6))
def test_taking_facts_out_leaves_the_sums_of_the_rest(
    kept: list[JobFacts], dropped: list[JobFacts]
) -> None:
    """The watch replaces a record's facts by taking the old ones out: whatever was put in
    and taken out again, the sums are those of what stays (counts exact, no empty keys)."""
    mixed, alone = Tally(), Tally()
    for facts in kept:
        alone.change(facts, 1)
    for facts in [*dropped, *kept]:
        mixed.change(facts, 1)
    for facts in reversed(dropped):
        mixed.change(facts, -1)
    assert _summary(mixed) == _summary(alone)
    assert all(n > 0 for n in mixed.endings.values())
