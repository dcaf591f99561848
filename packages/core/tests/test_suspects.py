"""Suspect nodes (``jobdispatch.suspects``): nodes shared by two consecutive ``node-lost`` or
``stalled`` runs are kept out of the job's next submissions for ``[recovery]
exclude_suspects_for``, recorded with the submission's authorization. Properties over drawn
histories first, then the record: what ``next`` authorizes and what the fold keeps."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import Action, Cause, CauseKind, ObjectState, Provenance, RecoveryPolicy, Rule
from jobdispatch.codec import decode_event, decode_header, encode_event, encode_header
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery, ExecutionObs, ObjectObs
from jobdispatch.status import project
from jobdispatch.steps import Authorize, Context
from jobdispatch.suspects import SUSPECT_CAUSES, Run, excluded, runs_of, standing, suspicions
from jobdispatch.testing import SUPERVISOR, T0, Story, observation, plan_for
from jobdispatch.triggers import End
from jobdispatch.types import JobSpec
from jobdispatch.validate import problems

HOLD = timedelta(hours=6)
NODE_LOST = Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER, "node n2 failed")
FAILED = Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, exit_code=1)

_NODES = st.lists(st.sampled_from(["n1", "n2", "n3", "n4"]), max_size=3, unique=True)
_CAUSES = st.sampled_from([CauseKind.NODE_LOST, CauseKind.STALLED, CauseKind.NON_ZERO_EXIT, None])
_ENDS = st.one_of(st.none(), st.integers(0, 48).map(lambda h: T0 + timedelta(hours=h)))
_RUNS = st.lists(st.builds(Run, _CAUSES, _NODES.map(tuple), _ENDS), max_size=8)
_HOLDS = st.integers(1, 24).map(lambda h: timedelta(hours=h))


@given(_RUNS, _HOLDS)
def test_every_suspect_was_on_two_consecutive_suspect_runs(
    runs: list[Run], hold: timedelta
) -> None:
    for s in suspicions(runs, hold):
        assert any(
            a.cause in SUSPECT_CAUSES
            and b.cause in SUSPECT_CAUSES
            and b.ended_at is not None
            and s.until == b.ended_at + hold
            and set(s.nodes) <= set(a.nodes) & set(b.nodes)
            for a, b in itertools.pairwise(runs)
        )


@given(_RUNS, _HOLDS)
def test_every_node_two_consecutive_suspect_runs_shared_is_suspect(
    runs: list[Run], hold: timedelta
) -> None:
    found = suspicions(runs, hold)
    for a, b in itertools.pairwise(runs):
        if a.cause in SUSPECT_CAUSES and b.cause in SUSPECT_CAUSES and b.ended_at is not None:
            shared = set(a.nodes) & set(b.nodes)
            until = b.ended_at + hold
            assert all(any(n in s.nodes and s.until == until for s in found) for n in shared)


@given(_RUNS, _HOLDS, st.integers(0, 96).map(lambda h: T0 + timedelta(hours=h)))
def test_standing_is_what_is_still_suspect_at_now(
    runs: list[Run], hold: timedelta, now: datetime
) -> None:
    found = suspicions(runs, hold)
    nodes, until = standing(found, now)
    assert list(nodes) == sorted(set(nodes))
    assert set(nodes) == {n for s in found if s.until > now for n in s.nodes}
    if nodes:
        assert until is not None and until > now
    else:
        assert until is None


@given(_RUNS, _HOLDS)
def test_a_run_of_another_cause_between_breaks_the_suspicion(
    runs: list[Run], hold: timedelta
) -> None:
    """Interleaving a plain failure after every run leaves no two suspect runs adjacent."""
    broken = [
        r for run in runs for r in (run, Run(CauseKind.NON_ZERO_EXIT, run.nodes, run.ended_at))
    ]
    assert suspicions(broken, hold) == []


def test_a_suspicion_expires_when_its_time_is_up() -> None:
    runs = [Run(CauseKind.NODE_LOST, ("n1",), T0), Run(CauseKind.STALLED, ("n1",), T0)]
    found = suspicions(runs, HOLD)
    assert standing(found, T0 + HOLD - timedelta(seconds=1)) == (("n1",), T0 + HOLD)
    assert standing(found, T0 + HOLD) == ((), None)


# ------------------------------------------------------------------------------ the record


def story(hold: timedelta | None = HOLD) -> Story:
    rule = Rule(on=[CauseKind.NODE_LOST, CauseKind.NON_ZERO_EXIT], action=Action.RESUBMIT, budget=5)
    spec = JobSpec(
        command=["train"],
        name="t",
        recovery=RecoveryPolicy(rules=(rule,), exclude_suspects_for=hold),
    )
    return Story(spec=spec, plan=plan_for(spec))


def ended_on(s: Story, n: int, ref: str, cause: Cause, *nodes: str) -> ObjectObs:
    run = ExecutionObs(
        index=0,
        state=ObjectState.ENDED,
        cause=cause,
        started_at=s.now,
        ended_at=s.now,
        nodes=nodes,
    )
    obs = observation(s.job_id, n, 1, ref, ObjectState.ENDED, run)
    s.observe(obs)
    return obs


def two_lost(s: Story, second: Cause = NODE_LOST) -> ObjectObs:
    """Submission 1 lost on n1 and n2; submission 2 ends ``second`` on n2 and n3."""
    s.launched(1, "o1", running=False)
    s.later(60)
    ended_on(s, 1, "o1", NODE_LOST, "n1", "n2")
    s.launched(2, "o2", trigger=End("o1", 0), rule=0, cause=NODE_LOST, running=False)
    s.later(60)
    return ended_on(s, 2, "o2", second, "n2", "n3")


def test_the_next_submission_keeps_off_the_nodes_two_lost_runs_shared() -> None:
    s = story()
    obs = two_lost(s)
    step = s.next(obs)[0]
    assert isinstance(step, Authorize) and step.submission == 3
    assert step.exclude == ("n2",)
    assert step.exclude_until == s.now + HOLD
    s.commit(step.before(_ctx(s)))
    assert s.fold().submission(3).exclude == ("n2",)  # type: ignore[union-attr]


def test_a_plain_failure_between_makes_nothing_suspect() -> None:
    s = story()
    obs = two_lost(s, second=FAILED)
    step = s.next(obs)[0]
    assert isinstance(step, Authorize) and step.exclude == ()


def test_without_the_setting_nothing_is_excluded() -> None:
    s = story(hold=None)
    obs = two_lost(s)
    step = s.next(obs)[0]
    assert isinstance(step, Authorize) and step.exclude == ()
    assert runs_of(s.fold())[-1].nodes == ("n2", "n3")


def test_a_suspicion_past_its_time_excludes_nothing() -> None:
    s = story()
    two_lost(s)
    assert excluded(s.fold(), s.now + HOLD) == ((), None)
    assert excluded(s.fold(), s.now) == (("n2",), s.now + HOLD)


def _ctx(s: Story) -> Context:
    return Context(at=s.now, by=SUPERVISOR, job=s.fold())


def test_the_exclusion_is_written_only_when_there_is_one() -> None:
    plain = ev.SubmissionAuthorized(at=T0, by=SUPERVISOR, n=1, trigger=End("o1", 0))
    assert b"exclude" not in encode_event(plain)
    with_nodes = ev.SubmissionAuthorized(
        at=T0,
        by=SUPERVISOR,
        n=2,
        trigger=End("o1", 0),
        exclude=("n2",),
        exclude_until=T0 + HOLD,
    )
    assert decode_event(encode_event(with_nodes), revision=1) == with_nodes


def test_a_non_positive_exclusion_time_is_refused_naming_the_field() -> None:
    spec = JobSpec(command=["train"], recovery=RecoveryPolicy(exclude_suspects_for=timedelta(0)))
    assert [p.path for p in problems(spec)] == ["recovery.exclude_suspects_for"]


def test_the_setting_is_written_in_the_header_only_when_set_and_read_back() -> None:
    for hold in (None, HOLD):
        header = story(hold).header
        data = encode_header(header)
        assert (b"exclude_suspects_for" in data) is (hold is not None)
        assert decode_header(data).spec.recovery.exclude_suspects_for == hold


def test_status_shows_what_the_next_submission_would_keep_off_before_it_is_authorized() -> None:
    s = story()
    obs = two_lost(s)
    before = project(s.fold(), Discovery(job=s.job_id, objects=(obs,), at=s.now), s.now)
    # The plan of the next submission, before any authorization carries it.
    assert before.next_exclude == ("n2",) and before.next_exclude_until == s.now + HOLD
    later = s.now + HOLD + timedelta(seconds=1)
    lapsed = project(s.fold(), Discovery(job=s.job_id, objects=(obs,), at=later), later)
    assert lapsed.next_exclude == () and lapsed.next_exclude_until is None
    plain = story(hold=None)
    unset = two_lost(plain)
    shown = project(plain.fold(), Discovery(job=plain.job_id, objects=(unset,)), plain.now)
    assert shown.next_exclude == ()
