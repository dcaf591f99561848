"""The cluster's three faces: observer, operator and stopper, and their errors."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import jobdispatch
import pytest
from jobdispatch import (
    Action,
    Actor,
    CauseKind,
    Filter,
    Invalid,
    JobSpec,
    Level,
    NotFound,
    ReadOnly,
    RecoveryPolicy,
    Rule,
    State,
    Unsupported,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import Records
from jobdispatch.testing import job_of

ME = Actor.human("ops")
SPEC = JobSpec(
    command=["train"],
    name="t",
    recovery=RecoveryPolicy(
        rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)]
    ),
)


def _records(cluster: jobdispatch.Cluster) -> Records:
    assert cluster.store is not None, "composed without a store"
    return cluster.store


@pytest.fixture
def cluster() -> jobdispatch.Cluster:
    return jobdispatch.compose(
        MemoryBackend(shape=Shape.SLURM, auto_run=True), store=MemoryRecords()
    )


def test_submit_records_the_plan_and_the_same_key_returns_the_same_job(
    cluster: jobdispatch.Cluster,
) -> None:
    plan = cluster.operator.submit(SPEC, by=ME, supervised=True, idempotency_key="k1")
    assert plan.job is not None
    again = cluster.operator.submit(SPEC, by=ME, supervised=True, idempotency_key="k1")
    assert again.job is not None
    assert again.job == plan.job
    assert [s.job for s in cluster.observer.list()] == [plan.job]
    status = cluster.observer.get(plan.job)
    assert (status.state, status.level, status.name) == (State.PENDING, Level.JOB, "t")


def test_operator_errors(cluster: jobdispatch.Cluster) -> None:
    with pytest.raises(NotFound):
        cluster.operator.cancel("nosuchjob", by=ME)
    plan = cluster.operator.submit(SPEC, by=ME, supervised=True)
    assert plan.job is not None
    receipt = cluster.operator.cancel(plan.job, by=ME, reason="changed my mind")
    assert receipt.committed and receipt.cleanup_complete and receipt.already is None
    again = cluster.operator.cancel(plan.job, by=ME)
    assert not again.committed and again.already is State.CANCELLED
    with pytest.raises(Invalid, match="cancelled already"):
        cluster.operator.resubmit(plan.job, by=ME)
    with pytest.raises(Invalid):
        cluster.operator.release(
            job_of(cluster.operator.submit(SPEC, by=ME, supervised=True)), by=ME
        )
    status = cluster.observer.get(plan.job)
    assert status.state is State.CANCELLED and status.cause.kind is CauseKind.CANCELLED
    assert status.cause.actor == ME and status.cause.detail == "changed my mind"


def test_requeue_without_a_requeuer_is_unsupported() -> None:
    backend = MemoryBackend(shape=Shape.SLURM)

    class NoRequeue:
        name = "no-requeue"

        def __getattr__(self, attr: str) -> Any:
            if attr in ("requeue", "restore_requeue_bit"):
                raise AttributeError(attr)
            return getattr(backend, attr)

    cluster = jobdispatch.compose(NoRequeue(), store=MemoryRecords())
    plan = cluster.operator.submit(JobSpec(command=["x"]), by=ME)
    assert plan.job is not None
    with pytest.raises(Unsupported, match="requeue"):
        cluster.operator.requeue(plan.job, by=ME)


def test_read_only_and_storeless_clusters_refuse_what_they_cannot_do() -> None:
    backend = MemoryBackend(shape=Shape.SLURM)
    read_only = jobdispatch.compose(backend, store=MemoryRecords(), read_only=True)
    with pytest.raises(ReadOnly):
        _ = read_only.operator
    with pytest.raises(ReadOnly):
        _ = read_only.stopper
    storeless = jobdispatch.compose(backend)
    with pytest.raises(ReadOnly, match="record store"):
        _ = storeless.operator
    assert storeless.stopper is not None
    status = storeless.observer.get("abc")
    assert status.level is Level.OBJECT_ONLY and not status.terminal


def test_watch_yields_transitions_until_settled(cluster: jobdispatch.Cluster) -> None:
    plan = cluster.operator.submit(SPEC, by=ME, supervised=True)
    assert plan.job is not None
    cluster.operator.cancel(plan.job, by=ME)
    stop = threading.Event()
    seen = []
    for t in jobdispatch.watch(cluster.observer, plan.job, every=0.01, stop=stop):
        seen.append((t.from_, t.to))
        stop.set()
    assert seen == [(State.PENDING, State.CANCELLED)]


def test_list_filters_by_state(cluster: jobdispatch.Cluster) -> None:
    a = cluster.operator.submit(SPEC, by=ME, supervised=True)
    assert a.job is not None
    b = cluster.operator.submit(SPEC, by=ME, supervised=True)
    assert b.job is not None
    cluster.operator.cancel(b.job, by=ME)
    assert [s.job for s in cluster.observer.list(Filter(states=[State.CANCELLED]))] == [b.job]
    assert [s.job for s in cluster.observer.list(Filter(states=[State.PENDING]))] == [a.job]


def test_an_unreadable_record_is_listed_apart_and_hides_no_other_job() -> None:
    store = MemoryRecords()
    cluster = jobdispatch.compose(MemoryBackend(shape=Shape.SLURM), store=store)
    a, b, c = (cluster.operator.submit(SPEC, by=ME, supervised=True) for _ in range(3))
    assert a.job is not None and b.job is not None and c.job is not None
    store.damage(b.job, 0, "written by a newer version (schema 2, this reads 1)")
    for states in ((), (State.PENDING,), (State.CANCELLED,)):
        found = cluster.observer.list(Filter(states=states))
        # The filter chooses among the readable jobs; an unreadable one is always reported,
        # since its state is what cannot be known.
        expected = [a.job, c.job] if State.CANCELLED not in states else []
        assert [s.job for s in found] == expected
        assert len(found) == len(expected)
        assert [(u.job, u.revision) for u in found.unreadable] == [(b.job, 0)]
        assert "newer version" in str(found.unreadable[0])
    with pytest.raises(jobdispatch.Unreadable, match=f"record {b.job} revision 0"):
        cluster.observer.get(b.job)
    assert cluster.observer.get(a.job).state is State.PENDING


def test_a_record_that_does_not_fold_is_listed_apart_too() -> None:
    store = MemoryRecords()
    cluster = jobdispatch.compose(MemoryBackend(shape=Shape.SLURM), store=store)
    a, b = (cluster.operator.submit(SPEC, by=ME, supervised=True) for _ in range(2))
    assert b.job is not None
    lease = store.acquire(b.job, "h", timedelta(minutes=1))
    # A history the protocol cannot write: something after settled.
    now = datetime.now(UTC)
    store.append(
        b.job, [ev.Settled(at=now, by=Actor.supervisor("s"))], expect_revision=0, owner=lease
    )
    store.append(b.job, [ev.HoldRequested(at=now, by=ME)], expect_revision=1, owner=lease)
    found = cluster.observer.list(Filter(settled=True))
    assert [s.job for s in found] == [a.job]
    assert [u.job for u in found.unreadable] == [b.job]
    assert "does not fold" in str(found.unreadable[0])
    # Read alone, it is the same: stored data this version cannot read, not bad input.
    with pytest.raises(jobdispatch.Unreadable, match=f"record {b.job} does not fold") as caught:
        cluster.observer.get(b.job)
    assert caught.value.job == b.job
    with pytest.raises(jobdispatch.Unreadable, match="does not fold"):
        cluster.operator.cancel(b.job, by=ME)


def test_emergency_stop_needs_no_record_and_says_recovery_may_follow() -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    cluster = jobdispatch.compose(backend)
    receipt = cluster.stopper.emergency_stop("nojob", by=ME, reason="fire")
    assert receipt.report.stopped == () and "recovery" in receipt.note


def test_supersede_plans_first_so_a_refused_spec_changes_nothing(
    cluster: jobdispatch.Cluster,
) -> None:
    old = cluster.operator.submit(SPEC, by=ME, supervised=True)
    assert old.job is not None
    bad = JobSpec(
        command=["x"],
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)]
        ),
    )
    with pytest.raises(jobdispatch.Rejected):
        cluster.operator.supersede(old.job, by=ME, spec=bad, supervised=False)
    assert cluster.observer.get(old.job).state is State.PENDING
    new = cluster.operator.supersede(old.job, by=ME, reason="new data")
    assert new.job is not None
    old_status = cluster.observer.get(old.job)
    assert old_status.state is State.CANCELLED and "new data" in old_status.cause.detail
    assert cluster.observer.get(new.job).supersedes == old.job
    cancel = next(
        e for e in _records(cluster).read(old.job).events if isinstance(e, ev.CancelRequested)
    )
    assert cancel.superseded_by == new.job


def test_the_job_settings_have_one_carrier_and_its_defaults(cluster: jobdispatch.Cluster) -> None:
    """``ev.Options`` holds the per-job defaults; submit and supersede take it whole, or any of
    its fields by name over it, and nothing else restates a default."""
    from typing import get_type_hints

    from jobdispatch.cluster import OptionFields

    assert set(get_type_hints(OptionFields)) == {f.name for f in attrs.fields(ev.Options)}
    default = cluster.operator.submit(SPEC, by=ME, supervised=True)
    assert default.job is not None
    assert _records(cluster).read(default.job).header.options == ev.Options(supervised=True)
    carried = ev.Options(submit_retries=0, unresolved_age=timedelta(minutes=1))
    plan = cluster.operator.submit(SPEC, by=ME, options=carried, supervised=True)
    assert plan.job is not None
    stored = _records(cluster).read(plan.job).header.options
    assert stored == attrs.evolve(carried, supervised=True)
    with pytest.raises(jobdispatch.Invalid, match="submit_retries must not be negative"):
        cluster.operator.submit(SPEC, by=ME, options=ev.Options(supervised=True, submit_retries=-1))
    # supersede takes the carrier it is given whole; without one it keeps only supervision.
    given = ev.Options(supervised=True, submit_retries=1)
    new = cluster.operator.supersede(plan.job, by=ME, options=given)
    assert new.job is not None
    assert _records(cluster).read(new.job).header.options == given
    newer = cluster.operator.supersede(new.job, by=ME, cleanup_deadline=timedelta(hours=1))
    assert newer.job is not None
    assert _records(cluster).read(newer.job).header.options == ev.Options(
        supervised=True, cleanup_deadline=timedelta(hours=1)
    )
